package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/refill-dev/refill"
)

// liveStatuses lists, for SQL, the statuses in which a plan holds its
// partitions (refill.Status.Live).
var liveStatuses = func() string {
	var out []string
	for _, s := range []refill.Status{refill.StatusPending, refill.StatusReady, refill.StatusApproved, refill.StatusRunning, refill.StatusFailed, refill.StatusNeedsReview} {
		out = append(out, "'"+string(s)+"'")
	}
	return strings.Join(out, ", ")
}()

// AddApproval records an approval or rejection.
func (t *Tx) AddApproval(ctx context.Context, a refill.Approval) error {
	_, err := t.tx.ExecContext(ctx, t.d.rebind(`INSERT INTO approvals (plan_id, plan_hash, actor, decision, note, at) VALUES (?, ?, ?, ?, ?, ?)`),
		a.PlanID, a.PlanHash, a.Actor, a.Decision, a.Note, t.d.timestamp(a.At))
	if err != nil {
		return fmt.Errorf("plan %s: record %s: %w", a.PlanID, a.Decision, err)
	}
	return nil
}

// AddStep records a manual checklist step; each step happens once per plan.
func (t *Tx) AddStep(ctx context.Context, st refill.ChecklistStep) error {
	detail := string(st.Detail)
	if detail == "" {
		detail = "{}"
	}
	res, err := t.tx.ExecContext(ctx, t.d.rebind(`INSERT INTO checklist (plan_id, step, actor, note, detail, at) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (plan_id, step) DO NOTHING`), st.PlanID, st.Step, st.Actor, st.Note, detail, t.d.timestamp(st.At))
	if err != nil {
		return fmt.Errorf("plan %s: record %s: %w", st.PlanID, st.Step, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return refill.NotPermittedf("plan %s: the %s step is already done", st.PlanID, st.Step)
	}
	return nil
}

// SaveSnapshot records the partitions a snapshot copied.
func (t *Tx) SaveSnapshot(ctx context.Context, parts []refill.SnapshotPart) error {
	ins := t.d.rebind(`INSERT INTO snapshots (plan_id, dataset, tbl, partition, snapshot_table, rows, checksum, source) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
	for _, p := range parts {
		if _, err := t.tx.ExecContext(ctx, ins, p.PlanID, p.Dataset, p.Table, p.Partition, p.SnapshotTable, p.Digest.Rows, p.Digest.Checksum, t.d.boolean(p.Source)); err != nil {
			return fmt.Errorf("plan %s: record snapshot of %s %s: %w", p.PlanID, p.Dataset, p.Partition, err)
		}
	}
	return nil
}

// Snapshot returns the partitions snapshotted for a plan.
func (s *Store) Snapshot(ctx context.Context, planID string) ([]refill.SnapshotPart, error) {
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT plan_id, dataset, tbl, partition, snapshot_table, rows, checksum, source
		FROM snapshots WHERE plan_id = ? ORDER BY dataset, partition`), planID)
	if err != nil {
		return nil, fmt.Errorf("snapshot of %s: %w", planID, err)
	}
	defer rows.Close()
	out := []refill.SnapshotPart{}
	for rows.Next() {
		var p refill.SnapshotPart
		if err := rows.Scan(&p.PlanID, &p.Dataset, &p.Table, &p.Partition, &p.SnapshotTable, &p.Digest.Rows, &p.Digest.Checksum, &p.Source); err != nil {
			return nil, fmt.Errorf("snapshot of %s: %w", planID, err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// Holder is a live plan that holds some of the same dataset partitions as
// another plan and was made before it.
type Holder struct {
	PlanID     string        `json:"plan_id"`
	Status     refill.Status `json:"status"`
	Dataset    string        `json:"dataset"`
	Partitions int           `json:"partitions"`
}

// Holders returns the live plans made before planID that share any dataset
// partition with it: while one is live, planID may not be approved or run.
func (s *Store) Holders(ctx context.Context, planID string) ([]Holder, error) {
	return holders(ctx, s.db, s.d, planID)
}

// Holders is Store.Holders inside the transaction: checked there, under the
// lock every state change takes, two overlapping plans cannot both be
// approved at the same instant.
func (t *Tx) Holders(ctx context.Context, planID string) ([]Holder, error) {
	return holders(ctx, t.tx, t.d, planID)
}

func holders(ctx context.Context, q querier, d dialect, planID string) ([]Holder, error) {
	rows, err := q.QueryContext(ctx, d.rebind(`
		SELECT o.id, o.status, theirs.dataset, count(*)
		FROM plan_partitions mine
		JOIN plan_partitions theirs ON theirs.dataset = mine.dataset AND theirs.partition = mine.partition AND theirs.plan_id <> mine.plan_id
		JOIN plans o ON o.id = theirs.plan_id
		JOIN plans me ON me.id = mine.plan_id
		WHERE mine.plan_id = ? AND o.status IN (`+liveStatuses+`) AND o.seq < me.seq
		GROUP BY o.id, o.status, theirs.dataset, o.seq
		ORDER BY o.seq, theirs.dataset`), planID)
	if err != nil {
		return nil, fmt.Errorf("locks of %s: %w", planID, err)
	}
	defer rows.Close()
	var out []Holder
	for rows.Next() {
		var h Holder
		if err := rows.Scan(&h.PlanID, &h.Status, &h.Dataset, &h.Partitions); err != nil {
			return nil, fmt.Errorf("locks of %s: %w", planID, err)
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

// Supersede marks every earlier live, not yet running plan of the same
// request (targets, range and selectors) whose content differs (another hash)
// superseded by p, and returns their IDs: the inputs changed, and an
// approval of the old content must not carry over. An identical re-plan
// supersedes nothing; the earlier plan keeps its lock.
func (t *Tx) Supersede(ctx context.Context, p *refill.Plan) ([]string, error) {
	targets, err := json.Marshal(p.Request.Targets)
	if err != nil {
		return nil, err
	}
	selection, err := selectionKey(p.Request)
	if err != nil {
		return nil, err
	}
	rows, err := t.tx.QueryContext(ctx, t.d.rebind(`SELECT id, status FROM plans WHERE targets = ? AND selection = ? AND range_from = ? AND range_to = ? AND id <> ? AND hash <> ? AND status IN (?, ?, ?)`),
		string(targets), selection, p.Request.From, p.Request.To, p.ID, p.Hash, string(refill.StatusPending), string(refill.StatusReady), string(refill.StatusApproved))
	if err != nil {
		return nil, fmt.Errorf("supersede: %w", err)
	}
	type old struct {
		id     string
		status refill.Status
	}
	var olds []old
	for rows.Next() {
		var o old
		if err := rows.Scan(&o.id, &o.status); err != nil {
			rows.Close()
			return nil, fmt.Errorf("supersede: %w", err)
		}
		olds = append(olds, o)
	}
	rows.Close()
	var ids []string
	for _, o := range olds {
		if err := t.SetStatus(ctx, o.id, o.status, refill.StatusSuperseded); err != nil {
			return nil, err
		}
		ids = append(ids, o.id)
	}
	return ids, nil
}

// Touching returns the IDs of every plan that rewrites a dataset partition,
// oldest first: the start of `refill history`.
func (s *Store) Touching(ctx context.Context, dataset, partition string) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT p.id FROM plan_partitions pp JOIN plans p ON p.id = pp.plan_id
		WHERE pp.dataset = ? AND pp.partition = ? ORDER BY p.seq`), dataset, partition)
	if err != nil {
		return nil, fmt.Errorf("history of %s %s: %w", dataset, partition, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}
