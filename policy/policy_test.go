package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
)

func dataset(name string, tags ...string) *refill.Dataset {
	return &refill.Dataset{Name: name, Tags: tags, Job: &refill.Job{Kind: refill.JobQuery, Query: "SELECT :partition"}}
}

func decide(t *testing.T, p refill.Policy, in Input) Decision {
	t.Helper()
	pol, err := Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	d, err := pol.Decide(in)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func proven(names ...string) map[string]Evidence {
	m := map[string]Evidence{}
	for _, n := range names {
		m[n] = Evidence{Exists: true, Current: true}
	}
	return m
}

func TestTiers(t *testing.T) {
	def := refill.DefaultPolicy()
	a, b := dataset("a"), dataset("b")
	agg := dataset("agg", "aggregate")
	bill := dataset("bill", "aggregate", "billing")
	ext := dataset("feed", "external")
	req := func(days int) refill.Request { return refill.Request{Days: days, RequestedBy: "alice"} }

	cases := []struct {
		name    string
		in      Input
		tier    refill.Tier
		reasons []string // substrings, one per expected reason, in order
	}{
		{"auto when short proven and no aggregate downstream",
			Input{Request: req(7), Rebuilt: []*refill.Dataset{a, b}, Downstream: []string{"b"}, Proofs: proven("a", "b")},
			refill.TierAuto, []string{"range is 7 days, within the auto limit of 7; all 2 datasets have a current passing proof"}},
		{"an unscored gate check never counts toward auto",
			Input{Request: req(3), Rebuilt: []*refill.Dataset{a}, Proofs: proven("a"),
				Unscored: []string{"src 2026-11-02 volume: insufficient history", "src 2026-11-03 volume: insufficient history"}},
			refill.TierSemiAuto, []string{"the source gate left 2 check(s) as warnings: src 2026-11-02 volume: insufficient history (and 1 more)"}},
		{"a finding accepted by a person never counts toward auto",
			Input{Request: req(1), Rebuilt: []*refill.Dataset{a}, Proofs: proven("a"),
				Accepted: []string{"src 2026-11-02 volume, accepted by alice"}},
			refill.TierSemiAuto, []string{"1 finding(s) of the source gate pass only because a person accepted them as real data: src 2026-11-02 volume, accepted by alice; someone else must look"}},
		{"side effects are never auto, proven or not",
			Input{Request: req(1), Rebuilt: []*refill.Dataset{{Name: "x", Job: &refill.Job{Kind: refill.JobCommand, Command: []string{"x"}, SideEffects: true}}}, Proofs: proven("x")},
			refill.TierSemiAuto, []string{"x declares side_effects"}},
		{"one day over the auto limit",
			Input{Request: req(8), Rebuilt: []*refill.Dataset{a}, Proofs: proven("a")},
			refill.TierSemiAuto, []string{"range is 8 days, over the auto limit of 7"}},
		{"missing proof names the dataset with a count",
			Input{Request: req(3), Rebuilt: []*refill.Dataset{a, b}, Proofs: proven("a")},
			refill.TierSemiAuto, []string{"no idempotency proof for b (1 of 2 datasets)"}},
		{"stale proof is called stale",
			Input{Request: req(3), Rebuilt: []*refill.Dataset{a}, Proofs: map[string]Evidence{"a": {Exists: true}}},
			refill.TierSemiAuto, []string{"idempotency proof is stale for a"}},
		{"a failed proof says how it failed",
			Input{Request: req(3), Rebuilt: []*refill.Dataset{a}, Proofs: map[string]Evidence{"a": {Exists: true, Failed: true, Message: "a rerun adds rows"}}},
			refill.TierSemiAuto, []string{"the idempotency proof of a failed: a rerun adds rows"}},
		{"aggregate downstream of the target",
			Input{Request: req(3), Rebuilt: []*refill.Dataset{a, agg}, Downstream: []string{"agg"}, Proofs: proven("a", "agg")},
			refill.TierSemiAuto, []string{"agg downstream of the target is tagged aggregate"}},
		{"an aggregate that is itself the target is not downstream of it",
			Input{Request: req(3), Rebuilt: []*refill.Dataset{agg}, Proofs: proven("agg")},
			refill.TierAuto, []string{"within the auto limit"}},
		{"billing anywhere makes it manual, with every manual reason",
			Input{Request: req(31), Rebuilt: []*refill.Dataset{a, bill, ext}, Downstream: []string{"bill", "feed"}, Proofs: proven("a", "bill", "feed")},
			refill.TierManual, []string{"bill is tagged billing", "feed is tagged external", "range is 31 days, over the manual limit of 30"}},
		{"30 days is not over the manual limit",
			Input{Request: req(30), Rebuilt: []*refill.Dataset{a}, Proofs: proven("a")},
			refill.TierSemiAuto, []string{"range is 30 days, over the auto limit of 7"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := decide(t, def, c.in)
			if d.Tier != c.tier {
				t.Fatalf("tier = %s, want %s (reasons %q)", d.Tier, c.tier, d.Reasons)
			}
			if len(d.Reasons) != len(c.reasons) {
				t.Fatalf("reasons = %q, want %d", d.Reasons, len(c.reasons))
			}
			for i, r := range c.reasons {
				if !strings.Contains(d.Reasons[i], r) {
					t.Errorf("reason %d = %q, want it to contain %q", i, d.Reasons[i], r)
				}
			}
		})
	}
}

func TestRulesOnlyRaise(t *testing.T) {
	p := refill.DefaultPolicy()
	p.Rules = []refill.Rule{
		{Name: "watcher-small-only", When: "request.requested_by == 'watcher' && request.days > 3", Tier: refill.TierManual, Reason: "the watcher may fill at most 3 days"},
		{Name: "never-lower", When: "true", Tier: refill.TierAuto, Reason: "tries to lower"},
	}
	a := dataset("a")
	in := Input{Request: refill.Request{Days: 5, RequestedBy: "watcher"}, Rebuilt: []*refill.Dataset{a}}
	d := decide(t, p, in)
	if d.Tier != refill.TierManual || len(d.Reasons) != 1 || !strings.Contains(d.Reasons[0], "rule watcher-small-only: the watcher may fill at most 3 days") {
		t.Errorf("got %s %q, want manual by the watcher rule", d.Tier, d.Reasons)
	}
	in.Request.RequestedBy = "alice"
	d = decide(t, p, in)
	if d.Tier != refill.TierSemiAuto {
		t.Errorf("a rule with tier auto lowered the tier to %s", d.Tier)
	}
}

func TestBadRules(t *testing.T) {
	for _, when := range []string{"request.days >", "request.days + 1", "nosuchvar == 1"} {
		p := refill.DefaultPolicy()
		p.Rules = []refill.Rule{{Name: "r", When: when, Tier: refill.TierManual}}
		_, err := Compile(p)
		if !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), "policy.rules r") {
			t.Errorf("when %q: err = %v, want bad input naming the rule", when, err)
		}
	}
}

