package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/refill-dev/refill"
)

// AcceptSchema records snap as the drift baseline of its dataset, accepted
// by snap.AcceptedBy for snap.Reason. The caller appends the audit entry in
// the same transaction.
func (t *Tx) AcceptSchema(ctx context.Context, snap refill.SchemaSnapshot) error {
	if snap.AcceptedBy == "" {
		return fmt.Errorf("accept schema of %s: no one accepted it", snap.Dataset)
	}
	cols, err := json.Marshal(snap.Columns)
	if err != nil {
		return err
	}
	_, err = t.tx.ExecContext(ctx, t.d.rebind(`INSERT INTO schema_snapshots (dataset, plan_id, columns, recorded_at, accepted_by, reason) VALUES (?, ?, ?, ?, ?, ?)`),
		snap.Dataset, snap.PlanID, string(cols), t.d.timestamp(t.clock()), snap.AcceptedBy, snap.Reason)
	if err != nil {
		return fmt.Errorf("accept schema of %s: %w", snap.Dataset, err)
	}
	return nil
}

// Lease is who holds a plan's run, and until when.
type Lease struct {
	PlanID  string    `json:"plan_id"`
	Holder  string    `json:"holder"`
	Expires time.Time `json:"expires"`
}

// Lease returns the plan's run lease, ok=false when none is held.
func (s *Store) Lease(ctx context.Context, planID string) (Lease, bool, error) {
	return lease(ctx, s.db, s.d, planID)
}

func lease(ctx context.Context, q querier, d dialect, planID string) (Lease, bool, error) {
	l := Lease{PlanID: planID}
	var exp timestamp
	err := q.QueryRowContext(ctx, d.rebind(`SELECT holder, expires_at FROM run_leases WHERE plan_id = ?`), planID).Scan(&l.Holder, &exp)
	if errors.Is(err, sql.ErrNoRows) {
		return Lease{}, false, nil
	}
	if err != nil {
		return Lease{}, false, fmt.Errorf("lease of %s: %w", planID, err)
	}
	l.Expires = exp.Time
	return l, true, nil
}

// TakeLease gives the plan's run to holder until expires, inside the
// transaction that starts (or resumes) the run. It fails with ErrLocked
// (which is ErrNotPermitted too) while another holder's lease is alive:
// alive(l) decides, beyond the expiry, whether a holder is still there
// (its process on this host, say). Of two takes at once, Update's write
// lock decides: the second sees the first's lease.
func (t *Tx) TakeLease(ctx context.Context, planID, holder string, expires time.Time, alive func(Lease) bool) error {
	cur, ok, err := lease(ctx, t.tx, t.d, planID)
	if err != nil {
		return err
	}
	if ok && cur.Holder != holder && t.clock().Before(cur.Expires) && alive(cur) {
		return refill.Lockedf("plan %s is running now: %s holds its run until %s (renewed while it lives); wait for it, or run refill apply again once it has stopped",
			planID, cur.Holder, cur.Expires.UTC().Format(time.RFC3339))
	}
	_, err = t.tx.ExecContext(ctx, t.d.rebind(`INSERT INTO run_leases (plan_id, holder, expires_at) VALUES (?, ?, ?)
		ON CONFLICT (plan_id) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at`),
		planID, holder, t.d.timestamp(expires))
	if err != nil {
		return fmt.Errorf("lease of %s: %w", planID, err)
	}
	return nil
}

