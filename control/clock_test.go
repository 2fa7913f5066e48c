package control_test

import (
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/planner"
	"github.com/refill-dev/refill/project"
)

// TestClockAheadDecidesNothing reproduces a gate silenced by a moved
// clock: half of one day's events got event times in 2031, which the gate's
// no_future check fails; planned "as of" 2032, the plan was auto, the gate
// passed and the rows from the future were published. The "as of" clock
// may move history and horizons, never a decision in refill's favour:
// future rows are judged by the real clock, and a plan made ahead of it
// records both clocks, sealed, and is never auto.
func TestClockAheadDecidesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.c.Prove(b.ctx, "sessions", b.sc.Day(5), "alice"); err != nil {
		t.Fatal(err)
	}
	day := b.sc.Day(2)
	b.exec(t, `UPDATE events_raw SET event_time = '2031-06-01T10:00:00Z', ingested_at = '2031-06-01T10:05:00Z' WHERE event_date = ? AND event_id % 2 = 0`, day)

	ahead := time.Date(2032, 1, 1, 0, 0, 0, 0, time.UTC)
	p, err := project.Open(b.ctx, project.Options{Config: b.sc.Config, Now: func() time.Time { return ahead }, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	plan, err := p.Control.Plan(b.ctx, "alice", planner.Request{Targets: []string{"sessions"}, From: day, To: day, Reason: "as of 2032"})
	if err != nil && plan == nil {
		t.Fatal(err)
	}
	if plan.Tier == refill.TierAuto || plan.Status != refill.StatusBlocked {
		t.Errorf("planned as of 2032: %s %s, want a blocked plan that is not auto (%v)", plan.Tier, plan.Status, plan.Reasons)
	}
	failed := false
	for _, f := range plan.Gate.Findings {
		failed = failed || (f.Check == "no_future" && !f.Passed && f.Partition == day)
	}
	if !failed {
		t.Errorf("the gate did not fail the rows dated 2031: %+v", plan.Gate.Findings)
	}
	if plan.Clock == nil || !plan.Clock.AsOf.Equal(ahead) || plan.Clock.Real.After(time.Now()) || time.Since(plan.Clock.Real) > time.Hour {
		t.Errorf("plan.clock = %+v, want as_of %s and the real time", plan.Clock, ahead)
	}
	if !hasLine(plan.Reasons, "ahead of the real clock") {
		t.Errorf("reasons %q do not say the clock was ahead", plan.Reasons)
	}
	// The clock is sealed: the same plan with the clock dropped is another hash.
	h := plan.Hash
	plan.Clock = nil
	if plan.ComputeHash() == h {
		t.Errorf("the plan's hash does not cover its clock")
	}

	// Without the future rows, a plan made ahead of the real clock passes
	// the gate but is still not auto, and says why.
	b.exec(t, `UPDATE events_raw SET event_time = event_date || 'T10:00:00Z', ingested_at = event_date || 'T10:05:00Z' WHERE event_date = ?`, day)
	plan, err = p.Control.Plan(b.ctx, "alice", planner.Request{Targets: []string{"sessions"}, From: day, To: day, Reason: "as of 2032, clean"})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Tier != refill.TierSemiAuto || plan.Status != refill.StatusPending || len(plan.Reasons) != 1 || !strings.Contains(plan.Reasons[0], "never makes a plan auto") {
		t.Errorf("a clean plan as of 2032: %s %s %q, want semi-auto pending saying why", plan.Tier, plan.Status, plan.Reasons)
	}
	// A clock set in the past (the demo's) changes none of this: auto.
	past := b.plan(t, "alice", "sessions", 2, 2, refill.TierAuto)
	if past.Clock != nil {
		t.Errorf("a plan made on a clock in the past records %+v", past.Clock)
	}
}
