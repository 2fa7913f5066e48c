package watch_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/project"
	"github.com/refill-dev/refill/store"
	"github.com/refill-dev/refill/watch"
)

// now is the watcher's clock in these tests: partitions up to 2026-11-29
// are due (lag 2h).
var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// world is a small project: src (a source, one row per day for 60 days but
// the gap days), leaf (a query job over src, scheduled), and optionally an
// aggregate downstream of leaf.
type world struct {
	t   *testing.T
	dir string
	p   *project.Project
	w   *watch.Watcher
	db  *sql.DB
}

func newWorld(t *testing.T, aggregate bool, extra string) *world {
	t.Helper()
	dir := t.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(dir, "wh.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, q := range []string{
		`CREATE TABLE src (day TEXT, v INTEGER)`,
		`CREATE TABLE leaf (day TEXT, v INTEGER)`,
		`CREATE TABLE agg (day TEXT, n INTEGER)`,
		`WITH RECURSIVE d(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM d WHERE i < 60)
		 INSERT INTO src SELECT date('2026-11-29', '-' || (i - 1) || ' days'), i FROM d`,
		`INSERT INTO leaf SELECT day, v FROM src`,
		`INSERT INTO agg SELECT day, 1 FROM src`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	cfg := `version: 1
warehouse: sqlite:wh.db
users:
  alice: {roles: [engineer]}
  bob: {roles: [engineer]}
  carol: {roles: [lead]}
datasets:
  src:
    table: src
    partition: {column: day}
    checks:
      not_null: {columns: [v]}
  leaf:
    table: leaf
    partition: {column: day}
    upstream: [src]
    schedule: {every: day, lag: 2h, horizon: 10}
    job: {query: "SELECT day, v FROM src WHERE day = :partition"}
` + extra
	if aggregate {
		cfg += `  agg:
    table: agg
    partition: {column: day}
    upstream: [leaf]
    tags: [aggregate]
    job: {query: "SELECT day, count(*) AS n FROM leaf WHERE day = :partition GROUP BY day"}
`
	}
	if err := os.WriteFile(filepath.Join(dir, "refill.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := project.Open(context.Background(), project.Options{Config: filepath.Join(dir, "refill.yaml"), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if _, err := p.Control.Prove(context.Background(), "leaf", "2026-11-10", "alice"); err != nil {
		t.Fatalf("prove leaf: %v", err)
	}
	return &world{t: t, dir: dir, p: p, db: db,
		w: &watch.Watcher{Config: p.Config, Store: p.Store, Warehouse: p.Warehouse, Control: p.Control, Now: func() time.Time { return now }}}
}

// miss deletes days of leaf: loads that never ran.
func (wd *world) miss(days ...string) {
	wd.t.Helper()
	for _, d := range days {
		if _, err := wd.db.Exec(`DELETE FROM leaf WHERE day = ?`, d); err != nil {
			wd.t.Fatal(err)
		}
	}
}

func (wd *world) tick() watch.Report {
	wd.t.Helper()
	rep, err := wd.w.Tick(context.Background())
	if err != nil {
		wd.t.Fatal(err)
	}
	return rep
}

func (wd *world) plans() []refill.PlanSummary {
	wd.t.Helper()
	list, err := wd.p.Store.Plans(context.Background(), refill.PlanFilter{})
	if err != nil {
		wd.t.Fatal(err)
	}
	return list
}

func (wd *world) rows(day string) int {
	wd.t.Helper()
	var n int
	if err := wd.db.QueryRow(`SELECT count(*) FROM leaf WHERE day = ?`, day).Scan(&n); err != nil {
		wd.t.Fatal(err)
	}
	return n
}

func one(t *testing.T, rep watch.Report) watch.Decision {
	t.Helper()
	if len(rep.Decisions) != 1 {
		t.Fatalf("%d decisions, want 1: %+v", len(rep.Decisions), rep.Decisions)
	}
	return rep.Decisions[0]
}

func TestDue(t *testing.T) {
	t.Parallel()
	d := &refill.Dataset{Table: "x", Partition: refill.PartitionSpec{Column: "day", Grain: refill.GrainDay},
		Schedule: &refill.Schedule{Every: refill.GrainDay, Lag: refill.Duration(2 * time.Hour), Horizon: 3}}
	if got := strings.Join(watch.Due(d, now), " "); got != "2026-11-27 2026-11-28 2026-11-29" {
		t.Errorf("day grain: %s", got)
	}
	// Just after midnight, with 2h lag: yesterday is not due yet.
	if got := watch.Due(d, time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)); got[len(got)-1] != "2026-11-28" {
		t.Errorf("inside the lag: last due %s, want 2026-11-28", got[len(got)-1])
	}
	h := &refill.Dataset{Table: "x", Partition: refill.PartitionSpec{Column: "hour", Grain: refill.GrainHour},
		Schedule: &refill.Schedule{Every: refill.GrainHour, Lag: refill.Duration(30 * time.Minute), Horizon: 1}}
	got := watch.Due(h, time.Date(2026, 11, 30, 12, 10, 0, 0, time.UTC))
	if len(got) != 24 || got[len(got)-1] != "2026-11-30T10" || got[0] != "2026-11-29T11" {
		t.Errorf("hour grain: %d partitions, %s..%s", len(got), got[0], got[len(got)-1])
	}
}

// TestGapOverAProvenLeafIsFilled: the safe case runs on its own.
func TestGapOverAProvenLeafIsFilled(t *testing.T) {
	t.Parallel()
	wd := newWorld(t, false, "")
	wd.miss("2026-11-26", "2026-11-27")
	d := one(t, wd.tick())
	if d.Action != watch.Applied || d.Tier != refill.TierAuto || d.Status != refill.StatusApplied || d.Err != "" {
		t.Fatalf("decision %+v, want an applied auto plan", d)
	}
	if d.From != "2026-11-26" || d.To != "2026-11-27" || len(d.Missing) != 2 {
		t.Errorf("gap %s..%s missing %v", d.From, d.To, d.Missing)
	}
	if wd.rows("2026-11-26") != 1 || wd.rows("2026-11-27") != 1 {
		t.Error("the gap was not filled")
	}
	p, err := wd.p.Store.Plan(context.Background(), d.PlanID)
	if err != nil {
		t.Fatal(err)
	}
	if p.Request.RequestedBy != refill.Watcher || p.Request.Reason != "2 partitions missing: 2026-11-26..2026-11-27" {
		t.Errorf("plan request %+v", p.Request)
	}
	// Filled: the next tick finds nothing.
	if rep := wd.tick(); len(rep.Gaps) != 0 {
		t.Errorf("after filling: gaps %+v", rep.Gaps)
	}
	evs, err := wd.p.Store.Audit(context.Background(), store.AuditFilter{Kind: refill.EventWatch})
	if err != nil || len(evs) == 0 || evs[0].Actor != refill.Watcher {
		t.Errorf("watch decisions audited: %d (%v)", len(evs), err)
	}
}

// TestGapWithAnAggregateDownstreamIsProposed: the same gap, but an
// aggregate is downstream: the watcher plans and waits for people, and
// two ticks make one plan.
func TestGapWithAnAggregateDownstreamIsProposed(t *testing.T) {
	t.Parallel()
	wd := newWorld(t, true, "")
	wd.miss("2026-11-27")
	d := one(t, wd.tick())
	if d.Action != watch.Planned || d.Tier == refill.TierAuto || d.Status != refill.StatusPending {
		t.Fatalf("decision %+v, want a planned, pending, non-auto plan", d)
	}
	if wd.rows("2026-11-27") != 0 {
		t.Error("a non-auto plan ran")
	}
	d2 := one(t, wd.tick())
	if d2.Action != watch.Waiting || d2.PlanID != d.PlanID {
		t.Errorf("second tick: %+v, want waiting on %s", d2, d.PlanID)
	}
	if n := len(wd.plans()); n != 1 {
		t.Errorf("two ticks made %d plans", n)
	}
	// The wait is audited once, not at every tick.
	wd.tick()
	evs, _ := wd.p.Store.Audit(context.Background(), store.AuditFilter{Kind: refill.EventWatch, PlanID: d.PlanID})
	if len(evs) != 2 {
		t.Errorf("%d watch entries for the plan, want 2 (planned, waiting)", len(evs))
	}
	// A person approves, and applies: the gap is gone.
	if _, err := wd.p.Control.Approve(context.Background(), d.PlanID, "bob", "ok"); err != nil {
		t.Fatal(err)
	}
	if err := wd.p.Control.Apply(context.Background(), d.PlanID, "bob"); err != nil {
		t.Fatal(err)
	}
	if rep := wd.tick(); len(rep.Gaps) != 0 {
		t.Errorf("after the run: %+v", rep.Gaps)
	}
}

// TestGapDuringAFailingGate is proposed blocked, and not planned again
// until the source changes.
func TestGapDuringAFailingGate(t *testing.T) {
	t.Parallel()
	wd := newWorld(t, false, "")
	wd.miss("2026-11-28")
	if _, err := wd.db.Exec(`UPDATE src SET v = NULL WHERE day = '2026-11-28'`); err != nil {
		t.Fatal(err)
	}
	d := one(t, wd.tick())
	if d.Action != watch.Planned || d.Status != refill.StatusBlocked {
		t.Fatalf("decision %+v, want planned and blocked", d)
	}
	d2 := one(t, wd.tick())
	if d2.Action != watch.Unchanged || len(wd.plans()) != 1 {
		t.Fatalf("second tick: %+v with %d plans, want unchanged and one plan", d2, len(wd.plans()))
	}
	// The source is repaired (re-delivered, with one row more): planned
	// again, and this time it runs.
	if _, err := wd.db.Exec(`UPDATE src SET v = 7 WHERE day = '2026-11-28'`); err != nil {
		t.Fatal(err)
	}
	if _, err := wd.db.Exec(`INSERT INTO src VALUES ('2026-11-28', 8)`); err != nil {
		t.Fatal(err)
	}
	d3 := one(t, wd.tick())
	if d3.Action != watch.Applied || d3.PlanID == d.PlanID || wd.rows("2026-11-28") != 2 {
		t.Fatalf("after the repair: %+v, %d rows", d3, wd.rows("2026-11-28"))
	}
}

// TestFreezeStopsTheWatcherRunning: planned, never run, while frozen.
func TestFreezeStopsTheWatcherRunning(t *testing.T) {
	t.Parallel()
	wd := newWorld(t, false, "")
	wd.miss("2026-11-29")
	if _, err := wd.p.Control.Freeze(context.Background(), "carol", "quarter close"); err != nil {
		t.Fatal(err)
	}
	d := one(t, wd.tick())
	if d.Action != watch.Frozen || d.Tier != refill.TierAuto || wd.rows("2026-11-29") != 0 {
		t.Fatalf("frozen: %+v, %d rows", d, wd.rows("2026-11-29"))
	}
	if d2 := one(t, wd.tick()); d2.Action != watch.Frozen || len(wd.plans()) != 1 {
		t.Fatalf("frozen, second tick: %+v, %d plans", d2, len(wd.plans()))
	}
	if _, err := wd.p.Control.Unfreeze(context.Background(), "carol", "done"); err != nil {
		t.Fatal(err)
	}
	if d3 := one(t, wd.tick()); d3.Action != watch.Applied || d3.PlanID != d.PlanID || wd.rows("2026-11-29") != 1 {
		t.Fatalf("after unfreezing: %+v", d3)
	}
}

// TestFailedPartitionsAreRetried: a partition whose last run failed is a
// gap; an auto plan that failed is resumed.
func TestFailedPartitionsAreRetried(t *testing.T) {
	t.Parallel()
	wd := newWorld(t, false, "")
	// A failed attempt on a partition that still holds old rows.
	err := wd.p.Store.Update(context.Background(), func(tx *store.Tx) error {
		return tx.Append(context.Background(), &refill.Event{Kind: refill.EventRunFailed, Actor: "refill", PlanID: "earlier",
			Dataset: "leaf", Partition: "2026-11-25", At: now, Detail: refill.Detail(map[string]any{"error": "boom"})})
	})
	if err != nil {
		t.Fatal(err)
	}
	d := one(t, wd.tick())
	if len(d.Failed) != 1 || d.Failed[0] != "2026-11-25" || d.Action != watch.Applied {
		t.Fatalf("decision %+v, want the failed partition planned and run", d)
	}
	if rep := wd.tick(); len(rep.Gaps) != 0 {
		t.Errorf("after the rerun: gaps %+v", rep.Gaps)
	}
}

// TestNobodyActsAsTheWatcher: the identity is reserved.
func TestNobodyActsAsTheWatcher(t *testing.T) {
	t.Parallel()
	wd := newWorld(t, false, "")
	if _, err := wd.p.Config.Actor(refill.Watcher, ""); !errors.Is(err, refill.ErrNotPermitted) {
		t.Errorf("--as watcher: %v", err)
	}
	if _, _, err := wd.p.Control.CreateToken(context.Background(), refill.Watcher, 0); !errors.Is(err, refill.ErrNotPermitted) {
		t.Errorf("a token for the watcher: %v", err)
	}
	_ = fmt.Sprint
}

// TestFailingAutoPlanIsHandedToPeople: the watcher resumes its own failing
// auto plan a bounded number of times, then asks.
func TestFailingAutoPlanIsHandedToPeople(t *testing.T) {
	t.Parallel()
	wd := newWorld(t, false, "")
	wd.miss("2026-11-26")
	if _, err := wd.db.Exec(`CREATE TRIGGER boom BEFORE INSERT ON leaf WHEN NEW.day = '2026-11-26' BEGIN SELECT raise(abort, 'boom'); END`); err != nil {
		t.Fatal(err)
	}
	var actions []watch.Action
	for i := 0; i < 5; i++ {
		actions = append(actions, one(t, wd.tick()).Action)
	}
	want := []watch.Action{watch.Applied, watch.Resumed, watch.Resumed, watch.Asked, watch.Asked}
	if fmt.Sprint(actions) != fmt.Sprint(want) {
		t.Fatalf("five ticks over a failing auto plan: %v, want %v", actions, want)
	}
	starts, _ := wd.p.Store.Audit(context.Background(), store.AuditFilter{Kind: refill.EventRunStarted})
	if len(starts) != 3 {
		t.Errorf("%d runs started, want 3 (one, and two resumes)", len(starts))
	}
}

// TestAGapAfterAnAppliedPlanIsPlannedAgain: rows an applied plan left that
// went missing since are a new gap; a long outage is missing all through.
func TestAGapAfterAnAppliedPlanIsPlannedAgain(t *testing.T) {
	t.Parallel()
	wd := newWorld(t, false, "")
	wd.miss("2026-11-28")
	first := one(t, wd.tick())
	if first.Action != watch.Applied || wd.rows("2026-11-28") != 1 {
		t.Fatalf("first gap: %+v", first)
	}
	wd.miss("2026-11-28")
	again := one(t, wd.tick())
	if again.Action != watch.Applied || again.PlanID == first.PlanID || wd.rows("2026-11-28") != 1 {
		t.Fatalf("the same day gone again: %+v", again)
	}
	// A ten-day outage is one gap of ten days, not three.
	wd2 := newWorld(t, true, "")
	var days []string
	for d := 20; d <= 29; d++ {
		days = append(days, fmt.Sprintf("2026-11-%02d", d))
	}
	wd2.miss(days...)
	rep := wd2.tick()
	if len(rep.Gaps) != 1 || rep.Gaps[0].From != "2026-11-20" || rep.Gaps[0].To != "2026-11-29" {
		t.Errorf("a ten-day outage: gaps %+v", rep.Gaps)
	}
}

// TestSourceRepairedInPlaceIsPlannedAgain: a blocked gap's source is
// re-delivered with the same row counts; the checksum sees the change.
func TestSourceRepairedInPlaceIsPlannedAgain(t *testing.T) {
	t.Parallel()
	wd := newWorld(t, false, "")
	wd.miss("2026-11-27")
	if _, err := wd.db.Exec(`UPDATE src SET v = NULL WHERE day = '2026-11-27'`); err != nil {
		t.Fatal(err)
	}
	if d := one(t, wd.tick()); d.Status != refill.StatusBlocked {
		t.Fatalf("blocked gap: %+v", d)
	}
	if d := one(t, wd.tick()); d.Action != watch.Unchanged {
		t.Fatalf("nothing changed: %+v", d)
	}
	if _, err := wd.db.Exec(`UPDATE src SET v = 5 WHERE day = '2026-11-27'`); err != nil {
		t.Fatal(err)
	}
	if d := one(t, wd.tick()); d.Action != watch.Applied || wd.rows("2026-11-27") != 1 {
		t.Fatalf("after an in-place repair: %+v", d)
	}
}

// TestTwoTicksAtOnceMakeOnePlan: ticks take turns.
func TestTwoTicksAtOnceMakeOnePlan(t *testing.T) {
	t.Parallel()
	wd := newWorld(t, true, "")
	wd.miss("2026-11-27")
	done := make(chan watch.Report, 4)
	for i := 0; i < 4; i++ {
		go func() {
			rep, err := wd.w.Tick(context.Background())
			if err != nil {
				t.Error(err)
			}
			done <- rep
		}()
	}
	skipped := 0
	for i := 0; i < 4; i++ {
		if rep := <-done; rep.Skipped != "" {
			skipped++
		}
	}
	if n := len(wd.plans()); n != 1 {
		t.Errorf("four ticks at once made %d plans (%d skipped)", n, skipped)
	}
}

// TestAcceptedFindingIsPlannedAgain: a gap blocked by the gate stays
// unchanged tick after tick, until someone accepts the finding as real
// data; then it is planned again, for another person to approve.
func TestAcceptedFindingIsPlannedAgain(t *testing.T) {
	t.Parallel()
	wd := newWorld(t, false, "")
	wd.miss("2026-11-26")
	if _, err := wd.db.Exec(`UPDATE src SET v = NULL WHERE day = '2026-11-26'`); err != nil {
		t.Fatal(err)
	}
	d := one(t, wd.tick())
	if d.Status != refill.StatusBlocked {
		t.Fatalf("blocked gap: %+v", d)
	}
	if d := one(t, wd.tick()); d.Action != watch.Unchanged {
		t.Fatalf("nothing changed: %+v", d)
	}
	if _, err := wd.p.Control.Accept(context.Background(), control.AcceptRequest{Dataset: "src", Partition: "2026-11-26", Check: "not_null", Column: "v",
		Reason: "the meter was off for Thanksgiving: no readings is right"}, "alice"); err != nil {
		t.Fatal(err)
	}
	// Planned again; one person's word never makes it auto, so it waits
	// for someone else.
	d2 := one(t, wd.tick())
	if d2.Action != watch.Planned || d2.PlanID == d.PlanID || d2.Status != refill.StatusPending || d2.Tier != refill.TierSemiAuto ||
		!strings.Contains(d2.Why, "accepted by alice") {
		t.Fatalf("after the acceptance: %+v", d2)
	}
	if _, err := wd.p.Control.Approve(context.Background(), d2.PlanID, "bob", "the meter really was off"); err != nil {
		t.Fatal(err)
	}
	if err := wd.p.Control.Apply(context.Background(), d2.PlanID, "bob"); err != nil || wd.rows("2026-11-26") != 1 {
		t.Fatalf("apply after approval: %v, %d rows", err, wd.rows("2026-11-26"))
	}
}

// TestRunningPlanThatNothingRunsIsResumed: a plan that says running while
// no process holds its run (the one running it died) is not waited on for
// ever: the watcher's own auto plan is resumed, as a failed one would be.
func TestRunningPlanThatNothingRunsIsResumed(t *testing.T) {
	t.Parallel()
	wd := newWorld(t, false, "")
	ctx := context.Background()
	wd.miss("2026-11-26")
	if _, err := wd.db.Exec(`CREATE TRIGGER boom BEFORE INSERT ON leaf WHEN NEW.day = '2026-11-26' BEGIN SELECT raise(abort, 'boom'); END`); err != nil {
		t.Fatal(err)
	}
	d := one(t, wd.tick())
	if d.Action != watch.Applied || d.Status != refill.StatusFailed {
		t.Fatalf("first tick: %+v, want its auto plan applied and failed", d)
	}
	if _, err := wd.db.Exec(`DROP TRIGGER boom`); err != nil {
		t.Fatal(err)
	}
	// As if the process running it had died mid-run: the plan says
	// running, and no lease holds its run.
	if err := wd.p.Store.Update(ctx, func(tx *store.Tx) error {
		return tx.SetStatus(ctx, d.PlanID, refill.StatusFailed, refill.StatusRunning)
	}); err != nil {
		t.Fatal(err)
	}
	if h, err := wd.p.Control.Holder(ctx, d.PlanID); err != nil || !h.Orphaned {
		t.Fatalf("holder of a run nobody holds: %+v, %v", h, err)
	}
	d2 := one(t, wd.tick())
	if d2.Action != watch.Resumed || !strings.Contains(d2.Why, "nobody runs it") || d2.Status != refill.StatusApplied {
		t.Fatalf("tick over a running plan nothing runs: %+v, want it resumed and applied", d2)
	}
	if n := wd.rows("2026-11-26"); n == 0 {
		t.Error("the resumed plan left the partition empty")
	}
}
