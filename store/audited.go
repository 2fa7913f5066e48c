package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/refill-dev/refill"
)

// Each table's rows as the ledger sees them (ledger.go), and the readers
// that return only the rows that count.

// schemaRows are schema_snapshots: schemas a plan saw ("seen") and
// schemas accepted as the drift baseline ("accepted", by a person with
// refill schema accept, or by an applied plan).
var schemaRows = &rowKind{table: "schema_snapshots", kinds: []refill.EventKind{refill.EventSchemaAccepted, refill.EventRunFinished, refill.EventGateResult},
	claims: func(e *refill.Event) []claim {
		m := detailOf(e)
		switch e.Kind {
		case refill.EventSchemaAccepted:
			var cols struct {
				Columns []refill.Column `json:"columns"`
			}
			_ = json.Unmarshal(e.Detail, &cols)
			return []claim{{key: key("accepted", e.Dataset, e.Actor, str(m, "reason")), digest: digestOf(cols.Columns)}}
		case refill.EventRunFinished:
			// Written before applied plans wrote one schema_accepted entry
			// per dataset: the datasets alone, not their columns.
			var out []claim
			list, _ := m["schemas_accepted"].([]any)
			for _, ds := range list {
				if name, ok := ds.(string); ok {
					out = append(out, claim{key: key("accepted", name, e.Actor, "applied plan "+e.PlanID)})
				}
			}
			return out
		case refill.EventGateResult:
			var seen struct {
				Schemas map[string]string `json:"schemas"`
				At      string            `json:"at"`
			}
			if e.Dataset != "" || json.Unmarshal(e.Detail, &seen) != nil || seen.At == "apply" {
				return nil
			}
			if seen.Schemas == nil {
				// Written before a plan's gate entry named the schemas it
				// saw: it makes every schema row of its plan, whatever
				// their columns.
				return []claim{{key: key("seen", e.PlanID), shared: true}}
			}
			var out []claim
			for ds, d := range seen.Schemas {
				out = append(out, claim{key: key("seen", ds, e.PlanID), digest: d})
			}
			return out
		}
		return nil
	}}

// SchemaDigests are the digests of the columns a plan's gate saw, by
// dataset: its gate_result entry carries them, so the schema_snapshots
// rows it records count (ledger.go).
func SchemaDigests(snaps []refill.SchemaSnapshot) map[string]string {
	out := map[string]string{}
	for _, s := range snaps {
		out[s.Dataset] = digestOf(s.Columns)
	}
	return out
}

// schemaRow is a schema_snapshots row.
type schemaRow struct {
	id     int64
	snap   refill.SchemaSnapshot
	digest string
}

func (r schemaRow) ledger() ledgerRow {
	lr := ledgerRow{id: strconv.FormatInt(r.id, 10), digest: r.digest, legacy: key("seen", r.snap.PlanID)}
	if r.snap.AcceptedBy != "" {
		lr.key = key("accepted", r.snap.Dataset, r.snap.AcceptedBy, r.snap.Reason)
		lr.what = fmt.Sprintf("the schema of %s accepted by %s (%s)", r.snap.Dataset, r.snap.AcceptedBy, clipText(r.snap.Reason))
	} else {
		lr.key = key("seen", r.snap.Dataset, r.snap.PlanID)
		lr.what = fmt.Sprintf("the schema of %s as plan %s saw it", r.snap.Dataset, r.snap.PlanID)
	}
	return lr
}

func schemaRowsOf(ctx context.Context, q querier, d dialect, dataset string) ([]schemaRow, error) {
	query := `SELECT id, dataset, plan_id, columns, accepted_by, reason FROM schema_snapshots`
	var args []any
	if dataset != "" {
		query += ` WHERE dataset = ?`
		args = append(args, dataset)
	}
	rows, err := q.QueryContext(ctx, d.rebind(query+` ORDER BY id`), args...)
	if err != nil {
		return nil, fmt.Errorf("schemas of %s: %w", dataset, err)
	}
	defer rows.Close()
	var out []schemaRow
	for rows.Next() {
		var r schemaRow
		var cols string
		var by, reason sql.NullString
		if err := rows.Scan(&r.id, &r.snap.Dataset, &r.snap.PlanID, &cols, &by, &reason); err != nil {
			return nil, fmt.Errorf("schemas of %s: %w", dataset, err)
		}
		if err := json.Unmarshal([]byte(cols), &r.snap.Columns); err != nil {
			return nil, fmt.Errorf("schemas of %s: row %d: %w", dataset, r.id, err)
		}
		r.snap.AcceptedBy, r.snap.Reason = by.String, reason.String
		r.digest = digestOf(r.snap.Columns)
		out = append(out, r)
	}
	return out, rows.Err()
}

