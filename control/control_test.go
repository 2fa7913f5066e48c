package control_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/demo"
	"github.com/refill-dev/refill/dsn"
	"github.com/refill-dev/refill/planner"
	"github.com/refill-dev/refill/project"
	"github.com/refill-dev/refill/store"
)

// The demo's own clock: the "as of" time plans are made at.
var demoNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

const (
	planTTL     = time.Hour
	snapshotTTL = 3 * time.Hour
)

// bundle is a core wired over the demo's SQLite warehouse and state store,
// as a server wires it, with its real clock in the test's hands.
type bundle struct {
	t   *testing.T
	ctx context.Context
	c   *control.Control
	st  *store.Store
	sc  *demo.Scenario
	wh  *sql.DB
	// later is how far the core's real clock runs ahead of time.Now. The
	// state store dates audit entries by time.Now itself, so moving later
	// on ages every plan and decision at once, as waiting would.
	later time.Duration
}

var template struct {
	once sync.Once
	dir  string
	sc   *demo.Scenario
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if template.dir != "" {
		os.RemoveAll(template.dir)
	}
	os.Exit(code)
}

func setup(t *testing.T) *bundle {
	t.Helper()
	ctx := context.Background()
	template.once.Do(func() {
		dir, err := os.MkdirTemp("", "refill-control-demo")
		if err != nil {
			template.err = err
			return
		}
		template.dir = dir
		template.sc, template.err = demo.Write(ctx, filepath.Join(dir, "demo"), demoNow)
	})
	if template.err != nil {
		t.Fatal(template.err)
	}
	// Each test gets a copy of one demo: writing it is slower than copying.
	dst := filepath.Join(t.TempDir(), "demo")
	if err := os.CopyFS(dst, os.DirFS(filepath.Join(template.dir, "demo"))); err != nil {
		t.Fatal(err)
	}
	sc := *template.sc
	sc.Dir, sc.Config = dst, filepath.Join(dst, "refill.yaml")
	p, err := project.Open(ctx, project.Options{Config: sc.Config, Now: func() time.Time { return demoNow },
		Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	wh, err := sql.Open("sqlite", filepath.Join(sc.Dir, "warehouse.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wh.Close() })
	b := &bundle{t: t, ctx: ctx, c: p.Control, st: p.Store, sc: &sc, wh: wh}
	b.c.Clock = func() time.Time { return time.Now().Add(b.later) }
	b.c.Config.Housekeeping = refill.Housekeeping{PlanTTL: refill.Duration(planTTL), SnapshotTTL: refill.Duration(snapshotTTL)}
	return b
}

// plan makes a plan of target over the days from and to days before the
// demo's today, and checks it got the tier the test relies on.
func (b *bundle) plan(t *testing.T, actor, target string, from, to int, tier refill.Tier) *refill.Plan {
	t.Helper()
	p, err := b.c.Plan(b.ctx, actor, planner.Request{Targets: []string{target}, From: b.sc.Day(from), To: b.sc.Day(to), Reason: "a test"})
	if err != nil {
		t.Fatal(err)
	}
	want := refill.StatusPending
	if tier == refill.TierAuto {
		want = refill.StatusReady
	}
	if p.Tier != tier || p.Status != want {
		t.Fatalf("plan of %s %s..%s: %s %s, want a %s %s plan (%v)", target, b.sc.Day(from), b.sc.Day(to), p.Tier, p.Status, want, tier, p.Reasons)
	}
	return p
}

func (b *bundle) load(t *testing.T, id string) *control.State {
	t.Helper()
	s, err := b.c.Load(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// events returns plan id's audit entries of kind.
func (b *bundle) events(t *testing.T, id string, kind refill.EventKind) []refill.Event {
	t.Helper()
	evs, err := b.st.Audit(b.ctx, store.AuditFilter{PlanID: id, Kind: kind})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// tables counts plan id's snapshot tables in the warehouse.
func (b *bundle) tables(t *testing.T, id string) int {
	t.Helper()
	return b.count(t, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name LIKE ?`, "refill_snap_"+id+"%")
}

func (b *bundle) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := b.wh.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func (b *bundle) exec(t *testing.T, query string, args ...any) {
	t.Helper()
	if _, err := b.wh.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// must fails the test on err and passes the state through.
func (b *bundle) must(s *control.State, err error) *control.State {
	b.t.Helper()
	if err != nil {
		b.t.Fatal(err)
	}
	return s
}

// refused checks err is of kind and says want.
func refused(t *testing.T, err error, kind error, want string) {
	t.Helper()
	if !errors.Is(err, kind) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %v saying %q", err, kind, want)
	}
}

func detail(t *testing.T, e refill.Event) map[string]any {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(e.Detail, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func hasLine(lines []string, want string) bool {
	return slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, want) })
}

// checklist takes a manual plan through its snapshot and scope steps.
func (b *bundle) checklist(t *testing.T, id, actor string) {
	t.Helper()
	if _, _, err := b.c.Snapshot(b.ctx, id, actor); err != nil {
		t.Fatal(err)
	}
	b.must(b.c.Scope(b.ctx, id, actor, "two days of billing"))
}

// TestApprove: four eyes — nobody approves their own request, a lead
// included — and a manual plan needs a lead, after its snapshot and scope.
func TestApprove(t *testing.T) {
	t.Parallel()
	b := setup(t)
	semi := b.plan(t, "alice", "sessions", 14, 12, refill.TierSemiAuto)
	_, err := b.c.Approve(b.ctx, semi.ID, "alice", "mine")
	refused(t, err, refill.ErrNotPermitted, "nobody approves their own request")
	if s := b.load(t, semi.ID); s.Plan.Status != refill.StatusPending || len(s.Approvals) != 0 || !hasLine(s.Unmet, "needs one approval by someone other than alice") {
		t.Errorf("after a self-approval: %s, approvals %v, unmet %q", s.Plan.Status, s.Approvals, s.Unmet)
	}
	s := b.must(b.c.Approve(b.ctx, semi.ID, "bob", "looks right"))
	if s.Plan.Status != refill.StatusApproved || len(s.Unmet) != 0 || !s.FourEyes {
		t.Errorf("approved by bob: %s, unmet %q, four eyes %v", s.Plan.Status, s.Unmet, s.FourEyes)
	}
	evs := b.events(t, semi.ID, refill.EventApproval)
	if len(evs) != 1 || evs[0].Actor != "bob" || detail(t, evs[0])["hash"] != semi.Hash {
		t.Errorf("approval audit entries: %+v, want one by bob bound to %s", evs, semi.Hash)
	}
	_, err = b.c.Approve(b.ctx, semi.ID, "carol", "")
	refused(t, err, refill.ErrNotPermitted, "already approved")

	manual := b.plan(t, "alice", "revenue_daily", 20, 19, refill.TierManual)
	_, err = b.c.Approve(b.ctx, manual.ID, "bob", "")
	refused(t, err, refill.ErrNotPermitted, "only a lead may approve it, and bob is not a lead")
	_, err = b.c.Approve(b.ctx, manual.ID, "carol", "")
	refused(t, err, refill.ErrNotPermitted, "the checklist runs in order and its snapshot step is not done yet")
	// Deciding a manual plan is a lead's either way: an engineer may not
	// reject it either.
	_, err = b.c.Reject(b.ctx, manual.ID, "bob", "looks wrong")
	refused(t, err, refill.ErrNotPermitted, "only a lead may reject it, and bob is not a lead")
	b.checklist(t, manual.ID, "alice")
	_, err = b.c.Approve(b.ctx, manual.ID, "bob", "")
	refused(t, err, refill.ErrNotPermitted, "only a lead")
	s = b.must(b.c.Approve(b.ctx, manual.ID, "carol", "checked"))
	if s.Plan.Status != refill.StatusApproved || len(s.Unmet) != 0 {
		t.Errorf("manual plan approved by a lead: %s, unmet %q", s.Plan.Status, s.Unmet)
	}

	// A lead's own request needs another lead, who this team lacks.
	own := b.plan(t, "carol", "revenue_daily", 30, 29, refill.TierManual)
	b.checklist(t, own.ID, "carol")
	_, err = b.c.Approve(b.ctx, own.ID, "carol", "")
	refused(t, err, refill.ErrNotPermitted, "carol requested plan "+own.ID+" and cannot approve it")
	// Without users: nobody can be shown to be a lead.
	users := b.c.Config.Users
	b.c.Config.Users = nil
	_, err = b.c.Approve(b.ctx, own.ID, "bob", "")
	b.c.Config.Users = users
	refused(t, err, refill.ErrNotPermitted, "add users: to refill.yaml with a lead")
	if n := len(b.events(t, own.ID, refill.EventApproval)); n != 0 {
		t.Errorf("%d approval(s) recorded for refused approvals", n)
	}
}

// TestReject: a rejection needs a note, is final, and releases the plan's
// partitions to the plans behind it.
func TestReject(t *testing.T) {
	t.Parallel()
	b := setup(t)
	old := b.plan(t, "alice", "sessions", 14, 12, refill.TierSemiAuto)
	newer := b.plan(t, "alice", "sessions", 13, 13, refill.TierSemiAuto)
	if s := b.load(t, newer.ID); len(s.Holders) != 1 || s.Holders[0].PlanID != old.ID {
		t.Fatalf("holders of the newer overlapping plan: %+v, want %s", s.Holders, old.ID)
	}
	_, err := b.c.Reject(b.ctx, old.ID, "carol", " ")
	refused(t, err, refill.ErrBadInput, "--note is required")

	s := b.must(b.c.Reject(b.ctx, old.ID, "carol", "not now"))
	if s.Plan.Status != refill.StatusRejected || len(s.Unmet) != 1 || !strings.Contains(s.Unmet[0], "rejected by carol: not now") {
		t.Errorf("rejected: %s, unmet %q", s.Plan.Status, s.Unmet)
	}
	if evs := b.events(t, old.ID, refill.EventRejection); len(evs) != 1 || evs[0].Actor != "carol" || detail(t, evs[0])["note"] != "not now" {
		t.Errorf("rejection audit entries: %+v", evs)
	}
	if s := b.load(t, newer.ID); len(s.Holders) != 0 {
		t.Errorf("a rejected plan still holds partitions: %+v", s.Holders)
	}
	_, err = b.c.Reject(b.ctx, old.ID, "carol", "again")
	refused(t, err, refill.ErrNotPermitted, "can no longer be rejected")
	_, err = b.c.Approve(b.ctx, old.ID, "bob", "")
	refused(t, err, refill.ErrNotPermitted, "was rejected")
}

// TestScope: the scope statement is a manual plan's second step, with a
// note, recorded with the plan's own impact summary.
func TestScope(t *testing.T) {
	t.Parallel()
	b := setup(t)
	semi := b.plan(t, "alice", "sessions", 14, 12, refill.TierSemiAuto)
	_, err := b.c.Scope(b.ctx, semi.ID, "alice", "n")
	refused(t, err, refill.ErrNotPermitted, "the checklist is for manual plans")

	manual := b.plan(t, "alice", "revenue_daily", 20, 19, refill.TierManual)
	_, err = b.c.Scope(b.ctx, manual.ID, "alice", "two days")
	refused(t, err, refill.ErrNotPermitted, "snapshot first")
	_, err = b.c.Scope(b.ctx, manual.ID, "alice", "")
	refused(t, err, refill.ErrBadInput, "--note is required")
	if _, _, err := b.c.Snapshot(b.ctx, manual.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	s := b.must(b.c.Scope(b.ctx, manual.ID, "alice", "two days of billing"))
	st, ok := s.Done(refill.ChecklistScope)
	if !ok || st.Actor != "alice" || st.Note != "two days of billing" || hasLine(s.Unmet, "checklist 2/5") {
		t.Errorf("scope step %+v (done %v), unmet %q", st, ok, s.Unmet)
	}
	evs := b.events(t, manual.ID, refill.EventScope)
	if len(evs) != 1 || !strings.HasPrefix(detail(t, evs[0])["impact"].(string), "Rebuild revenue_daily for "+b.sc.Day(20)) {
		t.Errorf("scope audit entries: %+v", evs)
	}
	b.must(b.c.Approve(b.ctx, manual.ID, "carol", ""))
	_, err = b.c.Scope(b.ctx, manual.ID, "alice", "more")
	refused(t, err, refill.ErrNotPermitted, "the checklist steps before approval are closed")
}

// TestSnapshot: a snapshot copies every partition the plan overwrites into
// the warehouse, records their digests, and is taken once, before the run.
func TestSnapshot(t *testing.T) {
	t.Parallel()
	b := setup(t)
	manual := b.plan(t, "alice", "revenue_daily", 20, 19, refill.TierManual)
	if n := b.tables(t, manual.ID); n != 0 {
		t.Fatalf("%d snapshot table(s) before the snapshot", n)
	}
	s, parts, err := b.c.Snapshot(b.ctx, manual.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Done(refill.ChecklistSnapshot); !ok || hasLine(s.Unmet, "checklist 1/5") {
		t.Errorf("after the snapshot: checklist %+v, unmet %q", s.Checklist, s.Unmet)
	}
	if b.tables(t, manual.ID) == 0 {
		t.Error("the snapshot made no tables in the warehouse")
	}
	rebuilt := 0
	for _, sp := range parts {
		if sp.Source {
			continue
		}
		rebuilt++
		if n := b.count(t, `SELECT count(*) FROM "`+sp.SnapshotTable+`" WHERE day = ?`, sp.Partition); int64(n) != sp.Digest.Rows || n == 0 {
			t.Errorf("snapshot of %s %s holds %d rows, recorded %d", sp.Dataset, sp.Partition, n, sp.Digest.Rows)
		}
	}
	if rebuilt != 2 {
		t.Errorf("snapshotted %d rebuilt partition(s), want revenue_daily's 2: %+v", rebuilt, parts)
	}
	if evs := b.events(t, manual.ID, refill.EventSnapshot); len(evs) != 1+len(parts) || evs[0].Partition != "" {
		t.Errorf("snapshot audit entries: %d, want one for the plan and one per partition (%d)", len(evs), len(parts))
	}
	_, _, err = b.c.Snapshot(b.ctx, manual.ID, "alice")
	refused(t, err, refill.ErrNotPermitted, "already has a snapshot")

	rejected := b.plan(t, "alice", "revenue_daily", 30, 29, refill.TierManual)
	b.must(b.c.Reject(b.ctx, rejected.ID, "carol", "no"))
	_, _, err = b.c.Snapshot(b.ctx, rejected.ID, "alice")
	refused(t, err, refill.ErrNotPermitted, "a snapshot is taken before the run")
	if n := b.tables(t, rejected.ID); n != 0 {
		t.Errorf("a refused snapshot left %d table(s)", n)
	}
}

// rollback is the one call of Control.Rollback here: force is a lead's
// reason to restore partitions someone else wrote since, "" for none.
func (b *bundle) rollback(id, actor, force string) (*control.State, []refill.SnapshotPart, error) {
	return b.c.Rollback(b.ctx, id, actor, control.RollbackOptions{Force: force != "", Reason: force})
}

// TestRollback: a rollback restores the snapshot after a run and ends the
// plan rolled back; it refuses before a run or without a snapshot, and a
// partition written since the run only a lead may restore, with a reason.
func TestRollback(t *testing.T) {
	t.Parallel()
	b := setup(t)
	marker := func(day string) int {
		return b.count(t, `SELECT count(*) FROM sessions WHERE day = ? AND user_id = 999999`, day)
	}
	run := func(from, to int) *refill.Plan {
		t.Helper()
		// A row the job would not write: the run drops it, a rollback
		// brings it back.
		b.exec(t, `INSERT INTO sessions (day, user_id, events) VALUES (?, 999999, 1)`, b.sc.Day(to))
		p := b.plan(t, "alice", "sessions", from, to, refill.TierSemiAuto)
		_, _, err := b.rollback(p.ID, "alice", "")
		refused(t, err, refill.ErrNotPermitted, "has no snapshot")
		if _, _, err := b.c.Snapshot(b.ctx, p.ID, "alice"); err != nil {
			t.Fatal(err)
		}
		b.must(b.c.Approve(b.ctx, p.ID, "bob", ""))
		_, _, err = b.rollback(p.ID, "alice", "")
		refused(t, err, refill.ErrNotPermitted, "rollback restores partitions after a finished, failed or cancelled run")
		if err := b.c.Apply(b.ctx, p.ID, "alice"); err != nil {
			t.Fatal(err)
		}
		if marker(b.sc.Day(to)) != 0 {
			t.Fatal("the run kept a row its job does not write")
		}
		return p
	}

	p := run(14, 12)
	s, restored, err := b.rollback(p.ID, "alice", "")
	if err != nil {
		t.Fatal(err)
	}
	if s.Plan.Status != refill.StatusRolledBack || len(restored) != 3 || marker(b.sc.Day(12)) != 1 || !hasLine(s.Unmet, "rolled back") {
		t.Errorf("rolled back: %s, %d partition(s) restored, marker rows %d, unmet %q", s.Plan.Status, len(restored), marker(b.sc.Day(12)), s.Unmet)
	}
	if evs := b.events(t, p.ID, refill.EventRollback); len(evs) != 4 || evs[0].Actor != "alice" || detail(t, evs[0])["forced"] != nil {
		t.Errorf("rollback audit entries: %+v, want one for the plan and one per partition", evs)
	}

	// Someone writes a partition after the run: restoring it would undo them.
	q := run(30, 29)
	b.exec(t, `INSERT INTO sessions (day, user_id, events) VALUES (?, 888888, 1)`, b.sc.Day(30))
	_, _, err = b.rollback(q.ID, "alice", "")
	refused(t, err, refill.ErrNotPermitted, "A lead may force it")
	_, _, err = b.rollback(q.ID, "bob", "bob says so")
	refused(t, err, refill.ErrNotPermitted, "only a lead may force a rollback")
	if s := b.load(t, q.ID); s.Plan.Status != refill.StatusApplied || marker(b.sc.Day(29)) != 0 {
		t.Fatalf("a refused rollback changed something: %s, marker rows %d", s.Plan.Status, marker(b.sc.Day(29)))
	}
	s, _, err = b.rollback(q.ID, "carol", "the late write was a mistake")
	if err != nil {
		t.Fatal(err)
	}
	later := b.count(t, `SELECT count(*) FROM sessions WHERE day = ? AND user_id = 888888`, b.sc.Day(30))
	if s.Plan.Status != refill.StatusRolledBack || marker(b.sc.Day(29)) != 1 || later != 0 {
		t.Errorf("forced rollback: %s, marker rows %d, the later write's rows %d", s.Plan.Status, marker(b.sc.Day(29)), later)
	}
	d := detail(t, b.events(t, q.ID, refill.EventRollback)[0])
	if forced, _ := d["forced"].([]any); len(forced) != 1 || d["force_reason"] != "the late write was a mistake" {
		t.Errorf("forced rollback's audit detail: %v", d)
	}
}

// TestSignoff: sign-off closes a manual plan's checklist, after its run,
// by someone other than its requester.
func TestSignoff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	semi := b.plan(t, "alice", "sessions", 14, 12, refill.TierSemiAuto)
	_, err := b.c.Signoff(b.ctx, semi.ID, "bob", "")
	refused(t, err, refill.ErrNotPermitted, "sign-off is the manual checklist's last step")

	manual := b.plan(t, "alice", "revenue_daily", 20, 19, refill.TierManual)
	b.checklist(t, manual.ID, "alice")
	b.must(b.c.Approve(b.ctx, manual.ID, "carol", ""))
	_, err = b.c.Signoff(b.ctx, manual.ID, "bob", "")
	refused(t, err, refill.ErrNotPermitted, "sign off after the run finished")
	if err := b.c.Apply(b.ctx, manual.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	_, err = b.c.Signoff(b.ctx, manual.ID, "alice", "")
	refused(t, err, refill.ErrNotPermitted, "sign-off is a second person's review")
	s := b.must(b.c.Signoff(b.ctx, manual.ID, "bob", "report reviewed"))
	if st, ok := s.Done(refill.ChecklistSignoff); !ok || st.Actor != "bob" || st.Note != "report reviewed" {
		t.Errorf("sign-off step %+v (done %v)", st, ok)
	}
	if evs := b.events(t, manual.ID, refill.EventSignoff); len(evs) != 1 || evs[0].Actor != "bob" {
		t.Errorf("sign-off audit entries: %+v", evs)
	}
}

// TestDropSnapshot: a snapshot is dropped on request, with a reason, only
// once its plan can neither run nor be rolled back.
func TestDropSnapshot(t *testing.T) {
	t.Parallel()
	b := setup(t)
	manual := b.plan(t, "alice", "revenue_daily", 20, 19, refill.TierManual)
	b.checklist(t, manual.ID, "alice")
	semi := b.plan(t, "alice", "sessions", 14, 12, refill.TierSemiAuto)
	if _, _, err := b.c.Snapshot(b.ctx, semi.ID, "alice"); err != nil {
		t.Fatal(err)
	}

	_, err := b.c.DropSnapshot(b.ctx, manual.ID, "carol", "")
	refused(t, err, refill.ErrBadInput, "--reason is required")
	_, err = b.c.DropSnapshot(b.ctx, manual.ID, "carol", "early")
	refused(t, err, refill.ErrNotPermitted, "drop it once the plan is done")
	b.must(b.c.Approve(b.ctx, semi.ID, "bob", ""))
	if err := b.c.Apply(b.ctx, semi.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	if b.tables(t, manual.ID) == 0 {
		t.Fatal("a refused drop dropped tables")
	}
	// A semi-auto plan has no sign-off: once applied, whoever drops its
	// snapshot says why.
	if _, err := b.c.DropSnapshot(b.ctx, semi.ID, "carol", "space"); err != nil || b.tables(t, semi.ID) != 0 {
		t.Fatalf("dropping an applied semi-auto plan's snapshot: %v, %d table(s) left", err, b.tables(t, semi.ID))
	}

	b.must(b.c.Reject(b.ctx, manual.ID, "carol", "not now"))
	dropped, err := b.c.DropSnapshot(b.ctx, manual.ID, "carol", " done with it ")
	if err != nil {
		t.Fatal(err)
	}
	if len(dropped) == 0 || b.tables(t, manual.ID) != 0 {
		t.Errorf("dropped %v, %d table(s) left", dropped, b.tables(t, manual.ID))
	}
	evs := b.events(t, manual.ID, refill.EventSnapshotDropped)
	if len(evs) != 1 || evs[0].Actor != "carol" || detail(t, evs[0])["reason"] != "done with it" {
		t.Errorf("snapshot_dropped audit entries: %+v", evs)
	}
	_, err = b.c.DropSnapshot(b.ctx, manual.ID, "carol", "again")
	refused(t, err, refill.ErrNotPermitted, "has no snapshot tables to drop")
}

// TestSweep: housekeeping on the real clock, moved on without sleeping. A
// plan waiting past plan_ttl expires and releases its partitions; a done
// plan's snapshot goes once snapshot_ttl has passed since it ended (a
// semi-auto plan, which has no sign-off, ends when its run finishes); and
// the "as of" clock REFILL_NOW moves decides none of it.
func TestSweep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	waiting := b.plan(t, "alice", "sessions", 14, 12, refill.TierSemiAuto)
	if _, _, err := b.c.Snapshot(b.ctx, waiting.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	held := b.plan(t, "alice", "sessions", 13, 13, refill.TierSemiAuto)
	rejected := b.plan(t, "alice", "revenue_daily", 20, 19, refill.TierManual)
	b.checklist(t, rejected.ID, "alice")
	b.must(b.c.Reject(b.ctx, rejected.ID, "carol", "not now"))
	applied := b.plan(t, "alice", "sessions", 30, 29, refill.TierSemiAuto)
	if _, _, err := b.c.Snapshot(b.ctx, applied.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	b.must(b.c.Approve(b.ctx, applied.ID, "bob", ""))
	if err := b.c.Apply(b.ctx, applied.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	if s := b.load(t, held.ID); len(s.Holders) != 1 {
		t.Fatalf("holders of the overlapping plan: %+v", s.Holders)
	}
	sweep := func(later time.Duration, expired, dropped []string) {
		t.Helper()
		b.later = later
		got, err := b.c.Sweep(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Both lists are in plan ID order, which is random.
		slices.Sort(got.Expired)
		slices.Sort(got.SnapshotsDropped)
		slices.Sort(expired)
		slices.Sort(dropped)
		if !slices.Equal(got.Expired, expired) || !slices.Equal(got.SnapshotsDropped, dropped) {
			t.Fatalf("sweep at +%s: expired %v, dropped %v; want %v, %v", later, got.Expired, got.SnapshotsDropped, expired, dropped)
		}
	}

	// A year on by the "as of" clock is no time at all.
	b.c.Now = func() time.Time { return time.Now().AddDate(1, 0, 0) }
	sweep(0, nil, nil)
	b.c.Now = func() time.Time { return demoNow }
	sweep(planTTL/2, nil, nil)
	if s := b.load(t, waiting.ID); s.Expired || s.Plan.Status != refill.StatusPending {
		t.Fatalf("inside plan_ttl: %s (expired %v)", s.Plan.Status, s.Expired)
	}

	sweep(2*planTTL, []string{waiting.ID, held.ID}, nil)
	for _, id := range []string{waiting.ID, held.ID} {
		evs := b.events(t, id, refill.EventExpired)
		if len(evs) != 1 || evs[0].Actor != control.Housekeeper || detail(t, evs[0])["was"] != string(refill.StatusPending) {
			t.Errorf("expiry audit entries of %s: %+v", id, evs)
		}
	}
	if s := b.load(t, held.ID); s.Plan.Status != refill.StatusExpired || len(s.Holders) != 0 {
		t.Errorf("after the sweep: %s, holders %+v", s.Plan.Status, s.Holders)
	}
	_, err := b.c.Approve(b.ctx, waiting.ID, "bob", "")
	refused(t, err, refill.ErrNotPermitted, "is expired: it can no longer be approved")
	// Expiry is recorded: turning the clock back does not revive the plan.
	b.later = 0
	if s := b.load(t, waiting.ID); s.Plan.Status != refill.StatusExpired || len(s.Unmet) != 1 || !strings.Contains(s.Unmet[0], "the plan expired") {
		t.Errorf("an expired plan with the clock turned back: %s, unmet %q", s.Plan.Status, s.Unmet)
	}
	if b.tables(t, rejected.ID) == 0 || b.tables(t, waiting.ID) == 0 || b.tables(t, applied.ID) == 0 {
		t.Fatal("a snapshot went before snapshot_ttl passed")
	}

	// The rejection, the expiry and the semi-auto run's end are all more
	// than snapshot_ttl ago.
	sweep(2*planTTL+snapshotTTL, nil, []string{rejected.ID, waiting.ID, applied.ID})
	for _, id := range []string{rejected.ID, waiting.ID, applied.ID} {
		if n := b.tables(t, id); n != 0 {
			t.Errorf("%d snapshot table(s) of %s left", n, id)
		}
		if evs := b.events(t, id, refill.EventSnapshotDropped); len(evs) != 1 || evs[0].Actor != control.Housekeeper {
			t.Errorf("snapshot_dropped audit entries of %s: %+v", id, evs)
		}
	}
	sweep(10*snapshotTTL, nil, nil)
}

// TestPlansReadExpiry: the plans list reads a plan past plan_ttl as expired
// before any sweep has recorded it, and writes nothing to say so.
func TestPlansReadExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a1 := b.plan(t, "alice", "sessions", 14, 12, refill.TierSemiAuto)
	a2 := b.plan(t, "alice", "sessions", 30, 29, refill.TierSemiAuto)
	r := b.plan(t, "alice", "sessions", 40, 39, refill.TierSemiAuto)
	b.must(b.c.Reject(b.ctx, r.ID, "carol", "no"))
	list := func(f refill.PlanFilter) map[string]refill.Status {
		t.Helper()
		got, err := b.c.Plans(b.ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]refill.Status{}
		for _, p := range got {
			out[p.ID] = p.Status
		}
		return out
	}

	b.later = planTTL / 2
	if got := list(refill.PlanFilter{Status: refill.StatusPending}); len(got) != 2 {
		t.Errorf("pending inside plan_ttl: %v, want %s and %s", got, a1.ID, a2.ID)
	}
	if got := list(refill.PlanFilter{Status: refill.StatusExpired}); len(got) != 0 {
		t.Errorf("expired inside plan_ttl: %v", got)
	}

	b.later = 2 * planTTL
	if got := list(refill.PlanFilter{Status: refill.StatusExpired}); len(got) != 2 || got[a1.ID] == "" || got[a2.ID] == "" {
		t.Errorf("expired past plan_ttl: %v, want %s and %s", got, a1.ID, a2.ID)
	}
	if got := list(refill.PlanFilter{Status: refill.StatusPending}); len(got) != 0 {
		t.Errorf("pending past plan_ttl: %v", got)
	}
	if got := list(refill.PlanFilter{}); got[a1.ID] != refill.StatusExpired || got[r.ID] != refill.StatusRejected {
		t.Errorf("all plans past plan_ttl: %v", got)
	}
	if got := list(refill.PlanFilter{Status: refill.StatusExpired, Limit: 1}); len(got) != 1 {
		t.Errorf("expired, limit 1: %v", got)
	}
	if s := b.load(t, a1.ID); !s.Expired || s.Plan.Status != refill.StatusExpired || !hasLine(s.Unmet, "the plan expired") {
		t.Errorf("load past plan_ttl: %s (expired %v), unmet %q", s.Plan.Status, s.Expired, s.Unmet)
	}
	// Nothing was written: the store still says pending.
	stored, err := b.st.Plans(b.ctx, refill.PlanFilter{Status: refill.StatusPending})
	if err != nil || len(stored) != 2 || len(b.events(t, a1.ID, refill.EventExpired)) != 0 {
		t.Errorf("a read wrote: the store lists %d pending plan(s) (%v)", len(stored), err)
	}
}

// TestHolder: a running plan is held by the holder of a live run lease,
// and orphaned when there is none or it lapsed by the real clock; a cancel
// asks a held run to stop, and ends an orphaned one at once.
func TestHolder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.plan(t, "alice", "sessions", 14, 12, refill.TierSemiAuto)
	b.must(b.c.Approve(b.ctx, p.ID, "bob", ""))
	// The run's process died before it took its lease.
	err := b.st.Update(b.ctx, func(tx *store.Tx) error {
		return tx.SetStatus(b.ctx, p.ID, refill.StatusApproved, refill.StatusRunning)
	})
	if err != nil {
		t.Fatal(err)
	}
	if h, err := b.c.Holder(b.ctx, p.ID); err != nil || !h.Orphaned || h.Holder != "" {
		t.Errorf("a running plan without a lease: %+v (%v), want orphaned", h, err)
	}
	err = b.st.Update(b.ctx, func(tx *store.Tx) error {
		return tx.TakeLease(b.ctx, p.ID, "worker-1", time.Now().Add(10*time.Minute), store.Lease.HolderAlive)
	})
	if err != nil {
		t.Fatal(err)
	}
	if s := b.load(t, p.ID); s.Run == nil || s.Run.Orphaned || s.Run.Holder != "worker-1" {
		t.Fatalf("a running plan with a live lease: %+v", s.Run)
	}
	s := b.must(b.c.Cancel(b.ctx, p.ID, "alice", "wrong range"))
	if s.Plan.Status != refill.StatusRunning || s.Cancel == nil || !hasLine(s.Unmet, "alice asked to cancel the plan: wrong range") {
		t.Errorf("cancel of a held run: %s, cancel %+v, unmet %q", s.Plan.Status, s.Cancel, s.Unmet)
	}

	b.later = 11 * time.Minute
	if h, err := b.c.Holder(b.ctx, p.ID); err != nil || !h.Orphaned || h.Holder != "worker-1" {
		t.Errorf("a lapsed lease: %+v (%v), want worker-1's, orphaned", h, err)
	}
	s = b.must(b.c.Cancel(b.ctx, p.ID, "alice", "wrong range"))
	if s.Plan.Status != refill.StatusCancelled || len(b.events(t, p.ID, refill.EventRunCancelled)) != 1 {
		t.Errorf("cancel of an orphaned run: %s, want cancelled with its audit entry", s.Plan.Status)
	}
}

// TestApplyIsLockedOnlyByAHold: an auto plan that only an older plan's
// hold keeps from running is locked (it clears when that plan is done);
// anything else unmet besides makes it not permitted.
func TestApplyIsLockedOnlyByAHold(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.c.Prove(b.ctx, "sessions", b.sc.Day(2), "alice"); err != nil {
		t.Fatal(err)
	}
	older := b.plan(t, "alice", "sessions", 14, 12, refill.TierAuto)
	auto := b.plan(t, "alice", "sessions", 13, 13, refill.TierAuto)
	err := b.c.Apply(b.ctx, auto.ID, "alice")
	refused(t, err, refill.ErrLocked, "plan "+older.ID+" (ready) holds 1 partition(s) of sessions")

	if _, err := b.c.Freeze(b.ctx, "carol", "incident 12"); err != nil {
		t.Fatal(err)
	}
	err = b.c.Apply(b.ctx, auto.ID, "alice")
	refused(t, err, refill.ErrNotPermitted, "refill is frozen by carol")
	if errors.Is(err, refill.ErrLocked) {
		t.Errorf("a frozen, held plan reads as only locked: %v", err)
	}
	if _, err := b.c.Unfreeze(b.ctx, "carol", "over"); err != nil {
		t.Fatal(err)
	}
	b.must(b.c.Reject(b.ctx, older.ID, "carol", "not now"))
	if err := b.c.Apply(b.ctx, auto.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	if s := b.load(t, auto.ID); s.Plan.Status != refill.StatusApplied {
		t.Errorf("once the hold cleared: %s, want applied", s.Plan.Status)
	}
}

// execIn runs statements on one of the demo's SQLite files.
func (b *bundle) execIn(t *testing.T, file string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(b.sc.Dir, file)+"?"+dsn.SQLiteWAL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %s: %v", file, s, err)
		}
	}
}

// entries returns the audit entries f selects.
func (b *bundle) entries(t *testing.T, f store.AuditFilter) []refill.Event {
	t.Helper()
	evs, err := b.st.Audit(b.ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestStartTakesTheRun: Start returns once this process holds the plan's
// run — its lease taken, the plan running, the start recorded — before
// anything is built, and the run it returns carries the plan to its end.
// A plan another process is running is refused as locked before the gate
// is asked again, and so is one another process takes just before this
// one does: the lease decides, never a look taken earlier.
func TestStartTakesTheRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	elsewhere := func(id string) error {
		return b.st.Update(b.ctx, func(tx *store.Tx) error {
			return tx.TakeLease(b.ctx, id, "cli-host:4242", time.Now().Add(time.Minute), store.Lease.HolderAlive)
		})
	}

	// Taken just before this process takes it.
	raced := b.plan(t, "alice", "sessions", 14, 12, refill.TierSemiAuto)
	b.must(b.c.Approve(b.ctx, raced.ID, "bob", ""))
	c := *b.c
	c.Executor = racing{Executor: b.c.Executor, first: elsewhere}
	_, err := c.Start(b.ctx, raced.ID, "bob")
	refused(t, err, refill.ErrLocked, "cli-host:4242 holds its run")
	if s := b.load(t, raced.ID); s.Plan.Status != refill.StatusApproved || len(b.events(t, raced.ID, refill.EventRunStarted)) != 0 {
		t.Errorf("a start that lost the race: %s, %d start(s) recorded", s.Plan.Status, len(b.events(t, raced.ID, refill.EventRunStarted)))
	}

	// Started here: held before it runs.
	p := b.plan(t, "alice", "sessions", 11, 10, refill.TierSemiAuto)
	b.must(b.c.Approve(b.ctx, p.ID, "bob", ""))
	run, err := b.c.Start(b.ctx, p.ID, "bob")
	if err != nil {
		t.Fatal(err)
	}
	l, held, err := b.st.Lease(b.ctx, p.ID)
	if err != nil || !held || !strings.HasSuffix(l.Holder, fmt.Sprintf(":%d", os.Getpid())) {
		t.Fatalf("after Start the lease is %+v (held %v, %v), want this process's", l, held, err)
	}
	s := b.load(t, p.ID)
	if s.Plan.Status != refill.StatusRunning || s.Run == nil || s.Run.Orphaned || len(b.events(t, p.ID, refill.EventRunStarted)) != 1 {
		t.Fatalf("after Start: %s, holder %+v, %d start(s)", s.Plan.Status, s.Run, len(b.events(t, p.ID, refill.EventRunStarted)))
	}
	// Another process sees it running and is refused before any work.
	refused(t, s.MayApply(), refill.ErrLocked, "is running now in another process")
	if err := run(b.ctx); err != nil {
		t.Fatal(err)
	}
	if s := b.load(t, p.ID); s.Plan.Status != refill.StatusApplied {
		t.Errorf("after the run: %s, want applied", s.Plan.Status)
	}
	if _, held, _ := b.st.Lease(b.ctx, p.ID); held {
		t.Error("the run ended and kept its lease")
	}

	// Running in another process: refused at once, nothing recorded.
	other := b.plan(t, "alice", "sessions", 16, 15, refill.TierSemiAuto)
	b.must(b.c.Approve(b.ctx, other.ID, "bob", ""))
	err = b.st.Update(b.ctx, func(tx *store.Tx) error {
		if err := tx.TakeLease(b.ctx, other.ID, "cli-host:4242", time.Now().Add(time.Minute), store.Lease.HolderAlive); err != nil {
			return err
		}
		return tx.SetStatus(b.ctx, other.ID, refill.StatusApproved, refill.StatusRunning)
	})
	if err != nil {
		t.Fatal(err)
	}
	before := len(b.entries(t, store.AuditFilter{}))
	_, err = b.c.Start(b.ctx, other.ID, "bob")
	refused(t, err, refill.ErrLocked, "plan "+other.ID+" is running now in another process: cli-host:4242 holds its run")
	if after := len(b.entries(t, store.AuditFilter{})); after != before {
		t.Errorf("a refused start recorded %d audit entries", after-before)
	}
}

// racing is an executor with another process's start slipped in just
// before it takes the run.
type racing struct {
	control.Executor
	first func(id string) error
}

func (r racing) Start(ctx context.Context, p *refill.Plan, actor string) (control.HeldRun, error) {
	if err := r.first(p.ID); err != nil {
		return nil, err
	}
	return r.Executor.Start(ctx, p, actor)
}

// deadHolder names a process on this host that does not exist, as a
// killed apply leaves its lease.
func deadHolder(t *testing.T) string {
	t.Helper()
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return host + ":2147483646"
}

// TestHolderSaysLapsedOrGone: an orphaned run says why — its lease lapsed
// (an expiry past), or its holder's process is gone while the lease still
// runs (an expiry to come) — so no door calls an expiry to come a lapse.
func TestHolderSaysLapsedOrGone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.plan(t, "alice", "sessions", 14, 12, refill.TierSemiAuto)
	b.must(b.c.Approve(b.ctx, p.ID, "bob", ""))
	expires := time.Now().Add(10 * time.Minute)
	take := func(holder string) {
		t.Helper()
		err := b.st.Update(b.ctx, func(tx *store.Tx) error {
			return tx.TakeLease(b.ctx, p.ID, holder, expires, func(store.Lease) bool { return false })
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := b.st.Update(b.ctx, func(tx *store.Tx) error {
		return tx.SetStatus(b.ctx, p.ID, refill.StatusApproved, refill.StatusRunning)
	}); err != nil {
		t.Fatal(err)
	}

	take(deadHolder(t))
	h := b.load(t, p.ID).Run
	if h == nil || !h.Orphaned || !h.Gone || h.Lapsed || !h.Expires.After(time.Now()) {
		t.Errorf("a killed holder's lease, still running: %+v, want orphaned, gone, not lapsed", h)
	}
	take("other-host:1")
	if h := b.load(t, p.ID).Run; h == nil || h.Orphaned || h.Gone || h.Lapsed {
		t.Errorf("a live holder elsewhere: %+v, want held", h)
	}
	b.later = 11 * time.Minute
	if h := b.load(t, p.ID).Run; h == nil || !h.Orphaned || h.Gone || !h.Lapsed {
		t.Errorf("a lease past its expiry: %+v, want orphaned, lapsed", h)
	}
}

// TestWaitingFor: the plans list's "waiting for me" is what each person
// could do now, by the same requirements as the buttons: bob may approve
// alice's semi-auto plan, not his own; a manual plan waits for alice's
// checklist, then for carol, the lead.
func TestWaitingFor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	semi := b.plan(t, "alice", "sessions", 14, 12, refill.TierSemiAuto)
	own := b.plan(t, "bob", "sessions", 24, 22, refill.TierSemiAuto)
	manual := b.plan(t, "alice", "events_raw", 5, 4, refill.TierManual)
	ids := func(user string) []string {
		t.Helper()
		list, err := b.c.WaitingFor(b.ctx, user, 0)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range list {
			out = append(out, p.ID)
		}
		slices.Sort(out)
		return out
	}
	sorted := func(s ...string) []string { slices.Sort(s); return s }
	if got, want := ids("bob"), sorted(semi.ID); !slices.Equal(got, want) {
		t.Errorf("waiting for bob: %v, want %v (alice's semi-auto plan, not his own, not the manual one)", got, want)
	}
	if got, want := ids("alice"), sorted(own.ID, manual.ID); !slices.Equal(got, want) {
		t.Errorf("waiting for alice: %v, want %v (bob's plan, and her manual plan's snapshot)", got, want)
	}
	if slices.Contains(ids("carol"), manual.ID) {
		t.Error("the manual plan waits for carol before its snapshot and scope")
	}
	b.checklist(t, manual.ID, "alice")
	if !slices.Contains(ids("carol"), manual.ID) || slices.Contains(ids("alice"), manual.ID) {
		t.Errorf("after the checklist: carol %v, alice %v; the manual plan waits for the lead only", ids("carol"), ids("alice"))
	}
}
