package lineage

import (
	"strings"
	"testing"
)

// lineageOnly marks datasets of ds as lineage only: no job, not a source.
func lineageOnly(t *testing.T, specs []string, names ...string) *Graph {
	t.Helper()
	datasets := ds(specs...)
	for _, n := range names {
		d := datasets[n]
		d.Job, d.LineageOnly, d.Why = nil, true, "materialized as a view"
	}
	g, err := New(datasets)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestClosureLineageOnlyPassesThrough: a view between two rebuilt tables is
// never a step and never gated, but what reads it is rebuilt after what
// it reads, and the view is listed as changed by the plan.
func TestClosureLineageOnlyPassesThrough(t *testing.T) {
	// src -> a -> view -> view2 -> b ; src -> srcview -> c ; eph -> c
	g := lineageOnly(t, []string{"src", "a<-src", "view<-a", "view2<-view", "b<-view2", "srcview<-src", "c<-srcview,eph,a", "eph"},
		"view", "view2", "srcview", "eph")
	c, err := g.Closure([]string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	got := orders(c)
	if len(got) != 3 || got["a"] != 1 || got["b"] != 2 || got["c"] != 2 {
		t.Errorf("steps = %v, want a:1 b:2 (after a, through two views) c:2", got)
	}
	if strings.Join(c.LineageOnly, ",") != "view,view2" {
		t.Errorf("lineage only = %v, want view,view2 (srcview and eph read nothing the plan rebuilds)", c.LineageOnly)
	}
	if strings.Join(c.Sources, ",") != "src" {
		t.Errorf("sources = %v, want src: a lineage-only dataset is never gated, what is behind it is", c.Sources)
	}
	if strings.Join(c.Downstream, ",") != "b,c" {
		t.Errorf("downstream = %v", c.Downstream)
	}

	// Naming the view rebuilds what reads it; the view itself is neither
	// a step nor a source, and nothing of the plan changes it.
	c, err = g.Closure([]string{"view"})
	if err != nil {
		t.Fatal(err)
	}
	if got := orders(c); len(got) != 1 || got["b"] != 1 || len(c.LineageOnly) != 0 || strings.Join(c.Sources, ",") != "src" {
		t.Errorf("closure of view: steps %v, lineage only %v, sources %v", got, c.LineageOnly, c.Sources)
	}

	// Through a lineage-only dataset to a source behind it: the source is
	// gated for the step that reads the view.
	c, err = g.Closure([]string{"c"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.Sources, ",") != "src" {
		t.Errorf("sources of c = %v, want src (behind srcview)", c.Sources)
	}
}