// schemaEntries reads the entries that make a dataset's schema rows: its
// acceptances, and the entries of the plans that saw or accepted one.
func schemaEntries(ctx context.Context, q querier, d dialect, akey []byte, dataset string, rows []schemaRow) ([]refill.Event, error) {
	evs, err := entriesOf(ctx, q, d, akey, []refill.EventKind{refill.EventSchemaAccepted}, "", dataset)
	if err != nil {
		return nil, err
	}
	plans := map[string]bool{}
	for _, r := range rows {
		if r.snap.PlanID != "" && !plans[r.snap.PlanID] {
			plans[r.snap.PlanID] = true
			more, err := entriesOf(ctx, q, d, akey, []refill.EventKind{refill.EventRunFinished, refill.EventGateResult}, r.snap.PlanID, "")
			if err != nil {
				return nil, err
			}
			evs = append(evs, more...)
		}
	}
	sortBySeq(evs)
	return evs, nil
}

// SchemaBaseline returns the schema drift is judged against: the one
// accepted last (by a person, or by applying a plan that saw it), or else
// the first one ever recorded. A plan that merely sees a new schema — even a
// blocked plan of another request — never moves the baseline. Only rows the
// audit log made count: a baseline written into the table behind refill's
// back moves nothing.
func (s *Store) SchemaBaseline(ctx context.Context, dataset string) (refill.SchemaSnapshot, bool, error) {
	rows, err := schemaRowsOf(ctx, s.db, s.d, dataset)
	if err != nil || len(rows) == 0 {
		return refill.SchemaSnapshot{}, false, err
	}
	evs, err := schemaEntries(ctx, s.db, s.d, s.auditKey(), dataset, rows)
	if err != nil {
		return refill.SchemaSnapshot{}, false, err
	}
	lrows := make([]ledgerRow, len(rows))
	for i, r := range rows {
		lrows[i] = r.ledger()
	}
	verdicts, _ := schemaRows.settle(lrows, evs)
	for i := len(rows) - 1; i >= 0; i-- {
		if verdicts[i].counts && rows[i].snap.AcceptedBy != "" {
			return rows[i].snap, true, nil
		}
	}
	for i, r := range rows {
		if verdicts[i].counts && r.snap.AcceptedBy == "" {
			return r.snap, true, nil
		}
	}
	return refill.SchemaSnapshot{}, false, nil
}

// Approvals returns a plan's approvals and rejections that count, oldest
// first: a row written into the table behind refill's back approves
// nothing.
func (s *Store) Approvals(ctx context.Context, planID string) ([]refill.Approval, error) {
	all, err := s.ApprovalsOf(ctx, []string{planID})
	if err != nil {
		return nil, err
	}
	out := all[planID]
	if out == nil {
		out = []refill.Approval{}
	}
	return out, nil
}

type approvalRow struct {
	seq int64
	a   refill.Approval
}

// approvalsOf reads the approvals rows of planIDs; all of them with all.
func approvalsOf(ctx context.Context, q querier, d dialect, planIDs []string, all bool) ([]approvalRow, error) {
	query := `SELECT seq, plan_id, plan_hash, actor, decision, note, at FROM approvals`
	var args []any
	if !all {
		if len(planIDs) == 0 {
			return nil, nil
		}
		query += ` WHERE plan_id IN (` + placeholders(len(planIDs)) + `)`
		for _, id := range planIDs {
			args = append(args, id)
		}
	}
	rows, err := q.QueryContext(ctx, d.rebind(query+` ORDER BY seq`), args...)
	if err != nil {
		return nil, fmt.Errorf("approvals: %w", err)
	}
	defer rows.Close()
	var out []approvalRow
	for rows.Next() {
		var r approvalRow
		var at timestamp
		if err := rows.Scan(&r.seq, &r.a.PlanID, &r.a.PlanHash, &r.a.Actor, &r.a.Decision, &r.a.Note, &at); err != nil {
			return nil, fmt.Errorf("approvals: %w", err)
		}
		r.a.At = at.Time
		out = append(out, r)
	}
	return out, rows.Err()
}

