package cli

import (
	"fmt"
	"path/filepath"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/demo"
	"github.com/refill-dev/refill/planner"
)

// demoPlan is one step of the walkthrough: a request and what it shows.
type demoPlan struct {
	title, story string
	req          planner.Request
}

func (a *app) demoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "demo [DIR]",
		Short: "Build a self-contained replay of the incident (SQLite, no server) and walk through it",
		Long: `Write a SQLite warehouse and a refill.yaml into DIR (default ./refill-demo)
that replay the incident refill exists for — an upstream schema change that left
72 hours of events broken, an aggregate built on them, a billing table and a
partner export — then plan three backfills that land in the three tiers.

Everything stays in DIR; rerunning the demo replaces an earlier demo there.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "refill-demo"
			if len(args) == 1 {
				dir = args[0]
			}
			nowFn, err := a.now()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
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
			abs, _ := filepath.Abs(dir)
			say := func(format string, args ...any) {
				if !a.json() {
					fmt.Fprintf(a.stdout, format, args...)
				}
			}
			say("refill demo — the incident, replayed in %s\n\n", abs)
			say("  warehouse.db   events_raw: %s events over %d days (weekends ~40%% of weekdays)\n", humanize.Comma(int64(sc.Rows)), demo.Days)
			say("                 sessions, events_daily [aggregate], revenue_daily [billing], partner_feed [external]\n")
			say("  refill.yaml    the datasets, their lineage, checks, policy and three users\n\n")
			say("On %s an upstream schema change emptied events_raw.amount for 72 hours\n", sc.BrokenFrom)
			say("(%s..%s). events_daily mis-aggregated those days into one 'unknown' row, and\n", sc.BrokenFrom, sc.BrokenTo)
			say("billing and the partner export were built on it. Three backfills follow.\n\n")

			steps := []demoPlan{
				{
					title: "a small backfill of a leaf table",
					story: "sessions has nothing downstream and 3 days is inside the auto band — but\nno one has proven its job safe to rerun, so a person must look first.",
					req: planner.Request{Targets: []string{"sessions"}, From: sc.Day(3), To: sc.Day(1),
						Reason: "late-arriving events for the last three days", Actor: "alice"},
				},
				{
					title: "two weeks of sessions after a sessionization fix",
					story: "14 days is past the auto limit of 7: semi-auto, one approval by someone\nother than the requester after this dry run.",
					req: planner.Request{Targets: []string{"sessions"}, From: sc.Day(16), To: sc.Day(3),
						Reason: "sessionization bug fixed in v2.4; recompute two weeks", Actor: "alice"},
				},
				{
					title: "the broken 72 hours, everything downstream of the source",
					story: "Naming the source rebuilds everything downstream of it. Billing and the\npartner export are in the closure: manual, with snapshot, scope, lead approval\nand sign-off. Note the expected rows on the broken days: the aggregate's query\nnow yields 5 rows per day where 1 wrong row sits today.",
					req: planner.Request{Targets: []string{"events_raw"}, From: sc.BrokenFrom, To: sc.BrokenTo,
						Reason: "upstream schema change broke 72h of events (INC-4711)", Actor: "alice"},
				},
			}
			var plans []*refill.Plan
			for i, s := range steps {
				say("── %d of %d · %s ──\n%s\n\n", i+1, len(steps), s.title, s.story)
				say("$ refill plan %s --from %s --to %s --reason %q --as %s\n\n", s.req.Targets[0], s.req.From, s.req.To, s.req.Reason, s.req.Actor)
				plan, err := p.Plan(ctx, s.req)
				if err != nil {
					return fmt.Errorf("demo plan %d: %w", i+1, err)
				}
				plans = append(plans, plan)
				say("%s\n", renderPlan(plan, e.cfg))
			}
			if a.json() {
				return a.printJSON(map[string]any{"dir": abs, "config": sc.Config, "broken": []string{sc.BrokenFrom, sc.BrokenTo}, "plans": plans})
			}
			say("Try it yourself:\n  cd %s\n  refill plans\n  refill show %s\n  refill lineage --format mermaid\n", dir, plans[len(plans)-1].ID)
			return nil
		},
	}
}
