package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/refill-dev/refill"
)

// RecordPublished records that a partition was published, once: a second
// record of the same plan, dataset and partition is refused with
// ErrNotPermitted, so a retried or resumed job can never count twice.
func (t *Tx) RecordPublished(ctx context.Context, p refill.Published) error {
	var rb, ra sql.NullInt64
	var cb, ca string
	if p.Before != nil {
		rb, cb = sql.NullInt64{Int64: p.Before.Rows, Valid: true}, p.Before.Checksum
	}
	if p.After != nil {
		ra, ca = sql.NullInt64{Int64: p.After.Rows, Valid: true}, p.After.Checksum
	}
	res, err := t.tx.ExecContext(ctx, t.d.rebind(`INSERT INTO run_partitions
		(plan_id, dataset, partition, rows_before, checksum_before, rows_after, checksum_after, attempt, output, published_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (plan_id, dataset, partition) DO NOTHING`),
		p.PlanID, p.Dataset, p.Partition, rb, cb, ra, ca, p.Attempt, p.Output, t.d.timestamp(p.At))
	if err != nil {
		return fmt.Errorf("plan %s: record %s %s published: %w", p.PlanID, p.Dataset, p.Partition, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return refill.NotPermittedf("plan %s: %s %s is already published", p.PlanID, p.Dataset, p.Partition)
	}
	return nil
}

// Published returns the partitions a plan's run has published.
func (s *Store) Published(ctx context.Context, planID string) ([]refill.Published, error) {
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT plan_id, dataset, partition, rows_before, checksum_before, rows_after, checksum_after, attempt, output, published_at
		FROM run_partitions WHERE plan_id = ? ORDER BY dataset, partition`), planID)
	if err != nil {
		return nil, fmt.Errorf("run of %s: %w", planID, err)
	}
	defer rows.Close()
	out := []refill.Published{}
	for rows.Next() {
		var p refill.Published
		var rb, ra sql.NullInt64
		var cb, ca string
		var at timestamp
		if err := rows.Scan(&p.PlanID, &p.Dataset, &p.Partition, &rb, &cb, &ra, &ca, &p.Attempt, &p.Output, &at); err != nil {
			return nil, fmt.Errorf("run of %s: %w", planID, err)
		}
		if rb.Valid {
			p.Before = &refill.Digest{Rows: rb.Int64, Checksum: cb}
		}
		if ra.Valid {
			p.After = &refill.Digest{Rows: ra.Int64, Checksum: ca}
		}
		p.At = at.Time
		out = append(out, p)
	}
	return out, rows.Err()
}

// SQLitePath is the state database's file on SQLite, "" on PostgreSQL: River
// opens its own connection to it.
func (s *Store) SQLitePath() string { return s.path }

// IsPublished reports whether one partition of a plan's run is published.
func (s *Store) IsPublished(ctx context.Context, planID, dataset, partition string) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, s.d.rebind(`SELECT count(*) FROM run_partitions WHERE plan_id = ? AND dataset = ? AND partition = ?`),
		planID, dataset, partition).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("run of %s: %w", planID, err)
	}
	return n > 0, nil
}

// RunState is a plan's status and how many times a run of it was started:
// what a partition job checks before it writes, so that a job left over
// from an earlier, stopped or rolled-back run never touches the warehouse.
func (s *Store) RunState(ctx context.Context, planID string) (refill.Status, int, error) {
	var status string
	var runs int
	err := s.db.QueryRowContext(ctx, s.d.rebind(`SELECT status, (SELECT count(*) FROM audit_log WHERE plan_id = ? AND event = ?) FROM plans WHERE id = ?`),
		planID, refill.EventRunStarted, planID).Scan(&status, &runs)
	if err != nil {
		return "", 0, fmt.Errorf("run state of %s: %w", planID, err)
	}
	return refill.Status(status), runs, nil
}

// HoldRunState is RunState held still until release is called: the plan's
// status cannot change meanwhile, because a SetStatus (a run failed,
// cancelled or finished) waits for release, and a SetStatus already under
// way is waited for and its result read. A partition job holds it across
// its warehouse commit, so that the run cannot be failed between the job's
// last look and the commit: either the commit happens before the failure
// is recorded, or the job sees the failure and does not publish.
//
// On PostgreSQL the plan's row is locked FOR SHARE; on SQLite the
// transaction is IMMEDIATE and holds the database's write lock. Either way
// every writer of the store may wait for release, so hold it only for a
// moment, and never across a write to the store.
func (s *Store) HoldRunState(ctx context.Context, planID string) (status refill.Status, runs int, release func(), err error) {
	// The transaction outlives ctx's cancellation until release: rolling it
	// back early would free the lock while the caller still relies on it.
	tx, err := s.db.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		return "", 0, nil, fmt.Errorf("run state of %s: %w", planID, err)
	}
	release = func() { _ = tx.Rollback() }
	var st string
	// The lock is taken first, by its own statement: the count that
	// follows then sees whatever a concurrent status change committed with
	// it (a resumed run's start).
	if err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT status FROM plans WHERE id = ?`+s.d.shareRow), planID).Scan(&st); err != nil {
		release()
		return "", 0, nil, fmt.Errorf("run state of %s: %w", planID, err)
	}
	err = tx.QueryRowContext(ctx, s.d.rebind(`SELECT status, (SELECT count(*) FROM audit_log WHERE plan_id = ? AND event = ?) FROM plans WHERE id = ?`),
		planID, refill.EventRunStarted, planID).Scan(&st, &runs)
	if err != nil {
		release()
		return "", 0, nil, fmt.Errorf("run state of %s: %w", planID, err)
	}
	return refill.Status(st), runs, release, nil
}