func (r approvalRow) ledger() ledgerRow {
	return ledgerRow{id: strconv.FormatInt(r.seq, 10), key: key(r.a.PlanID, string(r.a.Decision), r.a.Actor, r.a.PlanHash),
		what: fmt.Sprintf("the %s of plan %s by %s", r.a.Decision, r.a.PlanID, r.a.Actor)}
}

// ApprovalsOf returns the approvals and rejections that count of several
// plans, by plan, each in the order they were made.
func (s *Store) ApprovalsOf(ctx context.Context, planIDs []string) (map[string][]refill.Approval, error) {
	out := map[string][]refill.Approval{}
	rows, err := approvalsOf(ctx, s.db, s.d, planIDs, false)
	if err != nil || len(rows) == 0 {
		return out, err
	}
	byPlan := map[string][]approvalRow{}
	for _, r := range rows {
		byPlan[r.a.PlanID] = append(byPlan[r.a.PlanID], r)
	}
	for id, rs := range byPlan {
		evs, err := entriesOf(ctx, s.db, s.d, s.auditKey(), approvalRows.kinds, id, "")
		if err != nil {
			return nil, err
		}
		lrows := make([]ledgerRow, len(rs))
		for i, r := range rs {
			lrows[i] = r.ledger()
		}
		verdicts, _ := approvalRows.settle(lrows, evs)
		for i, r := range rs {
			if verdicts[i].counts {
				out[id] = append(out[id], r.a)
			}
		}
	}
	return out, nil
}

type checklistRow struct {
	seq int64
	st  refill.ChecklistStep
}

func (r checklistRow) ledger() ledgerRow {
	return ledgerRow{id: strconv.FormatInt(r.seq, 10), key: key(r.st.PlanID, string(r.st.Step), r.st.Actor),
		what: fmt.Sprintf("the %s step of plan %s by %s", r.st.Step, r.st.PlanID, r.st.Actor)}
}

func checklistOf(ctx context.Context, q querier, d dialect, planID string) ([]checklistRow, error) {
	query := `SELECT seq, plan_id, step, actor, note, detail, at FROM checklist`
	var args []any
	if planID != "" {
		query += ` WHERE plan_id = ?`
		args = append(args, planID)
	}
	rows, err := q.QueryContext(ctx, d.rebind(query+` ORDER BY seq`), args...)
	if err != nil {
		return nil, fmt.Errorf("checklist of %s: %w", planID, err)
	}
	defer rows.Close()
	var out []checklistRow
	for rows.Next() {
		var r checklistRow
		var at timestamp
		var detail string
		if err := rows.Scan(&r.seq, &r.st.PlanID, &r.st.Step, &r.st.Actor, &r.st.Note, &detail, &at); err != nil {
			return nil, fmt.Errorf("checklist of %s: %w", planID, err)
		}
		r.st.At, r.st.Detail = at.Time, json.RawMessage(detail)
		out = append(out, r)
	}
	return out, rows.Err()
}

// countedSteps returns the plan's checklist rows with their verdicts.
func countedSteps(ctx context.Context, q querier, d dialect, akey []byte, planID string) ([]checklistRow, []verdict, error) {
	rows, err := checklistOf(ctx, q, d, planID)
	if err != nil || len(rows) == 0 {
		return nil, nil, err
	}
	evs, err := entriesOf(ctx, q, d, akey, checklistRows.kinds, planID, "")
	if err != nil {
		return nil, nil, err
	}
	lrows := make([]ledgerRow, len(rows))
	for i, r := range rows {
		lrows[i] = r.ledger()
	}
	verdicts, _ := checklistRows.settle(lrows, evs)
	return rows, verdicts, nil
}

