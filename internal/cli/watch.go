package cli

import (
	"fmt"
	"github.com/refill-dev/refill"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/refill-dev/refill/jobs/airflow"
	"github.com/refill-dev/refill/watch"
)

func (a *app) watchCmd() *cobra.Command {
	var once bool
	cmd := &cobra.Command{
		Use:   "watch --once",
		Short: "One watcher tick: gaps and failures become plans; auto ones run",
		Long: `Look at every dataset with a schedule: partitions within its horizon that are
due but missing (no rows where the same weekday held rows in the four weeks
before), or whose last run failed. Each contiguous run of them becomes one
plan, made as the reserved identity "watcher". A plan that is auto and whose
gate passes runs to completion; anything else waits for people (its notice
goes to Slack). A gap that already has a plan is decided by that plan's
status. Every decision is audited. refill serve does this every
watch.interval, as one River periodic job; this is one tick, for cron and
tests.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !once {
				return refill.BadInputf("refill watch runs one tick with --once; refill serve watches continuously")
			}
			ctx := cmd.Context()
			e, err := a.open(ctx, true, true)
			if err != nil {
				return err
			}
			defer e.Close()
			c, r, err := a.core(e)
			if err != nil {
				return err
			}
			r.Log = a.stderr
			now, err := a.now()
			if err != nil {
				return err
			}
			w := &watch.Watcher{Config: e.cfg, Store: e.st, Warehouse: e.wh, Control: c, Now: now, DAGRuns: watch.AirflowRuns(&airflow.Client{}, e.cfg.Dir)}
			rep, err := w.Tick(ctx)
			if err != nil {
				return err
			}
			return a.view().Watch(rep)
		},
	}
	cmd.Flags().BoolVar(&once, "once", false, "run one tick and exit")
	return cmd
}

func renderWatch(rep watch.Report) string {
	var b strings.Builder
	if rep.Freeze != nil {
		fmt.Fprintf(&b, "FROZEN by %s: %s — auto plans are planned but not run\n", rep.Freeze.By, rep.Freeze.Reason)
	}
	fmt.Fprintf(&b, "watched %d scheduled dataset(s) as of %s: %d gap(s)\n", rep.Datasets, rep.At.UTC().Format("2006-01-02 15:04 MST"), len(rep.Gaps))
	if len(rep.Decisions) == 0 {
		return b.String()
	}
	b.WriteString("\n")
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "DATASET\tRANGE\tGAP\tACTION\tPLAN\tSTATUS\tWHY")
	for _, d := range rep.Decisions {
		rng := d.From
		if d.To != d.From {
			rng += ".." + d.To
		}
		gap := fmt.Sprintf("%d missing", len(d.Missing))
		if len(d.Failed) > 0 {
			gap += fmt.Sprintf(", %d failed", len(d.Failed))
		}
		why := d.Why
		if d.Err != "" {
			why += " — " + d.Err
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Dataset, rng, gap, d.Action, d.PlanID, d.Status, why)
	}
	w.Flush()
	return b.String()
}
