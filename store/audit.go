package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/refill-dev/refill"
)

// Append adds e to the audit log, chained to the entry before it. It runs
// inside the transaction of the change it records, so the two commit or
// fail together. Seq, PrevHash and Hash are set here.
func (t *Tx) Append(ctx context.Context, e *refill.Event) error {
	if e.Kind == "" || e.Actor == "" {
		return fmt.Errorf("audit: an entry needs an event and an actor")
	}
	if e.At.IsZero() {
		e.At = time.Now()
	}
	// Microseconds: what PostgreSQL keeps, so the hash survives a reload.
	e.At = e.At.UTC().Truncate(time.Microsecond)
	e.Seq, e.PrevHash = 1, refill.GenesisHash
	var seq int64
	var hash string
	err := t.tx.QueryRowContext(ctx, `SELECT seq, hash FROM audit_head WHERE id = 1`).Scan(&seq, &hash)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return fmt.Errorf("audit: %w", err)
	default:
		e.Seq, e.PrevHash = seq+1, hash
	}
	if len(e.Detail) == 0 {
		e.Detail = []byte("{}")
	}
	e.Hash = e.ComputeHash()
	_, err = t.tx.ExecContext(ctx, t.d.rebind(`
		INSERT INTO audit_log (seq, at, actor, event, plan_id, dataset, partition, detail, prev_hash, hash)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		e.Seq, t.d.timestamp(e.At), e.Actor, e.Kind, e.PlanID, e.Dataset, e.Partition, string(e.Detail), e.PrevHash, e.Hash)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	_, err = t.tx.ExecContext(ctx, t.d.rebind(`
		INSERT INTO audit_head (id, seq, hash) VALUES (1, ?, ?)
		ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash`), e.Seq, e.Hash)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	return nil
}

// AuditFilter selects audit entries.
type AuditFilter struct {
	Kind      string
	PlanID    string
	Dataset   string
	Partition string
}

// Audit returns audit entries in log order.
func (s *Store) Audit(ctx context.Context, f AuditFilter) ([]refill.Event, error) {
	q := `SELECT seq, at, actor, event, plan_id, dataset, partition, detail, prev_hash, hash FROM audit_log WHERE 1 = 1`
	var args []any
	if f.Kind != "" {
		q += ` AND event = ?`
		args = append(args, f.Kind)
	}
	if f.PlanID != "" {
		q += ` AND plan_id = ?`
		args = append(args, f.PlanID)
	}
	if f.Dataset != "" {
		q += ` AND dataset = ?`
		args = append(args, f.Dataset)
	}
	if f.Partition != "" {
		q += ` AND partition = ?`
		args = append(args, f.Partition)
	}
	rows, err := s.db.QueryContext(ctx, s.d.rebind(q+` ORDER BY seq`), args...)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	defer rows.Close()
	out := []refill.Event{}
	for rows.Next() {
		var e refill.Event
		var at timestamp
		var detail string
		if err := rows.Scan(&e.Seq, &at, &e.Actor, &e.Kind, &e.PlanID, &e.Dataset, &e.Partition, &detail, &e.PrevHash, &e.Hash); err != nil {
			return nil, fmt.Errorf("audit log: %w", err)
		}
		e.At, e.Detail = at.Time, []byte(detail)
		out = append(out, e)
	}
	return out, rows.Err()
}

// AuditReport is what a verification of the chain found.
type AuditReport struct {
	Entries int    `json:"entries"`
	Head    string `json:"head"`
	OK      bool   `json:"ok"`
	// Broken names the first entry that fails, and how.
	Broken *BrokenEntry `json:"broken,omitempty"`
}

// BrokenEntry is the first place the chain does not hold.
type BrokenEntry struct {
	Seq     int64  `json:"seq"`
	Problem string `json:"problem"`
}

// VerifyAudit walks the chain from the first entry: every entry must follow
// the one before it (seq one more, prev_hash its hash), hash to its stored
// hash, and the last must be the recorded head. It returns a report and, when
// the chain is broken, an error wrapping refill.ErrVerification that names
// the first broken entry.
func (s *Store) VerifyAudit(ctx context.Context) (AuditReport, error) {
	entries, err := s.Audit(ctx, AuditFilter{})
	if err != nil {
		return AuditReport{}, err
	}
	rep := AuditReport{Entries: len(entries), OK: true}
	broken := func(seq int64, format string, args ...any) (AuditReport, error) {
		rep.OK = false
		rep.Broken = &BrokenEntry{Seq: seq, Problem: fmt.Sprintf(format, args...)}
		return rep, fmt.Errorf("%w: audit log entry %d: %s", refill.ErrVerification, seq, rep.Broken.Problem)
	}
	prev, prevSeq := refill.GenesisHash, int64(0)
	for _, e := range entries {
		switch {
		case e.Seq != prevSeq+1:
			return broken(prevSeq+1, "is missing: the entry after %d is %d (removed or reordered)", prevSeq, e.Seq)
		case e.PrevHash != prev:
			return broken(e.Seq, "does not follow entry %d: its previous hash is %s, entry %d's hash is %s (an entry was removed, replaced or reordered)", prevSeq, short(e.PrevHash), prevSeq, short(prev))
		case e.ComputeHash() != e.Hash:
			return broken(e.Seq, "was altered: its content (%s by %s, plan %s) no longer hashes to its stored hash", e.Kind, e.Actor, e.PlanID)
		}
		prev, prevSeq = e.Hash, e.Seq
	}
	var headSeq int64
	var headHash string
	err = s.db.QueryRowContext(ctx, `SELECT seq, hash FROM audit_head WHERE id = 1`).Scan(&headSeq, &headHash)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if len(entries) > 0 {
			return broken(prevSeq, "the log's head record is missing")
		}
	case err != nil:
		return rep, fmt.Errorf("audit log: %w", err)
	case headSeq != prevSeq || headHash != prev:
		return broken(prevSeq+1, "the log ends at entry %d but its head says %d: entries were removed from the end", prevSeq, headSeq)
	}
	rep.Head = prev
	return rep, nil
}

func short(h string) string {
	if len(h) > 19 {
		return h[:19] + "…"
	}
	return h
}
