package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/refill-dev/refill"
)

// Outcome is how a partition's last attempt ended, by the audit log.
type Outcome string

// Outcomes.
const (
	OutcomePublished Outcome = "published"
	OutcomeFailed    Outcome = "failed"
)

// LastOutcomes returns, for each partition of dataset in [from, to] that
// was ever built, how its last attempt ended: published, or failed (a
// partition whose attempts ran out). One query, however many partitions.
func (s *Store) LastOutcomes(ctx context.Context, dataset, from, to string) (map[string]Outcome, error) {
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT a.partition, a.event FROM audit_log a
		WHERE a.dataset = ? AND a.partition >= ? AND a.partition <= ? AND a.event IN (?, ?)
		  AND a.seq = (SELECT max(b.seq) FROM audit_log b WHERE b.dataset = a.dataset AND b.partition = a.partition AND b.event IN (?, ?))`),
		dataset, from, to, string(refill.EventPartitionPublished), string(refill.EventRunFailed),
		string(refill.EventPartitionPublished), string(refill.EventRunFailed))
	if err != nil {
		return nil, fmt.Errorf("last outcomes of %s: %w", dataset, err)
	}
	defer rows.Close()
	out := map[string]Outcome{}
	for rows.Next() {
		var part, ev string
		if err := rows.Scan(&part, &ev); err != nil {
			return nil, fmt.Errorf("last outcomes of %s: %w", dataset, err)
		}
		if refill.EventKind(ev) == refill.EventRunFailed {
			out[part] = OutcomeFailed
		} else {
			out[part] = OutcomePublished
		}
	}
	return out, rows.Err()
}

// PlanTouch is a plan that rebuilds some partitions of a dataset.
type PlanTouch struct {
	PlanID      string
	Status      refill.Status
	Tier        refill.Tier
	RequestedBy string
	From, To    string
}

// PlansTouching returns the plans that rebuild any partition of dataset in
// [from, to], newest first.
func (s *Store) PlansTouching(ctx context.Context, dataset, from, to string) ([]PlanTouch, error) {
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT p.id, p.status, p.tier, p.requested_by, p.range_from, p.range_to FROM plans p
		WHERE p.id IN (SELECT pp.plan_id FROM plan_partitions pp WHERE pp.dataset = ? AND pp.partition >= ? AND pp.partition <= ?)
		ORDER BY p.seq DESC`), dataset, from, to)
	if err != nil {
		return nil, fmt.Errorf("plans over %s %s..%s: %w", dataset, from, to, err)
	}
	defer rows.Close()
	var out []PlanTouch
	for rows.Next() {
		var t PlanTouch
		if err := rows.Scan(&t.PlanID, &t.Status, &t.Tier, &t.RequestedBy, &t.From, &t.To); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// WatchState is the watcher's last decision about a plan.
type WatchState struct {
	PlanID      string
	Dataset     string
	Action      string
	Fingerprint string
	At          time.Time
}

// WatchState returns the watcher's last decision about plan id, if any.
func (s *Store) WatchState(ctx context.Context, id string) (WatchState, bool, error) {
	w := WatchState{PlanID: id}
	var at timestamp
	err := s.db.QueryRowContext(ctx, s.d.rebind(`SELECT dataset, action, fingerprint, decided_at FROM watch_state WHERE plan_id = ?`), id).
		Scan(&w.Dataset, &w.Action, &w.Fingerprint, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return w, false, nil
	}
	if err != nil {
		return w, false, fmt.Errorf("watch state of %s: %w", id, err)
	}
	w.At = at.Time
	return w, true, nil
}

// SetWatchState records the watcher's decision about a plan; the caller
// appends its audit entry in the same transaction.
func (t *Tx) SetWatchState(ctx context.Context, w WatchState) error {
	_, err := t.tx.ExecContext(ctx, t.d.rebind(`INSERT INTO watch_state (plan_id, dataset, action, fingerprint, decided_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (plan_id) DO UPDATE SET action = excluded.action, fingerprint = excluded.fingerprint, decided_at = excluded.decided_at`),
		w.PlanID, w.Dataset, w.Action, w.Fingerprint, t.d.timestamp(w.At))
	if err != nil {
		return fmt.Errorf("watch state of %s: %w", w.PlanID, err)
	}
	return nil
}
