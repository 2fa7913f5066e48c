package planner

import (
	"context"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
)

// TestLineageOnly: a lineage-only view between two rebuilt tables is never
// a step, never gated and never looked up in the warehouse (an ephemeral
// model has no table at all), but what reads it is rebuilt after what it
// reads, and its tags decide the tier.
func TestLineageOnly(t *testing.T) {
	t.Parallel()
	fixtures := append([]string{
		"CREATE TABLE src (day TEXT, v INTEGER)",
		"CREATE TABLE a (day TEXT, v INTEGER)",
		"CREATE TABLE b (day TEXT, v INTEGER)",
	}, seasonal("src", day("2026-11-01"), day("2026-11-29"), 3, 3)...)
	datasets := map[string]*refill.Dataset{
		"src": {Table: "src", Partition: refill.PartitionSpec{Column: "day"}},
		"a": {Table: "a", Partition: refill.PartitionSpec{Column: "day"}, Upstream: []string{"src"},
			Job: &refill.Job{Kind: refill.JobQuery, Query: "SELECT day, v FROM src WHERE day = :partition"}},
		// The view's table does not exist in this warehouse: it is never
		// read, so the plan does not care.
		"a_view": {Table: "a_view", Upstream: []string{"a"}, Tags: []string{"billing"}, LineageOnly: true, Why: "materialized as a view"},
		"b": {Table: "b", Partition: refill.PartitionSpec{Column: "day"}, Upstream: []string{"a_view"},
			Job: &refill.Job{Kind: refill.JobCommand, Command: []string{"true"}}},
	}
	each(t, datasets, fixtures, func(t *testing.T, bd *bundle) {
		plan, err := bd.p.Build(context.Background(), req("a", "2026-11-25", "2026-11-26"))
		if err != nil {
			t.Fatal(err)
		}
		if len(plan.Steps) != 2 || plan.Steps[0].Dataset != "a" || plan.Steps[0].Order != 1 || plan.Steps[1].Dataset != "b" || plan.Steps[1].Order != 2 {
			t.Errorf("steps = %v, want a then b", plan.Datasets())
		}
		if strings.Join(plan.Sources, ",") != "src" {
			t.Errorf("sources = %v, want src only", plan.Sources)
		}
		if plan.Tier != refill.TierManual || !strings.Contains(strings.Join(plan.Reasons, "; "), "a_view is tagged billing (manual_tags): lineage only") {
			t.Errorf("tier %s %v, want manual for the billing view", plan.Tier, plan.Reasons)
		}
	})
}
