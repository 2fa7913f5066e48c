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
	for _, s := range []refill.Status{refill.StatusPending, refill.StatusReady, refill.StatusApproved, refill.StatusRunning, refill.StatusFailed} {
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

// Approvals returns a plan's approvals and rejections, oldest first.
func (s *Store) Approvals(ctx context.Context, planID string) ([]refill.Approval, error) {
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT plan_id, plan_hash, actor, decision, note, at FROM approvals WHERE plan_id = ? ORDER BY seq`), planID)
	if err != nil {
		return nil, fmt.Errorf("approvals of %s: %w", planID, err)
	}
	defer rows.Close()
	out := []refill.Approval{}
	for rows.Next() {
		var a refill.Approval
		var at timestamp
		if err := rows.Scan(&a.PlanID, &a.PlanHash, &a.Actor, &a.Decision, &a.Note, &at); err != nil {
			return nil, fmt.Errorf("approvals of %s: %w", planID, err)
		}
		a.At = at.Time
		out = append(out, a)
	}
	return out, rows.Err()
}

// ApprovalsOf returns the approvals and rejections of several plans in
// one query, by plan, each in the order they were made.
func (s *Store) ApprovalsOf(ctx context.Context, planIDs []string) (map[string][]refill.Approval, error) {
	out := map[string][]refill.Approval{}
	if len(planIDs) == 0 {
		return out, nil
	}
	args := make([]any, len(planIDs))
	for i, id := range planIDs {
		args[i] = id
	}
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT plan_id, plan_hash, actor, decision, note, at FROM approvals WHERE plan_id IN (`+placeholders(len(planIDs))+`) ORDER BY seq`), args...)
	if err != nil {
		return nil, fmt.Errorf("approvals: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var a refill.Approval
		var at timestamp
		if err := rows.Scan(&a.PlanID, &a.PlanHash, &a.Actor, &a.Decision, &a.Note, &at); err != nil {
			return nil, fmt.Errorf("approvals: %w", err)
		}
		a.At = at.Time
		out[a.PlanID] = append(out[a.PlanID], a)
	}
	return out, rows.Err()
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

// DropUnauditedStep removes plan planID's row for step when the audit log
// has no entry of that step by that row's actor: a row written into the
// checklist table behind refill's back completes nothing, and must not
// stop the step from being done for real. Checklist steps and their audit
// events share their names (snapshot, scope, signoff).
func (t *Tx) DropUnauditedStep(ctx context.Context, planID string, step refill.ChecklistItem) error {
	_, err := t.tx.ExecContext(ctx, t.d.rebind(`DELETE FROM checklist WHERE plan_id = ? AND step = ? AND NOT EXISTS (
		SELECT 1 FROM audit_log a WHERE a.plan_id = checklist.plan_id AND a.event = checklist.step AND a.actor = checklist.actor AND a.partition = '')`), planID, string(step))
	if err != nil {
		return fmt.Errorf("plan %s: record %s: %w", planID, step, err)
	}
	return nil
}

// Checklist returns a plan's recorded checklist steps in the order done.
func (s *Store) Checklist(ctx context.Context, planID string) ([]refill.ChecklistStep, error) {
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT plan_id, step, actor, note, detail, at FROM checklist WHERE plan_id = ? ORDER BY seq`), planID)
	if err != nil {
		return nil, fmt.Errorf("checklist of %s: %w", planID, err)
	}
	defer rows.Close()
	out := []refill.ChecklistStep{}
	for rows.Next() {
		var st refill.ChecklistStep
		var at timestamp
		var detail string
		if err := rows.Scan(&st.PlanID, &st.Step, &st.Actor, &st.Note, &detail, &at); err != nil {
			return nil, fmt.Errorf("checklist of %s: %w", planID, err)
		}
		st.At, st.Detail = at.Time, json.RawMessage(detail)
		out = append(out, st)
	}
	return out, rows.Err()
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
// request (targets and range) whose content differs (another hash)
// superseded by p, and returns their IDs: the inputs changed, and an
// approval of the old content must not carry over. An identical re-plan
// supersedes nothing; the earlier plan keeps its lock.
func (t *Tx) Supersede(ctx context.Context, p *refill.Plan) ([]string, error) {
	targets, err := json.Marshal(p.Request.Targets)
	if err != nil {
		return nil, err
	}
	rows, err := t.tx.QueryContext(ctx, t.d.rebind(`SELECT id, status FROM plans WHERE targets = ? AND range_from = ? AND range_to = ? AND id <> ? AND hash <> ? AND status IN (?, ?, ?)`),
		string(targets), p.Request.From, p.Request.To, p.ID, p.Hash, string(refill.StatusPending), string(refill.StatusReady), string(refill.StatusApproved))
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