// Checklist returns a plan's checklist steps that count, in the order
// done: a row written into the table behind refill's back completes
// nothing.
func (s *Store) Checklist(ctx context.Context, planID string) ([]refill.ChecklistStep, error) {
	rows, verdicts, err := countedSteps(ctx, s.db, s.d, s.auditKey(), planID)
	if err != nil {
		return nil, err
	}
	out := []refill.ChecklistStep{}
	for i, r := range rows {
		if verdicts[i].counts {
			out = append(out, r.st)
		}
	}
	return out, nil
}

// DropUnauditedStep removes plan planID's row for step when it does not
// count (no audit entry made it): a row written into the checklist table
// behind refill's back completes nothing, and must not stop the step from
// being done for real.
func (t *Tx) DropUnauditedStep(ctx context.Context, planID string, step refill.ChecklistItem) error {
	rows, verdicts, err := countedSteps(ctx, t.tx, t.d, t.key, planID)
	if err != nil {
		return err
	}
	for i, r := range rows {
		if r.st.Step == step && !verdicts[i].counts {
			if _, err := t.tx.ExecContext(ctx, t.d.rebind(`DELETE FROM checklist WHERE seq = ?`), r.seq); err != nil {
				return fmt.Errorf("plan %s: record %s: %w", planID, step, err)
			}
		}
	}
	return nil
}

type acceptanceRow struct {
	id int64
	a  refill.Acceptance
}

func (r acceptanceRow) ledger() ledgerRow {
	group := key(r.a.Dataset, r.a.Partition, r.a.Check, r.a.Column)
	return ledgerRow{id: strconv.FormatInt(r.id, 10), key: key(group, r.a.Measured, r.a.By, r.a.Reason), group: group, ended: r.a.Revoked != nil,
		what: fmt.Sprintf("the acceptance of %s %s %s by %s", r.a.Dataset, r.a.Partition, r.a.Check, r.a.By)}
}

