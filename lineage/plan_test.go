package lineage_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/config"
	"github.com/refill-dev/refill/lineage"
)

// demoConfig is the demo's refill.yaml (a copy in testdata).
func demoConfig(t *testing.T) *refill.Config {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(b, "")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// planOf builds the plan the planner would seal for targets over days
// partitions from 2026-11-21, with the closure's steps and sources, made-up
// but fixed row counts, and the gate's verdict given.
func planOf(t *testing.T, cfg *refill.Config, id string, tier refill.Tier, days int, gate refill.GateVerdict, targets ...string) *refill.Plan {
	t.Helper()
	g, err := lineage.New(cfg.Datasets)
	if err != nil {
		t.Fatal(err)
	}
	c, err := g.Closure(targets)
	if err != nil {
		t.Fatal(err)
	}
	first := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
	p := &refill.Plan{ID: id, Status: refill.StatusPending, Tier: tier, Sources: c.Sources, Gate: gate,
		Request: refill.Request{Targets: targets, From: first.Format(time.DateOnly),
			To: first.AddDate(0, 0, days-1).Format(time.DateOnly), Reason: "INC-4711", RequestedBy: "alice", Days: days}}
	for i, n := range c.Steps {
		d := n.Dataset
		s := refill.Step{Dataset: d.Name, Order: n.Order, Kind: d.Job.Kind, Table: d.Table, Tags: d.Tags, Upstream: d.Upstream}
		for day := range days {
			cur, exp := int64(100*(i+1)+day), int64(100*(i+1)+day+5)
			pp := refill.PartitionPlan{Partition: first.AddDate(0, 0, day).Format(time.DateOnly), CurrentRows: &cur,
				ExpectedRows: &exp, ExpectedMethod: refill.ExpectedQuery}
			if d.Name == "revenue_daily" {
				// Its expectation waits for its upstream's rebuild.
				pp.ExpectedRows, pp.ExpectedMethod = nil, refill.ExpectedUpstream
			}
			s.Partitions = append(s.Partitions, pp)
		}
		p.Steps = append(p.Steps, s)
	}
	for _, src := range c.Sources {
		p.SourceSeals = append(p.SourceSeals, refill.SourceSeal{Dataset: src})
	}
	return p
}

// blocked is the demo's first plan: the obvious backfill over the broken
// source, which the gate stops.
func blocked(t *testing.T, cfg *refill.Config) *refill.Plan {
	return planOf(t, cfg, "p-blocked", refill.TierManual, 3, refill.GateVerdict{Passed: false, Checked: []string{"events_raw"},
		Findings: []refill.Finding{
			{Dataset: "events_raw", Partition: "2026-11-21", Check: "not_null", Column: "amount", Observed: 1, Limit: 0.01},
			{Dataset: "events_raw", Partition: "2026-11-22", Check: "not_null", Column: "amount", Observed: 1, Limit: 0.01},
			{Dataset: "events_raw", Partition: "2026-11-21", Check: "volume", Observed: 0.4, Limit: 3, Passed: true},
		}}, "events_raw")
}

func TestPlanDOTGolden(t *testing.T) {
	cfg := demoConfig(t)
	passed := func(warnings int) refill.GateVerdict {
		v := refill.GateVerdict{Passed: true, Checked: []string{"events_raw"},
			Findings: []refill.Finding{{Dataset: "events_raw", Partition: "2026-11-21", Check: "not_null", Column: "amount", Passed: true}}}
		for range warnings {
			v.Findings = append(v.Findings, refill.Finding{Dataset: "events_raw", Partition: "2026-11-21", Check: "volume", Warning: true,
				Message: "too little history"})
		}
		return v
	}
	for _, tc := range []struct {
		golden string
		plan   *refill.Plan
		// want and not are fragments the golden must (not) hold, so that
		// a careless -update cannot bless a wrong picture.
		want, not []string
	}{
		{"plan-blocked.dot", blocked(t, cfg),
			[]string{`"1 · events_daily [aggregate]\nquery · 3 partitions\nrows 303 → 318", style="rounded,filled", fillcolor="#ffe8a3"`,
				`"2 · revenue_daily [aggregate,billing]`, `rows 1,203 → ?"`, `"events_raw" [label="events_raw\nsource\ngate FAILED: 2 findings", shape=cylinder, style="filled,bold"`, `"2 · partner_feed [external]\ncommand`,
				`gate FAILED: 2 findings"`, `shape=cylinder`, `fillcolor="#ffd6d6"`, `"events_raw" -> "events_daily";`,
				`"events_daily" -> "revenue_daily";`, `plan p-blocked · manual · 2026-11-21..2026-11-23`},
			[]string{"dashed"}},
		{"plan-sessions.dot", planOf(t, cfg, "p-sessions", refill.TierSemiAuto, 14, passed(1), "sessions"),
			[]string{`"1 · sessions\nquery · 14 partitions`, `gate passed · 1 warning"`, `fillcolor="#d8f3dc"`, `"events_daily" [label="events_daily\nquery [aggregate]", color="gray60", fontcolor="gray45", style="rounded,dashed"];`,
				`"events_raw" -> "events_daily" [color="gray60", style="dashed"];`, `"events_raw" -> "sessions";`},
			[]string{"revenue_daily", "partner_feed", "FAILED"}},
		{"plan-billing.dot", planOf(t, cfg, "p-billing", refill.TierManual, 2, passed(0), "revenue_daily"),
			[]string{`"1 · revenue_daily [aggregate,billing]`, `"events_raw" [label="events_raw\nsource\ngate passed"`, `"events_daily" -> "revenue_daily" [color="gray60", style="dashed"];`,
				`"sessions" [label="sessions\nquery", color="gray60"`},
			// sessions reads the gated source: one hop from it, faded.
			[]string{"partner_feed", `"events_raw" -> "sessions";`}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			got, err := lineage.PlanDOT(tc.plan, cfg)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := lineage.PlanDOT(tc.plan, cfg)
			if again != got {
				t.Error("PlanDOT is not deterministic")
			}
			lineage.Golden(t, tc.golden, got)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("picture lacks %s", w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("picture holds %s", n)
				}
			}
		})
	}
}

