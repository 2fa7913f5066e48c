package policy

import (
	"strings"
	"testing"

	"github.com/refill-dev/refill"
)

// TestLineageOnlyTagsCount: a lineage-only dataset whose rows change with
// the plan (a view of a rebuilt table) is not rebuilt, but its tags decide
// the tier as a rebuilt dataset's do, in the fixed rules and in CEL rules.
func TestLineageOnlyTagsCount(t *testing.T) {
	p := refill.DefaultPolicy()
	a := dataset("a")
	view := &refill.Dataset{Name: "revenue_view", Tags: []string{"aggregate", "billing"}, LineageOnly: true, Why: refill.WhyView}
	in := Input{Request: refill.Request{Days: 1, RequestedBy: "alice"}, Rebuilt: []*refill.Dataset{a}, Proofs: proven("a")}
	if d := decide(t, p, in); d.Tier != refill.TierAuto {
		t.Fatalf("without the view: %s %v, want auto", d.Tier, d.Reasons)
	}
	in.LineageOnly = []*refill.Dataset{view}
	d := decide(t, p, in)
	if d.Tier != refill.TierManual || len(d.Reasons) != 1 || !strings.Contains(d.Reasons[0], "revenue_view is tagged billing (manual_tags): lineage only, it is not rebuilt, but its rows change") {
		t.Errorf("with a billing view: %s %v, want manual", d.Tier, d.Reasons)
	}
	view.Tags = []string{"aggregate"}
	d = decide(t, p, in)
	if d.Tier != refill.TierSemiAuto || len(d.Reasons) != 1 || !strings.Contains(d.Reasons[0], "revenue_view downstream of the target is tagged aggregate (aggregate_tags)") {
		t.Errorf("with an aggregate view: %s %v, want semi-auto", d.Tier, d.Reasons)
	}
	view.Tags = []string{"pii"}
	p.Rules = []refill.Rule{{Name: "pii", When: "'pii' in plan.tags && !('revenue_view' in plan.datasets)", Tier: refill.TierManual, Reason: "pii changes"}}
	if d := decide(t, p, in); d.Tier != refill.TierManual || d.Reasons[0] != "rule pii: pii changes" {
		t.Errorf("rule on a lineage-only tag: %s %v, want manual by the rule", d.Tier, d.Reasons)
	}
}

// TestLineageOnlyTableIsNotAuto: a lineage-only table (unpartitioned, say)
// between what a plan rebuilds keeps its old rows, and what reads it
// downstream would read them: never auto. A view follows its upstream.
func TestLineageOnlyTableIsNotAuto(t *testing.T) {
	p := refill.DefaultPolicy()
	in := Input{Request: refill.Request{Days: 1, RequestedBy: "alice"}, Rebuilt: []*refill.Dataset{dataset("a")}, Proofs: proven("a"),
		LineageOnly: []*refill.Dataset{{Name: "scd_history", LineageOnly: true, Why: "no partition column: set meta.refill.partition"}}}
	d := decide(t, p, in)
	if d.Tier != refill.TierSemiAuto || len(d.Reasons) != 1 || !strings.Contains(d.Reasons[0], "scd_history is lineage only (no partition column") {
		t.Errorf("an unpartitioned table in the middle: %s %v, want semi-auto saying why", d.Tier, d.Reasons)
	}
	in.LineageOnly[0].Why = refill.WhyView
	if d := decide(t, p, in); d.Tier != refill.TierAuto {
		t.Errorf("a view in the middle: %s %v, want auto", d.Tier, d.Reasons)
	}
}