// RenewLease extends holder's lease; it fails with ErrNotPermitted when the
// lease was lost (another holder took it after it expired).
func (s *Store) RenewLease(ctx context.Context, planID, holder string, expires time.Time) error {
	res, err := s.db.ExecContext(ctx, s.d.rebind(`UPDATE run_leases SET expires_at = ? WHERE plan_id = ? AND holder = ?`),
		s.d.timestamp(expires), planID, holder)
	if err != nil {
		return fmt.Errorf("lease of %s: %w", planID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return refill.NotPermittedf("plan %s: the run's lease passed to another holder", planID)
	}
	return nil
}

// ReleaseLease gives up holder's lease, if it still has it.
func (t *Tx) ReleaseLease(ctx context.Context, planID, holder string) error {
	_, err := t.tx.ExecContext(ctx, t.d.rebind(`DELETE FROM run_leases WHERE plan_id = ? AND holder = ?`), planID, holder)
	if err != nil {
		return fmt.Errorf("lease of %s: %w", planID, err)
	}
	return nil
}

// PendingOp is an operation on a plan that writes to the warehouse and the
// state store (a snapshot, a rollback), recorded before the warehouse is
// touched and removed when the state store records the outcome.
type PendingOp struct {
	PlanID  string          `json:"plan_id"`
	Op      string          `json:"op"`
	Actor   string          `json:"actor"`
	Detail  json.RawMessage `json:"detail"`
	Started time.Time       `json:"started"`
}

// BeginOp records the intent of op on a plan and returns it; when the same
// op was begun before and never finished (a crash, a failed write), it
// returns that one with again=true, so the caller finishes or cleans it up.
func (s *Store) BeginOp(ctx context.Context, op PendingOp) (got PendingOp, again bool, err error) {
	err = s.Update(ctx, func(tx *Tx) error {
		var detail string
		var at timestamp
		e := tx.tx.QueryRowContext(ctx, tx.d.rebind(`SELECT actor, detail, started_at FROM pending_ops WHERE plan_id = ? AND op = ?`), op.PlanID, op.Op).
			Scan(&got.Actor, &detail, &at)
		switch {
		case e == nil:
			got.PlanID, got.Op, got.Detail, got.Started, again = op.PlanID, op.Op, json.RawMessage(detail), at.Time, true
			return nil
		case !errors.Is(e, sql.ErrNoRows):
			return e
		}
		if len(op.Detail) == 0 {
			op.Detail = json.RawMessage("{}")
		}
		if op.Started.IsZero() {
			op.Started = tx.clock()
		}
		got = op
		_, e = tx.tx.ExecContext(ctx, tx.d.rebind(`INSERT INTO pending_ops (plan_id, op, actor, detail, started_at) VALUES (?, ?, ?, ?, ?)`),
			op.PlanID, op.Op, op.Actor, string(op.Detail), tx.d.timestamp(op.Started))
		return e
	})
	if err != nil {
		return PendingOp{}, false, fmt.Errorf("plan %s: record %s intent: %w", op.PlanID, op.Op, err)
	}
	return got, again, nil
}

// Pending returns plan planID's unfinished op, if one was begun and never
// finished.
func (s *Store) Pending(ctx context.Context, planID, op string) (PendingOp, bool, error) {
	got := PendingOp{PlanID: planID, Op: op}
	var detail string
	var at timestamp
	err := s.db.QueryRowContext(ctx, s.d.rebind(`SELECT actor, detail, started_at FROM pending_ops WHERE plan_id = ? AND op = ?`), planID, op).
		Scan(&got.Actor, &detail, &at)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return PendingOp{}, false, nil
	case err != nil:
		return PendingOp{}, false, fmt.Errorf("plan %s: pending %s: %w", planID, op, err)
	}
	got.Detail, got.Started = json.RawMessage(detail), at.Time
	return got, true, nil
}

// EndOp removes a finished operation's intent, inside the transaction that
// records its outcome.
func (t *Tx) EndOp(ctx context.Context, planID, op string) error {
	_, err := t.tx.ExecContext(ctx, t.d.rebind(`DELETE FROM pending_ops WHERE plan_id = ? AND op = ?`), planID, op)
	if err != nil {
		return fmt.Errorf("plan %s: finish %s: %w", planID, op, err)
	}
	return nil
}

// DropOp removes an intent outside any other change: the operation was
// cleaned up and left nothing to record.
func (s *Store) DropOp(ctx context.Context, planID, op string) error {
	return s.Update(ctx, func(tx *Tx) error { return tx.EndOp(ctx, planID, op) })
}

// ID is the state store's identity, made once when it was created. The
// warehouse keeps the audit log's anchors under it.
func (s *Store) ID(ctx context.Context) (string, error) {
	var id string
	if err := s.db.QueryRowContext(ctx, `SELECT store_id FROM refill_meta WHERE id = 1`).Scan(&id); err != nil {
		return "", fmt.Errorf("state store identity: %w", err)
	}
	return id, nil
}
