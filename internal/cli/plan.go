package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/lineage"
	"github.com/refill-dev/refill/openlineage"
	"github.com/refill-dev/refill/planner"
)

func (a *app) planCmd() *cobra.Command {
	var from, to, reason string
	var exclude []string
	var noDownstream bool
	cmd := &cobra.Command{
		Use:   "plan SELECTOR... --from D --to D --reason TEXT",
		Short: "Dry run: what would be rebuilt, how many rows, and which tier",
		Long: `Plan a backfill without writing anything to the warehouse.

The plan lists every dataset downstream of the targets in the order they would
run, each partition with its current and expected row counts, the source gate's
verdict and the tier with its reasons. It is stored immutable and hashed; later
commands refer to it by id. Naming a source means "rebuild everything
downstream of it for these dates".

Selectors:
  NAME, NAME+   the dataset and everything downstream of it
  +NAME, +NAME+ the same, with every dataset with a job upstream of it
  tag:TAG       every dataset tagged TAG, and everything downstream
--no-downstream takes only what the selectors name. --exclude takes datasets
out, read literally: NAME that one, NAME+ it and its downstream, +NAME it and
its upstream, tag:TAG the tagged. A dataset left out that reads what the plan
rewrites is named in the plan and keeps it from auto.`,
		Example: `  refill plan events_daily --from 2026-11-01 --to 2026-11-03 --reason "schema change broke 72h" --as alice
  refill plan 'events_raw+' --exclude partner_feed --from 2026-11-01 --to 2026-11-03 --reason "..."
  refill plan revenue_daily --no-downstream --from 2026-11-01 --to 2026-11-01 --reason "..."`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, c, actor, err := a.openControl(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer e.Close()
			// A blocked plan is stored and printed, and its error exits 3.
			plan, err := c.Plan(cmd.Context(), actor, planner.Request{Targets: args, Exclude: exclude, NoDownstream: noDownstream, From: from, To: to, Reason: reason})
			if plan != nil {
				if perr := a.printPlan(plan, e.cfg); perr != nil {
					return perr
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "first partition, YYYY-MM-DD (or YYYY-MM-DDTHH)")
	f.StringVar(&to, "to", "", "last partition, both ends included")
	f.StringVar(&reason, "reason", "", "why these dates are reprocessed (required; kept in the audit log)")
	f.StringVar(&a.as, "as", "", "who is asking (default $REFILL_USER)")
	f.StringArrayVar(&exclude, "exclude", nil, "a selector of datasets to leave out (repeatable)")
	f.BoolVar(&noDownstream, "no-downstream", false, "rebuild only what the selectors name, nothing downstream of it")
	return cmd
}

func (a *app) printPlan(plan *refill.Plan, cfg *refill.Config) error {
	return a.view().Plan(plan, cfg)
}

func (a *app) showCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show PLAN",
		Short: "Print a stored plan and its state",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := a.open(cmd.Context(), false, true)
			if err != nil {
				return err
			}
			defer e.Close()
			c, err := a.control(e)
			if err != nil {
				return err
			}
			s, err := c.Load(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.printState(s, e.cfg)
		},
	}
}

func (a *app) plansCmd() *cobra.Command {
	var status string
	var limit int
	cmd := &cobra.Command{
		Use:   "plans [--status S]",
		Short: "List stored plans, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if status != "" && !refill.Status(status).Known() {
				return refill.BadInputf("--status %q: want one of %s", status, strings.Join(statusNames(), ", "))
			}
			e, err := a.open(cmd.Context(), false, true)
			if err != nil {
				return err
			}
			defer e.Close()
			c, err := a.control(e)
			if err != nil {
				return err
			}
			list, err := c.Plans(cmd.Context(), refill.PlanFilter{Status: refill.Status(status), Limit: limit})
			if err != nil {
				return err
			}
			return a.view().Plans(list)
		},
	}
	cmd.Flags().StringVar(&status, "status", "", "only plans in this status")
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many plans")
	return cmd
}

func statusNames() []string {
	out := make([]string, len(refill.Statuses))
	for i, s := range refill.Statuses {
		out[i] = string(s)
	}
	return out
}

func (a *app) lineageCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "lineage [DATASET] [--format dot|mermaid|text]",
		Short: "The lineage picture, as Graphviz DOT, Mermaid or a list of edges",
		Long: `Print the lineage of every dataset, or of one dataset with everything
upstream and downstream of it. Pipe DOT to "dot -Tsvg" or paste Mermaid into
any Markdown viewer that renders it; text lists the edges.

Each edge says where it came from: declared in refill.yaml (config), imported
from a dbt manifest (dbt), or seen by OpenLineage (openlineage: a job reported
reading one and writing the other, POST /api/v1/lineage). Datasets that
OpenLineage saw next to refill's but that refill does not manage are drawn
as outside refill. -o json lists every edge with its origin.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "dot" && format != "mermaid" && format != "text" {
				return refill.BadInputf("--format %q: want dot, mermaid or text", format)
			}
			e, err := a.open(cmd.Context(), false, true)
			if err != nil {
				return err
			}
			defer e.Close()
			g, err := lineage.Of(e.cfg)
			if err != nil {
				return err
			}
			names := g.Names()
			h := lineage.Highlight{Targets: map[string]bool{}}
			if len(args) == 1 {
				if names, err = g.Neighbourhood(args[0]); err != nil {
					return err
				}
				h.Targets[args[0]] = true
			}
			edges, err := e.st.LineageEdges(cmd.Context())
			if err != nil {
				return err
			}
			seen := make([]lineage.Observed, len(edges))
			for i, ed := range edges {
				seen[i] = lineage.Observed{Input: ed.Input, Output: ed.Output, Job: ed.Job.Name, LastSeen: ed.LastSeen}
			}
			pic := g.Picture(names, seen, openlineage.NewMatcher(e.cfg.Datasets).Match)
			var text string
			switch format {
			case "dot":
				text = g.DrawDOT(pic, h)
			case "mermaid":
				text = g.DrawMermaid(pic, h)
			case "text":
				text = pic.Text()
			}
			return a.view().Lineage(format, pic, text)
		},
	}
	cmd.Flags().StringVar(&format, "format", "dot", "dot, mermaid or text")
	return cmd
}
