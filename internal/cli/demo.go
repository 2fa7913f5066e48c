package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/demo"
	"github.com/refill-dev/refill/planner"
	"github.com/refill-dev/refill/proof"
)

// demoRun is what the walkthrough did, for -o json and for tests.
type demoRun struct {
	Dir      string          `json:"dir"`
	Config   string          `json:"config"`
	Broken   []string        `json:"broken"`
	Blocked  *refill.Plan    `json:"blocked"`
	Proofs   []*refill.Proof `json:"proofs"`
	Repaired int64           `json:"repaired_rows"`
	Plans    []*refill.Plan  `json:"plans"`
}

func (a *app) demoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "demo [DIR]",
		Short: "Build a self-contained replay of the incident (SQLite, no server) and walk through it",
		Long: `Write a SQLite warehouse and a refill.yaml into DIR (default ./refill-demo)
that replay the incident refill exists for — an upstream schema change that left
72 hours of events broken, an aggregate built on them, a billing table and a
partner export — then walk through it: the source gate blocks a backfill over
the broken source, a proof catches a job that is not safe to rerun, and once
the source is repaired three plans land in the three tiers.

Everything stays in DIR; rerunning the demo replaces an earlier demo there.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "refill-demo"
			if len(args) == 1 {
				dir = args[0]
			}
			return a.demo(cmd.Context(), dir)
		},
	}
}

func (a *app) demo(ctx context.Context, dir string) error {
	nowFn, err := a.now()
	if err != nil {
		return err
	}
	sc, err := demo.Write(ctx, dir, nowFn())
	if err != nil {
		return err
	}
	a.configPath = sc.Config
	e, err := a.open(ctx, true, true)
	if err != nil {
		return err
	}
	defer e.Close()
	p, err := a.planner(e)
	if err != nil {
		return err
	}
	prover := &proof.Prover{Config: e.cfg, Warehouse: e.wh, Store: e.st, Now: nowFn}
	abs, _ := filepath.Abs(dir)
	out := demoRun{Dir: abs, Config: sc.Config, Broken: []string{sc.BrokenFrom, sc.BrokenTo}}
	say := func(format string, args ...any) {
		if !a.json() {
			fmt.Fprintf(a.stdout, format, args...)
		}
	}
	chapter := 0
	title := func(t, story string) {
		chapter++
		say("── %d · %s ──\n%s\n\n", chapter, t, story)
	}
	plan := func(req planner.Request) (*refill.Plan, error) {
		say("$ refill plan %s --from %s --to %s --reason %q --as %s\n\n", req.Targets[0], req.From, req.To, req.Reason, req.Actor)
		pl, err := p.Plan(ctx, req)
		if err != nil {
			return nil, err
		}
		say("%s\n", renderPlan(pl, e.cfg))
		return pl, nil
	}
	prove := func(dataset, partition string) (*refill.Proof, error) {
		say("$ refill prove %s --partition %s --as alice\n\n", dataset, partition)
		pr, err := prover.Prove(ctx, dataset, partition, "alice")
		if pr == nil {
			return nil, err
		}
		if err != nil && !errors.Is(err, refill.ErrVerification) {
			return nil, err
		}
		say("%s\n", renderProof(pr))
		out.Proofs = append(out.Proofs, pr)
		return pr, nil
	}

	say("refill demo — the incident, replayed in %s\n\n", abs)
	say("  warehouse.db   events_raw: %s events over %d days (weekends ~40%% of weekdays)\n", humanize.Comma(int64(sc.Rows)), demo.Days)
	say("                 sessions, events_daily [aggregate], revenue_daily [billing], partner_feed [external]\n")
	say("  refill.yaml    the datasets, their lineage, checks, policy and three users\n\n")
	say("On %s an upstream schema change emptied events_raw.amount for 72 hours\n", sc.BrokenFrom)
	say("(%s..%s). events_daily mis-aggregated those days into one 'unknown' row, and\n", sc.BrokenFrom, sc.BrokenTo)
	say("billing and the partner export were built on it. The pipeline has been fixed.\n\n")

	incident := planner.Request{Targets: []string{"events_raw"}, From: sc.BrokenFrom, To: sc.BrokenTo,
		Reason: "upstream schema change broke 72h of events (INC-4711)", Actor: "alice"}
	title("the obvious backfill, over a source that is still broken",
		"A fixed pipeline over a still-broken source gives the same wrong answer. The\nsource gate checks events_raw first, in one scan of the range.")
	if out.Blocked, err = plan(incident); err != nil {
		return err
	}

	title("prove the jobs before trusting them to rerun",
		"Each job builds one partition three times inside a transaction that is rolled\nback: over its existing rows, again, and from empty. All three must agree.")
	for _, pr := range [][2]string{{"revenue_daily", sc.Day(2)}, {"sessions", sc.Day(2)}, {"events_daily", sc.Day(2)}} {
		if _, err := prove(pr[0], pr[1]); err != nil {
			return err
		}
	}

	title("the source team re-delivers the broken days",
		"The upstream re-sends the 72 hours with amount filled in.")
	if out.Repaired, err = sc.Repair(ctx); err != nil {
		return err
	}
	say("  %s rows of events_raw repaired (%s..%s)\n\n", humanize.Comma(out.Repaired), sc.BrokenFrom, sc.BrokenTo)

	steps := []struct {
		title, story string
		req          planner.Request
	}{
		{"auto: a small backfill of a proven leaf table",
			"sessions has nothing downstream, its job is proven, and 3 days is inside the\nauto band: it may run on its own.",
			planner.Request{Targets: []string{"sessions"}, From: sc.Day(3), To: sc.Day(1),
				Reason: "late-arriving events for the last three days", Actor: "alice"}},
		{"semi-auto: two weeks of sessions after a sessionization fix",
			"14 days is past the auto limit of 7: one approval, by someone other than the\nrequester, after this dry run.",
			planner.Request{Targets: []string{"sessions"}, From: sc.Day(24), To: sc.Day(11),
				Reason: "sessionization bug fixed in v2.4; recompute two weeks", Actor: "alice"}},
		{"manual: the broken 72 hours, now that the source is clean",
			"The gate passes. Billing and the partner export are downstream: manual, with\nsnapshot, scope, lead approval and sign-off. On the broken days the aggregate's\nquery now yields 5 rows where 1 wrong row sits today.",
			incident},
	}
	for _, s := range steps {
		title(s.title, s.story)
		pl, err := plan(s.req)
		if err != nil {
			return err
		}
		out.Plans = append(out.Plans, pl)
	}
	if a.json() {
		return a.printJSON(out)
	}
	say("Try it yourself:\n  cd %s\n  refill plans\n  refill show %s\n  refill check events_raw --from %s --to %s\n  refill lineage --format mermaid\n",
		dir, out.Plans[len(out.Plans)-1].ID, sc.Day(14), sc.Day(1))
	return nil
}