// PublishedSince returns publishes by other plans, not rolled back, of the
// partitions planID published, recorded after planID's own: the runs a
// rollback of planID would undo.
func (s *Store) PublishedSince(ctx context.Context, planID string) ([]refill.Published, error) {
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`
		SELECT later.plan_id, later.dataset, later.partition FROM audit_log later
		JOIN audit_log mine ON mine.dataset = later.dataset AND mine.partition = later.partition
		JOIN plans p ON p.id = later.plan_id
		WHERE mine.plan_id = ? AND mine.event = ? AND later.event = ? AND later.plan_id <> ? AND later.seq > mine.seq AND p.status <> ?
		ORDER BY later.seq`), planID, refill.EventPartitionPublished, refill.EventPartitionPublished, planID, string(refill.StatusRolledBack))
	if err != nil {
		return nil, fmt.Errorf("later runs over %s: %w", planID, err)
	}
	defer rows.Close()
	var out []refill.Published
	for rows.Next() {
		var p refill.Published
		if err := rows.Scan(&p.PlanID, &p.Dataset, &p.Partition); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// OutageWait is a partition waiting out an outage: what for, since when.
type OutageWait struct {
	PlanID    string    `json:"plan_id"`
	Dataset   string    `json:"dataset"`
	Partition string    `json:"partition"`
	For       string    `json:"waiting_for"`
	Since     time.Time `json:"since"`
}

// SetOutageWait records a partition waiting (w.For set), or that its wait
// ended (w.For "").
func (s *Store) SetOutageWait(ctx context.Context, w OutageWait) error {
	var err error
	if w.For == "" {
		_, err = s.db.ExecContext(ctx, s.d.rebind(`DELETE FROM outage_waits WHERE plan_id = ? AND dataset = ? AND partition = ?`), w.PlanID, w.Dataset, w.Partition)
	} else {
		_, err = s.db.ExecContext(ctx, s.d.rebind(`INSERT INTO outage_waits (plan_id, dataset, partition, waiting_for, since) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (plan_id, dataset, partition) DO UPDATE SET waiting_for = excluded.waiting_for, since = excluded.since`),
			w.PlanID, w.Dataset, w.Partition, w.For, s.d.timestamp(w.Since))
	}
	if err != nil {
		return fmt.Errorf("plan %s: outage wait: %w", w.PlanID, err)
	}
	return nil
}

// ClearOutageWaits forgets every wait of a plan's partitions: its run
// began, ended or let go, and no wait of an earlier one still holds.
func (t *Tx) ClearOutageWaits(ctx context.Context, planID string) error {
	if _, err := t.tx.ExecContext(ctx, t.d.rebind(`DELETE FROM outage_waits WHERE plan_id = ?`), planID); err != nil {
		return fmt.Errorf("plan %s: outage waits: %w", planID, err)
	}
	return nil
}

// OutageWaits lists a plan's partitions waiting out an outage, by dataset
// and partition.
func (s *Store) OutageWaits(ctx context.Context, planID string) ([]OutageWait, error) {
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT dataset, partition, waiting_for, since FROM outage_waits WHERE plan_id = ? ORDER BY dataset, partition`), planID)
	if err != nil {
		return nil, fmt.Errorf("plan %s: outage waits: %w", planID, err)
	}
	defer rows.Close()
	var out []OutageWait
	for rows.Next() {
		w := OutageWait{PlanID: planID}
		var since timestamp
		if err := rows.Scan(&w.Dataset, &w.Partition, &w.For, &since); err != nil {
			return nil, fmt.Errorf("plan %s: outage waits: %w", planID, err)
		}
		w.Since = since.Time
		out = append(out, w)
	}
	return out, rows.Err()
}

// Attempt is one run's attempt at a partition of a job that writes
// outside refill's transactions.
type Attempt struct {
	PlanID    string    `json:"plan_id"`
	Dataset   string    `json:"dataset"`
	Partition string    `json:"partition"`
	Run       int       `json:"run"`
	Key       string    `json:"key"`
	Holder    string    `json:"holder"`
	Started   time.Time `json:"started_at"`
	// AliveUntil is renewed while the job runs (RenewAttempt): an attempt
	// without an outcome whose AliveUntil is still to come is in flight.
	AliveUntil time.Time `json:"alive_until"`
	// Outcome is "" while unknown, then published, failed or not_ran.
	Outcome string `json:"outcome"`
}

// InFlight reports whether an attempt without an outcome is still being
// worked on at now: its holder renewed it lately, and is not a process of
// this host known to be gone.
func (a Attempt) InFlight(now time.Time) bool {
	return a.Outcome == "" && a.AliveUntil.After(now) && Lease{Holder: a.Holder}.HolderAlive()
}

// Attempt outcomes.
const (
	AttemptPublished = "published"
	AttemptFailed    = "failed"
	AttemptNotRan    = "not_ran"
)

// BeginAttempt records a before its job starts, alive until a.AliveUntil,
// unless an earlier attempt at the same partition, of any run, has no
// outcome: then it records nothing and returns that one — in flight
// (InFlight: another worker is on it) or of unknown outcome (its job may
// have had its effect, or not).
func (s *Store) BeginAttempt(ctx context.Context, a Attempt) (prior *Attempt, err error) {
	err = s.Update(ctx, func(tx *Tx) error {
		prior = nil
		rows, err := tx.tx.QueryContext(ctx, tx.d.rebind(`SELECT run, key, holder, started_at, alive_until FROM job_attempts
			WHERE plan_id = ? AND dataset = ? AND partition = ? AND outcome = '' ORDER BY run DESC`), a.PlanID, a.Dataset, a.Partition)
		if err != nil {
			return err
		}
		for rows.Next() && prior == nil {
			u := Attempt{PlanID: a.PlanID, Dataset: a.Dataset, Partition: a.Partition}
			var at, alive timestamp
			if err := rows.Scan(&u.Run, &u.Key, &u.Holder, &at, &alive); err != nil {
				rows.Close()
				return err
			}
			u.Started, u.AliveUntil = at.Time, alive.Time
			prior = &u
		}
		rows.Close()
		if prior != nil {
			return nil
		}
		_, err = tx.tx.ExecContext(ctx, tx.d.rebind(`INSERT INTO job_attempts (plan_id, dataset, partition, run, key, holder, started_at, alive_until, outcome)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, '') ON CONFLICT (plan_id, dataset, partition, run)
			DO UPDATE SET holder = excluded.holder, started_at = excluded.started_at, alive_until = excluded.alive_until, outcome = ''`),
			a.PlanID, a.Dataset, a.Partition, a.Run, a.Key, a.Holder, tx.d.timestamp(a.Started), tx.d.timestamp(a.AliveUntil))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s %s: record the attempt: %w", a.Dataset, a.Partition, err)
	}
	return prior, nil
}

// RenewAttempt keeps a's attempt in flight until until, while its job
// runs; it does nothing once the attempt has an outcome.
func (s *Store) RenewAttempt(ctx context.Context, a Attempt, until time.Time) error {
	_, err := s.db.ExecContext(ctx, s.d.rebind(`UPDATE job_attempts SET alive_until = ? WHERE plan_id = ? AND dataset = ? AND partition = ? AND run = ? AND holder = ? AND outcome = ''`),
		s.d.timestamp(until), a.PlanID, a.Dataset, a.Partition, a.Run, a.Holder)
	if err != nil {
		return fmt.Errorf("%s %s: renew the attempt: %w", a.Dataset, a.Partition, err)
	}
	return nil
}

// EndAttempt records the outcome of every attempt at a partition whose
// outcome is unknown: the job's, once known, or a person's word on it.
func (t *Tx) EndAttempt(ctx context.Context, planID, dataset, partition, outcome string) error {
	_, err := t.tx.ExecContext(ctx, t.d.rebind(`UPDATE job_attempts SET outcome = ? WHERE plan_id = ? AND dataset = ? AND partition = ? AND outcome = ''`),
		outcome, planID, dataset, partition)
	if err != nil {
		return fmt.Errorf("%s %s: record the attempt's outcome: %w", dataset, partition, err)
	}
	return nil
}

// Review is a partition waiting for a person's word (refill resolve).
type Review struct {
	Dataset   string    `json:"dataset"`
	Partition string    `json:"partition"`
	Why       string    `json:"why"`
	At        time.Time `json:"at"`
}

// Reviews returns a plan's partitions waiting for refill resolve, as the
// audit log records them: needs_review entries no resolution followed.
func (s *Store) Reviews(ctx context.Context, planID string) ([]Review, error) {
	evs, err := entriesOf(ctx, s.db, s.d, s.auditKey(), []refill.EventKind{refill.EventNeedsReview, refill.EventResolved}, planID, "")
	if err != nil {
		return nil, err
	}
	open := map[string]Review{}
	var order []string
	for i := range evs {
		e := &evs[i]
		k := key(e.Dataset, e.Partition)
		if e.Kind == refill.EventResolved {
			delete(open, k)
			continue
		}
		if _, ok := open[k]; !ok {
			order = append(order, k)
		}
		open[k] = Review{Dataset: e.Dataset, Partition: e.Partition, Why: str(detailOf(e), "why"), At: e.At}
	}
	var out []Review
	for _, k := range order {
		if r, ok := open[k]; ok {
			out = append(out, r)
			delete(open, k) // a review raised again after a resolution is in order twice
		}
	}
	return out, nil
}