func acceptancesOf(ctx context.Context, q querier, d dialect, dataset, partition string) ([]acceptanceRow, error) {
	query := `SELECT id, dataset, partition, check_name, column_name, measured, accepted_by, reason, accepted_at, revoked_by, revoked_reason, revoked_at FROM acceptances WHERE 1 = 1`
	var args []any
	if dataset != "" {
		query += ` AND dataset = ?`
		args = append(args, dataset)
	}
	if partition != "" {
		query += ` AND partition = ?`
		args = append(args, partition)
	}
	rows, err := q.QueryContext(ctx, d.rebind(query+` ORDER BY id`), args...)
	if err != nil {
		return nil, fmt.Errorf("acceptances of %s: %w", dataset, err)
	}
	defer rows.Close()
	var out []acceptanceRow
	for rows.Next() {
		var r acceptanceRow
		var at timestamp
		var rby, rreason sql.NullString
		var rat sql.Null[timestamp]
		if err := rows.Scan(&r.id, &r.a.Dataset, &r.a.Partition, &r.a.Check, &r.a.Column, &r.a.Measured, &r.a.By, &r.a.Reason, &at, &rby, &rreason, &rat); err != nil {
			return nil, fmt.Errorf("acceptances of %s: %w", dataset, err)
		}
		r.a.At = at.Time
		if rat.Valid {
			r.a.Revoked = &refill.Accepted{By: rby.String, Reason: rreason.String, At: rat.V.Time}
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// countedAcceptances returns the acceptances with what the log says of
// each: whether an entry made it, and the revocation that ended it.
func countedAcceptances(ctx context.Context, q querier, d dialect, akey []byte, dataset, partition string) ([]acceptanceRow, []verdict, error) {
	rows, err := acceptancesOf(ctx, q, d, dataset, partition)
	if err != nil || len(rows) == 0 {
		return nil, nil, err
	}
	evs, err := entriesOf(ctx, q, d, akey, acceptanceRows.kinds, "", dataset)
	if err != nil {
		return nil, nil, err
	}
	lrows := make([]ledgerRow, len(rows))
	for i, r := range rows {
		lrows[i] = r.ledger()
	}
	verdicts, _ := acceptanceRows.settle(lrows, evs)
	return rows, verdicts, nil
}

// Acceptances lists a dataset's acceptances that an audit entry made,
// oldest first; with partition set, only that partition's. Whether one
// was revoked is the log's word, not the row's. The newest for a
// (partition, check, column) is the one in force.
func (s *Store) Acceptances(ctx context.Context, dataset, partition string) ([]refill.Acceptance, error) {
	rows, verdicts, err := countedAcceptances(ctx, s.db, s.d, s.auditKey(), dataset, partition)
	if err != nil {
		return nil, err
	}
	out := []refill.Acceptance{}
	for i, r := range rows {
		v := verdicts[i]
		if v.made == nil {
			continue
		}
		a := r.a
		switch e := v.ended; {
		case e == nil:
			a.Revoked = nil
		case a.Revoked == nil:
			a.Revoked = &refill.Accepted{By: e.Actor, Reason: str(detailOf(e), "reason"), At: e.At}
		}
		out = append(out, a)
	}
	return out, nil
}

// settleAcceptances brings one finding's rows in line with the log before
// an acceptance or a revocation is recorded: a row no entry made is
// removed (it must not stand in for, nor block, the real one), and a row
// the log revoked is marked so.
func (t *Tx) settleAcceptances(ctx context.Context, a refill.Acceptance) error {
	rows, verdicts, err := countedAcceptances(ctx, t.tx, t.d, t.key, a.Dataset, a.Partition)
	if err != nil {
		return err
	}
	for i, r := range rows {
		if r.a.Check != a.Check || r.a.Column != a.Column {
			continue
		}
		switch v := verdicts[i]; {
		case v.made == nil:
			_, err = t.tx.ExecContext(ctx, t.d.rebind(`DELETE FROM acceptances WHERE id = ?`), r.id)
		case v.ended != nil && r.a.Revoked == nil:
			_, err = t.tx.ExecContext(ctx, t.d.rebind(`UPDATE acceptances SET revoked_by = ?, revoked_reason = ?, revoked_at = ? WHERE id = ?`),
				v.ended.Actor, str(detailOf(v.ended), "reason"), t.d.timestamp(v.ended.At), r.id)
		}
		if err != nil {
			return fmt.Errorf("acceptances of %s %s: %w", a.Dataset, a.Partition, err)
		}
	}
	return nil
}

// Flagged returns every partition of dataset the gate flagged, as the
// audit log records it (each flag has its entry): a flag written into the
// table behind refill's back takes no partition out of history, and one
// deleted from it still does.
func (s *Store) Flagged(ctx context.Context, dataset string) (map[string]bool, error) {
	evs, err := entriesOf(ctx, s.db, s.d, s.auditKey(), flagRows.kinds, "", dataset)
	if err != nil {
		return nil, fmt.Errorf("gate flags of %s: %w", dataset, err)
	}
	out := map[string]bool{}
	for i := range evs {
		if len(flagRows.claims(&evs[i])) > 0 {
			out[evs[i].Partition] = true
		}
	}
	return out, nil
}

type flagRow struct {
	seq int64
	f   refill.Flag
}

// flagRowsOf reads the gate_flags rows of dataset, or all with "".
func flagRowsOf(ctx context.Context, q querier, d dialect, dataset string) ([]flagRow, error) {
	query := `SELECT seq, dataset, partition, "check", plan_id FROM gate_flags`
	var args []any
	if dataset != "" {
		query += ` WHERE dataset = ?`
		args = append(args, dataset)
	}
	rows, err := q.QueryContext(ctx, d.rebind(query+` ORDER BY seq`), args...)
	if err != nil {
		return nil, fmt.Errorf("gate flags of %s: %w", dataset, err)
	}
	defer rows.Close()
	var out []flagRow
	for rows.Next() {
		var r flagRow
		if err := rows.Scan(&r.seq, &r.f.Dataset, &r.f.Partition, &r.f.Check, &r.f.PlanID); err != nil {
			return nil, fmt.Errorf("gate flags of %s: %w", dataset, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func flagLedger(seq int64, f refill.Flag) ledgerRow {
	return ledgerRow{id: strconv.FormatInt(seq, 10), key: key(f.Dataset, f.Partition, f.Check, f.PlanID),
		what: fmt.Sprintf("the %s flag of %s %s by plan %s", f.Check, f.Dataset, f.Partition, f.PlanID)}
}

// Freeze returns the freeze in force, if any: the audit log's newest
// freeze or unfreeze decides, so a freeze whose row was deleted still
// holds until an audited unfreeze, and a row no entry made freezes
// nothing.
func (s *Store) Freeze(ctx context.Context) (refill.Freeze, bool, error) {
	return freeze(ctx, s.db, s.d, s.auditKey())
}

func freeze(ctx context.Context, q querier, d dialect, akey []byte) (refill.Freeze, bool, error) {
	evs, err := entriesOf(ctx, q, d, akey, freezeRows.kinds, "", "")
	if err != nil {
		return refill.Freeze{}, false, err
	}
	c := freezeRows.current(evs, "", false)
	if c == nil || c.end {
		return refill.Freeze{}, false, nil
	}
	if row, ok, err := freezeRow(ctx, q); err != nil {
		return refill.Freeze{}, false, err
	} else if ok && key(row.By, row.Reason) == c.key {
		return row, true, nil
	}
	// The row is gone or was altered: the entry says what holds.
	return refill.Freeze{By: c.event.Actor, Reason: str(detailOf(&c.event), "reason"), At: c.event.At}, true, nil
}

// freezeRow reads the freezes table's row.
func freezeRow(ctx context.Context, q querier) (refill.Freeze, bool, error) {
	var f refill.Freeze
	var at timestamp
	err := q.QueryRowContext(ctx, `SELECT frozen_by, reason, frozen_at FROM freezes WHERE id = 1`).Scan(&f.By, &f.Reason, &at)
	if err == sql.ErrNoRows {
		return f, false, nil
	}
	if err != nil {
		return f, false, fmt.Errorf("freeze: %w", err)
	}
	f.At = at.Time
	return f, true, nil
}

// CancelRequested returns the request to stop plan's run, if the audit
// log records one: deleting its row does not let the run go on, and a row
// no entry made stops nothing.
func (s *Store) CancelRequested(ctx context.Context, planID string) (refill.CancelRequest, bool, error) {
	evs, err := entriesOf(ctx, s.db, s.d, s.auditKey(), cancelRows.kinds, planID, "")
	if err != nil {
		return refill.CancelRequest{}, false, fmt.Errorf("plan %s: cancel request: %w", planID, err)
	}
	c := cancelRows.current(evs, planID, true)
	if c == nil {
		return refill.CancelRequest{PlanID: planID}, false, nil
	}
	req := refill.CancelRequest{PlanID: planID}
	var at timestamp
	err = s.db.QueryRowContext(ctx, s.d.rebind(`SELECT actor, reason, requested_at FROM cancel_requests WHERE plan_id = ?`), planID).Scan(&req.Actor, &req.Reason, &at)
	if err == nil && key(planID, req.Actor, req.Reason) == c.key {
		req.At = at.Time
		return req, true, nil
	}
	if err != nil && err != sql.ErrNoRows {
		return req, false, fmt.Errorf("plan %s: cancel request: %w", planID, err)
	}
	// The row is gone or was altered: the entry says what was asked.
	return refill.CancelRequest{PlanID: planID, Actor: c.event.Actor, Reason: str(detailOf(&c.event), "reason"), At: c.event.At}, true, nil
}

// tokenLedger is a token row as the ledger sees it.
func tokenLedger(tok refill.Token, hash string) ledgerRow {
	return ledgerRow{id: tok.ID, key: key(tok.ID, tok.User), group: tok.ID, digest: tokenDigest(hash, tok.ExpiresAt), ended: !tok.RevokedAt.IsZero(),
		what: fmt.Sprintf("the token %s of %s", tok.ID, tok.User)}
}

// countedToken applies the log to one token: nil when no entry made it
// (with its hash), else the token with its revocation as the log says.
func countedToken(ctx context.Context, q querier, d dialect, akey []byte, tok refill.Token, hash string) (*refill.Token, error) {
	evs, err := entriesOf(ctx, q, d, akey, tokenRows.kinds, "", "")
	if err != nil {
		return nil, err
	}
	v, _ := tokenRows.settle([]ledgerRow{tokenLedger(tok, hash)}, evs)
	if v[0].made == nil {
		return nil, nil
	}
	switch e := v[0].ended; {
	case e == nil:
		tok.RevokedAt = time.Time{}
	case tok.RevokedAt.IsZero():
		tok.RevokedAt = e.At
	}
	return &tok, nil
}

// sortBySeq orders entries gathered by several queries as the log does.
func sortBySeq(evs []refill.Event) {
	slices.SortFunc(evs, func(a, b refill.Event) int { return cmp.Compare(a.Seq, b.Seq) })
}

// clipText shortens a text for a report line.
func clipText(s string) string {
	if len(s) > 60 {
		return strings.ToValidUTF8(s[:60], "") + "…"
	}
	return s
}

// VerifyRows checks every state row that changes a decision against the
// audit log (ledger.go): rows no entry made, entries whose row is gone,
// rows that say they were ended when the log does not (or the reverse), a
// freeze or cancel request whose row disagrees with the log. What it finds
// counts for nothing already (each reader applies the same rules); refill
// audit verify reports it so that someone writing the state store behind
// refill's back is seen.
func (s *Store) VerifyRows(ctx context.Context) ([]RowProblem, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("state rows: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	q, d, akey := querier(tx), s.d, s.auditKey()
	var problems []RowProblem
	check := func(k *rowKind, rows []ledgerRow) error {
		evs, err := entriesOf(ctx, q, d, akey, k.kinds, "", "")
		if err != nil {
			return err
		}
		_, ps := k.settle(rows, evs)
		problems = append(problems, ps...)
		return nil
	}
	var lrows []ledgerRow

	aps, err := approvalsOf(ctx, q, d, nil, true)
	if err != nil {
		return nil, err
	}
	for _, r := range aps {
		lrows = append(lrows, r.ledger())
	}
	if err := check(approvalRows, lrows); err != nil {
		return nil, err
	}

	steps, err := checklistOf(ctx, q, d, "")
	if err != nil {
		return nil, err
	}
	lrows = nil
	for _, r := range steps {
		lrows = append(lrows, r.ledger())
	}
	if err := check(checklistRows, lrows); err != nil {
		return nil, err
	}

	accs, err := acceptancesOf(ctx, q, d, "", "")
	if err != nil {
		return nil, err
	}
	lrows = nil
	for _, r := range accs {
		lrows = append(lrows, r.ledger())
	}
	if err := check(acceptanceRows, lrows); err != nil {
		return nil, err
	}

	flags, err := flagRowsOf(ctx, q, d, "")
	if err != nil {
		return nil, err
	}
	lrows = nil
	for _, r := range flags {
		lrows = append(lrows, flagLedger(r.seq, r.f))
	}
	if err := check(flagRows, lrows); err != nil {
		return nil, err
	}

	schemas, err := schemaRowsOf(ctx, q, d, "")
	if err != nil {
		return nil, err
	}
	lrows = nil
	for _, r := range schemas {
		lrows = append(lrows, r.ledger())
	}
	if err := check(schemaRows, lrows); err != nil {
		return nil, err
	}

	toks, err := q.QueryContext(ctx, `SELECT id, user_name, created_by, created_at, expires_at, revoked_at, hash FROM api_tokens ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	lrows = nil
	for toks.Next() {
		tok, hash, err := scanToken(toks)
		if err != nil {
			toks.Close()
			return nil, err
		}
		lrows = append(lrows, tokenLedger(tok, hash))
	}
	toks.Close()
	if err := check(tokenRows, lrows); err != nil {
		return nil, err
	}

	edges, err := lineageRowsOf(ctx, q)
	if err != nil {
		return nil, err
	}
	lrows = nil
	for _, e := range edges {
		lrows = append(lrows, e.ledger())
	}
	if err := check(lineageRows, lrows); err != nil {
		return nil, err
	}

	// A plan's row is its hash as its plan_created entry recorded it.
	made := map[string]string{}
	pevs, err := entriesOf(ctx, q, d, akey, []refill.EventKind{refill.EventPlanCreated}, "", "")
	if err != nil {
		return nil, err
	}
	for i := range pevs {
		if _, seen := made[pevs[i].PlanID]; !seen {
			made[pevs[i].PlanID] = str(detailOf(&pevs[i]), "hash")
		}
	}
	prows, err := q.QueryContext(ctx, `SELECT id, hash, body FROM plans ORDER BY seq`)
	if err != nil {
		return nil, fmt.Errorf("plans: %w", err)
	}
	for prows.Next() {
		var id, hash, body string
		if err := prows.Scan(&id, &hash, &body); err != nil {
			prows.Close()
			return nil, err
		}
		var p refill.Plan
		_ = json.Unmarshal([]byte(body), &p)
		switch h, ok := made[id]; {
		case !ok:
			problems = append(problems, RowProblem{Table: "plans", Row: id, Problem: fmt.Sprintf("plan %s has no audit entry that recorded it: it counts for nothing", id)})
		case h != hash || p.ComputeHash() != h:
			problems = append(problems, RowProblem{Table: "plans", Row: id, Problem: fmt.Sprintf("plan %s is not the plan its audit entry recorded (hash %s): it was rewritten, and counts for nothing", id, h)})
		}
	}
	prows.Close()

	// A freeze and a cancel request are states: the log's word decides,
	// and a row that disagrees is reported.
	evs, err := entriesOf(ctx, q, d, akey, freezeRows.kinds, "", "")
	if err != nil {
		return nil, err
	}
	row, frozen, err := freezeRow(ctx, q)
	if err != nil {
		return nil, err
	}
	switch c := freezeRows.current(evs, "", false); {
	case (c == nil || c.end) && frozen:
		problems = append(problems, RowProblem{Table: "freezes", Row: "1", Problem: fmt.Sprintf("the freeze by %s (%s) has no audit entry in force: it freezes nothing", row.By, clipText(row.Reason))})
	case c != nil && !c.end && !frozen:
		problems = append(problems, RowProblem{Table: "freezes", Seq: c.event.Seq, Problem: fmt.Sprintf("audit entry %d (freeze by %s) is in force, but its row is gone: the freeze still holds until a lead runs refill unfreeze", c.event.Seq, c.event.Actor)})
	case c != nil && !c.end && key(row.By, row.Reason) != c.key:
		problems = append(problems, RowProblem{Table: "freezes", Row: "1", Seq: c.event.Seq, Problem: fmt.Sprintf("the freeze row says %s (%s), but audit entry %d froze it as %s: the log decides", row.By, clipText(row.Reason), c.event.Seq, c.event.Actor)})
	}

	if evs, err = entriesOf(ctx, q, d, akey, cancelRows.kinds, "", ""); err != nil {
		return nil, err
	}
	crows, err := q.QueryContext(ctx, `SELECT plan_id, actor, reason FROM cancel_requests ORDER BY plan_id`)
	if err != nil {
		return nil, fmt.Errorf("cancel requests: %w", err)
	}
	have := map[string]string{}
	for crows.Next() {
		var plan, actor, reason string
		if err := crows.Scan(&plan, &actor, &reason); err != nil {
			crows.Close()
			return nil, err
		}
		have[plan] = key(plan, actor, reason)
	}
	crows.Close()
	asked := map[string]bool{}
	for _, e := range evs {
		for _, c := range cancelRows.claims(&e) {
			if asked[c.group] {
				continue
			}
			asked[c.group] = true
			if got, ok := have[c.group]; !ok {
				problems = append(problems, RowProblem{Table: "cancel_requests", Seq: e.Seq, Problem: fmt.Sprintf("audit entry %d (a cancel of plan %s by %s) has no row: it was deleted, and the plan stays cancelled", e.Seq, c.group, e.Actor)})
			} else if got != c.key {
				problems = append(problems, RowProblem{Table: "cancel_requests", Row: c.group, Seq: e.Seq, Problem: fmt.Sprintf("the cancel request of plan %s differs from audit entry %d that made it: the log decides", c.group, e.Seq)})
			}
		}
	}
	for plan := range have {
		if !asked[plan] {
			problems = append(problems, RowProblem{Table: "cancel_requests", Row: plan, Problem: fmt.Sprintf("the cancel request of plan %s has no audit entry: it stops nothing", plan)})
		}
	}
	slices.SortStableFunc(problems, func(a, b RowProblem) int {
		return cmp.Or(cmp.Compare(a.Table, b.Table), cmp.Compare(a.Row, b.Row), cmp.Compare(a.Seq, b.Seq))
	})
	return problems, nil
}