// TestRulesAreTypedOrderedAndBounded: a misspelled field fails to compile
// (so the config loader names its line), each rule sees the tier the rules
// before it raised, and a rule that would stall the planner is stopped.
func TestRulesAreTypedOrderedAndBounded(t *testing.T) {
	for _, when := range []string{"request.requester == 'watcher'", "plan.partitions > 'x'", "plan.tiers == 'manual'"} {
		if err := CheckExpr(when); err == nil {
			t.Errorf("%q compiled; want a type error", when)
		}
	}
	for _, when := range []string{"request.requested_by == 'watcher' && request.days > 3", "plan.tier == 'semi-auto' && plan.partitions > 10", "'aggregate' in plan.tags"} {
		if err := CheckExpr(when); err != nil {
			t.Errorf("%q: %v", when, err)
		}
	}

	p := refill.DefaultPolicy()
	p.Rules = []refill.Rule{
		{Name: "big", When: "plan.partitions > 2", Tier: refill.TierSemiAuto, Reason: "more than two partitions"},
		{Name: "then-manual", When: "plan.tier == 'semi-auto' && request.days > 1", Tier: refill.TierManual, Reason: "sees the tier the rule before raised"},
	}
	in := Input{Request: refill.Request{Days: 2, RequestedBy: "alice"}, Rebuilt: []*refill.Dataset{dataset("a")}, Proofs: proven("a"), Partitions: 4}
	if d := decide(t, p, in); d.Tier != refill.TierManual || !strings.Contains(strings.Join(d.Reasons, " "), "sees the tier") {
		t.Errorf("ordered rules: %s %q, want manual by then-manual", d.Tier, d.Reasons)
	}

	p.Rules = []refill.Rule{{Name: "stall", When: "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, [1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, a+b+c+d+e > 0)))))", Tier: refill.TierManual, Reason: "x"}}
	pol, err := Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pol.Decide(in); err == nil || !strings.Contains(err.Error(), "cost") {
		t.Errorf("a rule over its cost limit: %v, want an error about cost", err)
	}
}