// An input the gate did not check (it has no table) is not drawn as
// passed.
func TestPlanDOTUnjudgedInput(t *testing.T) {
	cfg := demoConfig(t)
	p := planOf(t, cfg, "p", refill.TierManual, 1, refill.GateVerdict{Passed: true, Checked: []string{}}, "sessions")
	got, err := lineage.PlanDOT(p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "not gated (no table)") {
		t.Errorf("an input the gate did not check is shown as passed:\n%s", got)
	}
}

// A plan is drawn from what it sealed: without a config it still shows its
// steps and inputs, and a dataset since removed from the config stays.
func TestPlanDOTFromTheSealAlone(t *testing.T) {
	cfg := demoConfig(t)
	p := blocked(t, cfg)
	got, err := lineage.PlanDOT(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"events_raw", "events_daily", "sessions", "revenue_daily", "partner_feed"} {
		if !strings.Contains(got, `"`+n+`"`) {
			t.Errorf("no config: %s is missing", n)
		}
	}
	if !strings.Contains(got, `"events_daily" -> "revenue_daily";`) {
		t.Error("no config: the sealed upstream edges are missing")
	}
	delete(cfg.Datasets, "partner_feed")
	got, err = lineage.PlanDOT(p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, `"2 · partner_feed`) {
		t.Error("a step removed from the config since vanished from the plan's picture")
	}
}

func TestSVG(t *testing.T) {
	cfg := demoConfig(t)
	dot, err := lineage.PlanDOT(blocked(t, cfg), cfg)
	if err != nil {
		t.Fatal(err)
	}
	svg, err := lineage.SVG(context.Background(), dot)
	if err != nil {
		t.Fatal(err)
	}
	s := string(svg)
	if !strings.Contains(s, "<svg") || !strings.HasSuffix(strings.TrimSpace(s), "</svg>") {
		t.Fatalf("not an SVG document:\n%.300s", s)
	}
	for _, n := range []string{"events_raw", "events_daily", "sessions", "revenue_daily", "partner_feed", "gate FAILED"} {
		if !strings.Contains(s, n) {
			t.Errorf("SVG lacks %s", n)
		}
	}
}

// The server renders for many requests at once: renders must not corrupt
// each other (run with -race).
func TestSVGConcurrent(t *testing.T) {
	cfg := demoConfig(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			name := []string{"sessions", "events_daily", "revenue_daily", "partner_feed"}[i%4]
			dot, err := lineage.PlanDOT(planOf(t, cfg, "p", refill.TierAuto, 2, refill.GateVerdict{Passed: true}, name), cfg)
			if err != nil {
				errs <- err
				return
			}
			svg, err := lineage.SVG(context.Background(), dot)
			if err != nil {
				errs <- err
				return
			}
			if !strings.Contains(string(svg), name) {
				errs <- errors.New("render " + name + ": the SVG does not name it")
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestSVGBadDOT(t *testing.T) {
	_, err := lineage.SVG(context.Background(), "digraph { a -> ")
	if !errors.Is(err, refill.ErrBadInput) {
		t.Errorf("err = %v, want bad input", err)
	}
	// The renderer survives a bad picture.
	if _, err := lineage.SVG(context.Background(), "digraph { a -> b }"); err != nil {
		t.Errorf("after a bad picture: %v", err)
	}
}

func TestSVGCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := lineage.SVG(ctx, "digraph { a }"); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want canceled", err)
	}
}
