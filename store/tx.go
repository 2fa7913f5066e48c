package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/refill-dev/refill"
)

// Tx is one state-store transaction. Every change to refill's state goes
// through one together with the audit entries that record it, so a crash
// can never leave a change without its entry, or an entry without its
// change (docs/design.md §10).
type Tx struct {
	tx     *sql.Tx
	d      dialect
	key    []byte // the audit key (SetAuditKey), nil when unkeyed
	outbox Outbox
	now    func() time.Time // the store's clock
}

// clock is the store's time now.
func (t *Tx) clock() time.Time {
	if t.now == nil {
		return time.Now()
	}
	return t.now()
}

// Update runs fn in one transaction and commits it when fn returns nil.
// Transactions that append to the audit log are serialised (SQLite's write
// lock; an advisory lock on PostgreSQL), so the hash chain never forks.
func (s *Store) Update(ctx context.Context, fn func(tx *Tx) error) error {
	sqltx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("state store: %w", err)
	}
	defer sqltx.Rollback() //nolint:errcheck // a no-op after Commit
	if s.d.lockAudit != "" {
		if _, err := sqltx.ExecContext(ctx, s.d.lockAudit); err != nil {
			return fmt.Errorf("state store: %w", err)
		}
	}
	if err := fn(&Tx{tx: sqltx, d: s.d, key: s.key, outbox: s.outbox, now: s.now}); err != nil {
		return err
	}
	if err := sqltx.Commit(); err != nil {
		return fmt.Errorf("state store: commit: %w", err)
	}
	return nil
}

// SavePlan stores a new plan (see Store.SavePlan).
func (t *Tx) SavePlan(ctx context.Context, p *refill.Plan) error {
	return savePlan(ctx, t.tx, t.d, p)
}

// SetStatus moves a plan's status by compare-and-set (see Store.SetStatus).
func (t *Tx) SetStatus(ctx context.Context, id string, from, to refill.Status) error {
	return setStatus(ctx, t.tx, t.d, id, from, to)
}

// SaveProof records a proof's evidence and its audit entry.
func (t *Tx) SaveProof(ctx context.Context, p *refill.Proof) error {
	if err := saveProof(ctx, t.tx, t.d, p); err != nil {
		return err
	}
	return t.Append(ctx, &refill.Event{Kind: refill.EventProof, Actor: p.ProvenBy, Dataset: p.Dataset, Partition: p.Partition, At: p.ProvenAt,
		Detail: refill.Detail(map[string]any{"passed": p.Passed, "failure": p.Failure, "fingerprint": p.Fingerprint, "message": p.Message})})
}

// SaveSchemas records sources' columns as a plan saw them.
func (t *Tx) SaveSchemas(ctx context.Context, snaps []refill.SchemaSnapshot) error {
	insert := t.d.rebind(`INSERT INTO schema_snapshots (dataset, plan_id, columns, recorded_at) VALUES (?, ?, ?, ?)`)
	now := t.d.timestamp(t.clock())
	for _, sn := range snaps {
		if sn.Dataset == "" {
			return fmt.Errorf("save schemas for plan %s: a snapshot has no dataset", sn.PlanID)
		}
		cols, err := json.Marshal(sn.Columns)
		if err != nil {
			return fmt.Errorf("save schema of %s: %w", sn.Dataset, err)
		}
		if _, err := t.tx.ExecContext(ctx, insert, sn.Dataset, sn.PlanID, string(cols), now); err != nil {
			return fmt.Errorf("save schema of %s: %w", sn.Dataset, err)
		}
	}
	return nil
}

// SaveFlags records partitions the gate found bad.
func (t *Tx) SaveFlags(ctx context.Context, flags []refill.Flag) error {
	insert := t.d.rebind(`INSERT INTO gate_flags (dataset, partition, "check", plan_id, flagged_at) VALUES (?, ?, ?, ?, ?)`)
	now := t.d.timestamp(t.clock())
	for _, f := range flags {
		if _, err := t.tx.ExecContext(ctx, insert, f.Dataset, f.Partition, f.Check, f.PlanID, now); err != nil {
			return fmt.Errorf("save gate flag %s %s: %w", f.Dataset, f.Partition, err)
		}
	}
	return nil
}