// TestNothingIsDropped: a manual plan keeps what would have kept it from
// auto, a failed proof first; a rule that raises the tier keeps what it
// displaced; an auto plan's own reason is not attention.
func TestNothingIsDropped(t *testing.T) {
	def := refill.DefaultPolicy()
	bill, agg := dataset("bill", "billing"), dataset("agg", "aggregate")
	failed := map[string]Evidence{"bill": {Exists: true, Failed: true, Message: "a second build differed"}}

	d := decide(t, def, Input{Request: refill.Request{Days: 3}, Rebuilt: []*refill.Dataset{agg, bill}, Downstream: []string{"agg", "bill"}, Proofs: failed})
	if d.Tier != refill.TierManual || len(d.Reasons) != 1 || !strings.Contains(d.Reasons[0], "bill is tagged billing") {
		t.Fatalf("tier %s, reasons %q", d.Tier, d.Reasons)
	}
	if len(d.Attention) < 3 || d.Attention[0] != refill.FailedProofReason("bill", "a second build differed") ||
		!strings.Contains(strings.Join(d.Attention, "|"), "no idempotency proof for agg") ||
		!strings.Contains(strings.Join(d.Attention, "|"), "agg downstream of the target is tagged aggregate") {
		t.Errorf("attention of a manual plan: %q", d.Attention)
	}

	// Semi-auto: the failed proof decides, first among the reasons.
	plain := dataset("bill")
	d = decide(t, def, Input{Request: refill.Request{Days: 9}, Rebuilt: []*refill.Dataset{plain}, Proofs: failed})
	if d.Tier != refill.TierSemiAuto || len(d.Reasons) != 2 || !refill.IsFailedProof(d.Reasons[0]) || len(d.Attention) != 0 {
		t.Errorf("semi-auto: %s %q, attention %q", d.Tier, d.Reasons, d.Attention)
	}

	// A rule raising semi-auto to manual keeps what decided before.
	p := def
	p.Rules = []refill.Rule{{Name: "weekend", When: "true", Tier: refill.TierManual, Reason: "no backfills at the weekend"}}
	d = decide(t, p, Input{Request: refill.Request{Days: 9}, Rebuilt: []*refill.Dataset{plain}, Proofs: failed})
	if d.Tier != refill.TierManual || len(d.Reasons) != 1 || len(d.Attention) != 2 || !refill.IsFailedProof(d.Attention[0]) ||
		!strings.Contains(d.Attention[1], "range is 9 days, over the auto limit") {
		t.Errorf("raised by a rule: %s %q, attention %q", d.Tier, d.Reasons, d.Attention)
	}

	// An auto plan raised by a rule: "why it was auto" is no risk.
	d = decide(t, p, Input{Request: refill.Request{Days: 1}, Rebuilt: []*refill.Dataset{plain}, Proofs: proven("bill")})
	if d.Tier != refill.TierManual || len(d.Attention) != 0 {
		t.Errorf("auto raised by a rule: %s, attention %q", d.Tier, d.Attention)
	}
}
