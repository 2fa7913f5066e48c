package control

import (
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
)

// TestUnmet is atlantis's apply requirements as a table: one row per rule
// of "may this plan run now?", each naming what a person reads.
func TestUnmet(t *testing.T) {
	users := map[string]refill.User{"bob": {Roles: []string{refill.RoleEngineer}}, "carol": {Roles: []string{refill.RoleLead}}}
	plan := func(tier refill.Tier, status refill.Status) *refill.Plan {
		p, _ := sealedFixture()
		p.Tier, p.Status = tier, status
		p.Request.RequestedBy = "alice"
		p.Gate.Passed = status != refill.StatusBlocked
		p.Hash = p.ComputeHash()
		return p
	}
	approve := func(p *refill.Plan, who string) refill.Approval {
		return refill.Approval{PlanID: p.ID, PlanHash: p.Hash, Actor: who, Decision: refill.DecisionApprove, At: time.Now()}
	}
	done := func(items ...refill.ChecklistItem) []refill.ChecklistStep {
		var out []refill.ChecklistStep
		for _, it := range items {
			out = append(out, refill.ChecklistStep{Step: it, Actor: "alice"})
		}
		return out
	}
	frozen := refill.Freeze{By: "carol", Reason: "incident 12", At: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	for _, c := range []struct {
		name  string
		state func() *State
		users bool
		want  []string // substrings, one unmet line each; none = may run
	}{
		{"auto may run", func() *State { return &State{Plan: plan(refill.TierAuto, refill.StatusReady)} }, true, nil},
		{"a blocked plan whose status was flipped in the store", func() *State {
			p := plan(refill.TierAuto, refill.StatusReady)
			p.Gate.Passed = false
			return &State{Plan: p}
		}, true, []string{"the source gate failed (0 finding(s)) when the plan was made: it can never run, whatever its status says (ready)"}},
		{"a tier refill does not know", func() *State { return &State{Plan: plan("whatever", refill.StatusReady)} }, true,
			[]string{`the plan's tier "whatever" is not auto, semi-auto or manual: it can never run`}},
		{"blocked never runs", func() *State { return &State{Plan: plan(refill.TierAuto, refill.StatusBlocked)} }, true, []string{"a blocked plan can never run"}},
		{"rejected", func() *State { return &State{Plan: plan(refill.TierSemiAuto, refill.StatusRejected)} }, true, []string{"the plan was rejected"}},
		{"superseded", func() *State { return &State{Plan: plan(refill.TierSemiAuto, refill.StatusSuperseded)} }, true, []string{"a newer plan of the same request superseded"}},
		{"applied", func() *State { return &State{Plan: plan(refill.TierAuto, refill.StatusApplied)} }, true, []string{"already been applied"}},
		{"rolled back", func() *State { return &State{Plan: plan(refill.TierAuto, refill.StatusRolledBack)} }, true, []string{"rolled back"}},
		{"cancelled", func() *State { return &State{Plan: plan(refill.TierSemiAuto, refill.StatusCancelled)} }, true, []string{"the plan was cancelled; plan again"}},
		{"rejected says by whom and why", func() *State {
			p := plan(refill.TierSemiAuto, refill.StatusRejected)
			r := approve(p, "carol")
			r.Decision, r.Note = refill.DecisionReject, "wrong range"
			return &State{Plan: p, Approvals: []refill.Approval{r}}
		}, true, []string{"the plan was rejected by carol: wrong range"}},
		{"expired", func() *State { return &State{Plan: plan(refill.TierSemiAuto, refill.StatusExpired)} }, true,
			[]string{"the plan expired: it waited longer than policy.plan_ttl (168h0m0s)"}},
		{"semi-auto needs a second person", func() *State { return &State{Plan: plan(refill.TierSemiAuto, refill.StatusPending)} }, true, []string{"needs one approval by someone other than alice"}},
		{"self-approval does not count", func() *State {
			p := plan(refill.TierSemiAuto, refill.StatusApproved)
			return &State{Plan: p, Approvals: []refill.Approval{approve(p, "alice")}}
		}, true, []string{"needs one approval"}},
		{"an approval of other content does not count", func() *State {
			p := plan(refill.TierSemiAuto, refill.StatusApproved)
			a := approve(p, "bob")
			a.PlanHash = "sha256:other"
			return &State{Plan: p, Approvals: []refill.Approval{a}}
		}, true, []string{"needs one approval"}},
		{"semi-auto approved may run", func() *State {
			p := plan(refill.TierSemiAuto, refill.StatusApproved)
			return &State{Plan: p, Approvals: []refill.Approval{approve(p, "bob")}}
		}, true, nil},
		{"manual needs the whole checklist", func() *State { return &State{Plan: plan(refill.TierManual, refill.StatusPending)} }, true,
			[]string{"checklist 1/5: snapshot", "checklist 2/5: state the scope", "checklist 3/5: approval by a lead"}},
		{"manual approved by an engineer", func() *State {
			p := plan(refill.TierManual, refill.StatusApproved)
			return &State{Plan: p, Approvals: []refill.Approval{approve(p, "bob")}, Checklist: done(refill.ChecklistSnapshot, refill.ChecklistScope)}
		}, true, []string{"the approval by bob no longer counts: bob is not a lead now", "checklist 3/5: approval by a lead"}},
		{"approved by someone no longer in users", func() *State {
			p := plan(refill.TierSemiAuto, refill.StatusApproved)
			return &State{Plan: p, Approvals: []refill.Approval{approve(p, "mallory")}}
		}, true, []string{"the approval by mallory no longer counts: mallory is no longer in users:", "needs one approval"}},
		{"manual done may run", func() *State {
			p := plan(refill.TierManual, refill.StatusApproved)
			return &State{Plan: p, Approvals: []refill.Approval{approve(p, "carol")}, Checklist: done(refill.ChecklistSnapshot, refill.ChecklistScope)}
		}, true, nil},
		{"manual without users", func() *State {
			p := plan(refill.TierManual, refill.StatusApproved)
			return &State{Plan: p, Checklist: done(refill.ChecklistSnapshot, refill.ChecklistScope)}
		}, false, []string{"add users: to refill.yaml", "checklist 3/5"}},
		{"an older live plan holds partitions", func() *State {
			p := plan(refill.TierAuto, refill.StatusReady)
			return &State{Plan: p, Holders: []store.Holder{{PlanID: "p0", Status: refill.StatusPending, Dataset: "agg", Partitions: 2}}}
		}, true, []string{"plan p0 (pending) holds 2 partition(s) of agg"}},
		{"stale", func() *State {
			return &State{Plan: plan(refill.TierAuto, refill.StatusReady), Stale: []string{"the table of agg changed"}}
		}, true, []string{"the plan is stale"}},
		{"stale keeps the other requirements", func() *State {
			return &State{Plan: plan(refill.TierSemiAuto, refill.StatusPending), Stale: []string{"the table of agg changed"}}
		}, true, []string{"the plan is stale: the config changed in 1 way(s)", "needs one approval"}},
		{"a cancel request on a running plan", func() *State {
			p := plan(refill.TierSemiAuto, refill.StatusRunning)
			return &State{Plan: p, Approvals: []refill.Approval{approve(p, "bob")},
				Cancel: &refill.CancelRequest{PlanID: p.ID, Actor: "alice", Reason: "wrong range", At: time.Now()}}
		}, true, []string{"alice asked to cancel the plan: wrong range"}},
		{"a freeze stops an auto plan", func() *State {
			return &State{Plan: plan(refill.TierAuto, refill.StatusReady), Freeze: &frozen}
		}, true, []string{"refill is frozen by carol since 2026-11-30T09:00:00Z (incident 12): auto plans wait"}},
		{"a freeze does not stop an approved plan", func() *State {
			p := plan(refill.TierSemiAuto, refill.StatusApproved)
			return &State{Plan: p, Approvals: []refill.Approval{approve(p, "bob")}, Freeze: &frozen}
		}, true, nil},
		{"a hold beside a freeze", func() *State {
			return &State{Plan: plan(refill.TierAuto, refill.StatusReady), Freeze: &frozen,
				Holders: []store.Holder{{PlanID: "p0", Status: refill.StatusApproved, Dataset: "agg", Partitions: 1}}}
		}, true, []string{"refill is frozen", "plan p0 (approved) holds 1 partition(s) of agg"}},
		{"manual checklist, snapshot taken", func() *State {
			p := plan(refill.TierManual, refill.StatusPending)
			return &State{Plan: p, Checklist: done(refill.ChecklistSnapshot)}
		}, true, []string{"checklist 2/5: state the scope", "checklist 3/5: approval by a lead"}},
		{"a lead's approval of their own manual plan does not count", func() *State {
			p := plan(refill.TierManual, refill.StatusApproved)
			p.Request.RequestedBy = "carol"
			return &State{Plan: p, Approvals: []refill.Approval{approve(p, "carol")}, Checklist: done(refill.ChecklistSnapshot, refill.ChecklistScope)}
		}, true, []string{"checklist 3/5: approval by a lead other than carol"}},
		{"the log's final word after a contradiction", func() *State {
			return &State{Plan: plan(refill.TierAuto, refill.StatusRejected), Contradiction: "the state store says ready, but the audit log records the plan rejected"}
		}, true, []string{"the audit log records the plan rejected", "the plan was rejected"}},
		{"the log contradicts the store", func() *State {
			return &State{Plan: plan(refill.TierAuto, refill.StatusReady), Contradiction: "the state store says ready, but the audit log records the plan rejected"}
		}, true, []string{"the audit log records the plan rejected"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, cfg := sealedFixture()
			ctl := &Control{Config: cfg()}
			if c.users {
				ctl.Config.Users = users
			}
			got := ctl.unmet(c.state())
			if len(got) != len(c.want) {
				t.Fatalf("unmet = %q, want %d line(s) %q", got, len(c.want), c.want)
			}
			for i, w := range c.want {
				if !strings.Contains(got[i].Why, w) {
					t.Errorf("unmet[%d] = %q, want it to contain %q", i, got[i].Why, w)
				}
			}
		})
	}
}

// TestFinalFromLog: the log's word on a plan's end outranks its status
// column: a finished run is applied (it never runs again), unless a
// rollback came after.
func TestFinalFromLog(t *testing.T) {
	ev := func(k refill.EventKind) refill.Event { return refill.Event{Kind: k} }
	for _, c := range []struct {
		evs  []refill.Event
		want refill.Status
	}{
		{[]refill.Event{ev(refill.EventPlanCreated), ev(refill.EventRunStarted)}, ""},
		{[]refill.Event{ev(refill.EventRunStarted), ev(refill.EventRunFinished)}, refill.StatusApplied},
		{[]refill.Event{ev(refill.EventRunFinished), ev(refill.EventRollback)}, refill.StatusRolledBack},
		{[]refill.Event{ev(refill.EventRejection), ev(refill.EventRunFinished)}, refill.StatusRejected},
	} {
		if got := finalFromLog(c.evs); got != c.want {
			t.Errorf("finalFromLog(%v) = %q, want %q", c.evs, got, c.want)
		}
	}
}
