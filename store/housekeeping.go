package store

import (
	"context"
	"fmt"
	"time"

	"github.com/refill-dev/refill"
)

// Waiting returns the plans still waiting to run — pending, ready or
// approved — that were made before cutoff by the real clock (the time of
// their plan_created audit entry, which REFILL_NOW cannot move): the ones
// policy.plan_ttl expires.
func (s *Store) Waiting(ctx context.Context, cutoff time.Time) ([]refill.PlanSummary, error) {
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT p.id, p.status FROM plans p JOIN audit_log a ON a.plan_id = p.id AND a.event = ?
		WHERE p.status IN (?, ?, ?) AND a.at < ? ORDER BY p.seq`),
		string(refill.EventPlanCreated), string(refill.StatusPending), string(refill.StatusReady), string(refill.StatusApproved), s.d.timestamp(cutoff))
	if err != nil {
		return nil, fmt.Errorf("waiting plans: %w", err)
	}
	defer rows.Close()
	var out []refill.PlanSummary
	for rows.Next() {
		var p refill.PlanSummary
		if err := rows.Scan(&p.ID, &p.Status); err != nil {
			return nil, fmt.Errorf("waiting plans: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// KeptSnapshot is a plan whose snapshot tables are still in the warehouse.
type KeptSnapshot struct {
	PlanID string
	Status refill.Status
	Tables []string
}

// KeptSnapshots returns the plans whose snapshot tables have not been
// dropped, with the tables.
func (s *Store) KeptSnapshots(ctx context.Context) ([]KeptSnapshot, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT DISTINCT s.plan_id, p.status, s.snapshot_table FROM snapshots s JOIN plans p ON p.id = s.plan_id
		WHERE s.dropped_at IS NULL ORDER BY s.plan_id, s.snapshot_table`)
	if err != nil {
		return nil, fmt.Errorf("kept snapshots: %w", err)
	}
	defer rows.Close()
	var out []KeptSnapshot
	for rows.Next() {
		var id, status, table string
		if err := rows.Scan(&id, &status, &table); err != nil {
			return nil, fmt.Errorf("kept snapshots: %w", err)
		}
		if n := len(out); n > 0 && out[n-1].PlanID == id {
			out[n-1].Tables = append(out[n-1].Tables, table)
			continue
		}
		out = append(out, KeptSnapshot{PlanID: id, Status: refill.Status(status), Tables: []string{table}})
	}
	return out, rows.Err()
}

// SnapshotDropped marks a plan's snapshot tables dropped from the
// warehouse; the rows stay as evidence of what was copied.
func (t *Tx) SnapshotDropped(ctx context.Context, planID string, at time.Time) error {
	_, err := t.tx.ExecContext(ctx, t.d.rebind(`UPDATE snapshots SET dropped_at = ? WHERE plan_id = ? AND dropped_at IS NULL`), t.d.timestamp(at), planID)
	if err != nil {
		return fmt.Errorf("plan %s: mark snapshot dropped: %w", planID, err)
	}
	return nil
}

// SnapshotKept reports whether a plan's snapshot tables are still there.
func (s *Store) SnapshotKept(ctx context.Context, planID string) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, s.d.rebind(`SELECT count(*) FROM snapshots WHERE plan_id = ? AND dropped_at IS NULL`), planID).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("plan %s: snapshot: %w", planID, err)
	}
	return n > 0, nil
}
