package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/queue"
	"github.com/refill-dev/refill/run"
)

func (a *app) runner(e *env) (*run.Runner, error) {
	_, r, err := a.core(e)
	return r, err
}

func (a *app) applyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "apply PLAN [--as USER]",
		Short: "Run a plan that may run now, or resume a stopped one",
		Long: `Run a plan: refused (exit 4) while anything is unmet (refill show lists it);
the source gate is checked again first (exit 3, plan blocked, nothing written,
if it fails); then datasets are rebuilt in lineage order, partitions of one
dataset in parallel up to run.max_active, each as a River job retried with
backoff up to run.attempts, each published atomically and recorded once.
Running apply again on a failed or interrupted run resumes it: published
partitions are not rebuilt. Ends with the report.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, actor, err := a.openAs(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer e.Close()
			c, r, err := a.core(e)
			if err != nil {
				return err
			}
			if !a.json() {
				r.Log = a.stderr
			}
			// SIGINT or SIGTERM stops the run cleanly: no new partition
			// starts, jobs in flight are cancelled (their transactions roll
			// back, command jobs are killed with their process groups), and
			// the plan is left failed, ready to resume.
			ctx, stopSignals := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stopSignals()
			stop := a.showProgress(ctx, e.st, args[0], r)
			applyErr := c.Apply(ctx, args[0], actor)
			stop()
			if applyErr != nil && refill.ExitCode(applyErr) != refill.ExitInternal {
				return applyErr // refused or blocked before anything ran
			}
			repErr := a.printReport(cmd.Context(), c, args[0])
			if applyErr != nil {
				return applyErr
			}
			if errors.Is(repErr, refill.ErrVerification) {
				fmt.Fprintf(a.stderr, "ALERT %v\n", repErr)
			}
			return repErr
		},
	}
	cmd.Flags().StringVar(&a.as, "as", "", "who is running it (default $REFILL_USER)")
	return cmd
}

func (a *app) reportCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "report PLAN",
		Short: "Before/after rows and checksums of every rewritten partition; exit 5 when any is off its expectation",
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
			return a.printReport(cmd.Context(), c, args[0])
		},
	}
}

// printReport prints a plan's report and returns an error wrapping
// refill.ErrVerification when partitions are flagged (exit 5), or the error
// that kept it from being read.
func (a *app) printReport(ctx context.Context, c *control.Control, id string) error {
	rep, verdict := c.Report(ctx, id)
	if verdict != nil && !errors.Is(verdict, refill.ErrVerification) {
		return verdict
	}
	if err := a.view().Report(rep); err != nil {
		return err
	}
	return verdict
}

func renderReport(rep control.Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Report of plan %s (%s): %d of %d partitions published, %d flagged (tolerance %.0f%%)\n\n",
		rep.PlanID, rep.Status, rep.Published, rep.Total, rep.Flagged, 100*rep.Tolerance)
	if rep.Status == refill.StatusRolledBack {
		b.WriteString("It was rolled back: the partitions it published hold what they held before its run\n" +
			"again (BEFORE below); AFTER is what the run had written. refill history says by whom and when.\n\n")
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  DATASET\tPARTITION\tBEFORE\tAFTER\tEXPECTED\tCHECKSUM BEFORE -> AFTER\t")
	for _, r := range rep.Partitions {
		mark := ""
		if r.Flagged && r.Deviation != nil && math.Abs(*r.Deviation) > rep.Tolerance {
			mark = fmt.Sprintf("! %+.0f%% off", 100**r.Deviation)
		}
		if r.DryRun != "" {
			if mark != "" {
				mark += ", "
			}
			mark += "! not as the dry run foresaw"
		}
		if !r.Published {
			mark = "not published"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Dataset, r.Partition, digestRows(r.Before), digestRows(r.After), rows(r.Expected), checksums(r), mark)
	}
	tw.Flush()
	// What the dry run foresaw, where the run did otherwise.
	for _, r := range rep.Partitions {
		if r.DryRun != "" {
			fmt.Fprintf(&b, "\n  ! %s %s: %s", r.Dataset, r.Partition, refill.OneLine(r.DryRun))
		}
	}
	if rep.DryRunMismatches > 0 {
		b.WriteString("\n")
	}
	return b.String()
}

func digestRows(d *refill.Digest) string {
	if d == nil {
		return "?"
	}
	return humanize.Comma(d.Rows)
}

func checksums(r control.PartitionReport) string {
	if r.Before == nil || r.After == nil {
		return ""
	}
	if r.Before.Checksum == r.After.Checksum {
		return r.After.Checksum + " (same)"
	}
	return r.Before.Checksum + " -> " + r.After.Checksum
}

func (a *app) workerCmd() *cobra.Command {
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Serve partition jobs of runs on a PostgreSQL state store, until interrupted",
		Long: `More hands for runs: with state: on PostgreSQL, any number of refill worker
processes (on any machine that reaches the warehouse and the state store)
share the partition jobs that refill apply queues. Killing one loses nothing:
its jobs return to the queue, and a partition is recorded published once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := a.open(cmd.Context(), true, true)
			if err != nil {
				return err
			}
			defer e.Close()
			if e.st.SQLitePath() != "" {
				return refill.BadInputf("refill worker needs state: on PostgreSQL; with a SQLite state store, refill apply does the work itself")
			}
			r, err := a.runner(e)
			if err != nil {
				return err
			}
			r.Log = a.stderr
			r.Grace = grace
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			c, err := a.control(e)
			if err != nil {
				return err
			}
			// Runs nobody holds (paused by a restart, their holder dead)
			// are resumed here too. They go on past a SIGTERM until their
			// partitions in flight are done (Drain), for up to --grace.
			base, stopRuns := context.WithCancel(context.WithoutCancel(ctx))
			defer stopRuns()
			var runs sync.WaitGroup
			go run.Adopt(ctx, c, func(ctx context.Context, id string) error {
				held, err := c.Start(ctx, id, refill.Adopter)
				if err != nil {
					return err
				}
				runs.Add(1)
				go func() {
					defer runs.Done()
					if err := held(base); err != nil {
						fmt.Fprintf(a.stderr, "plan %s: %v\n", id, err)
					}
				}()
				return nil
			}, func(format string, args ...any) { fmt.Fprintf(a.stderr, format+"\n", args...) })
			// One River client: partition jobs, and the Slack messages
			// and webhooks any door queued.
			var o queue.Options
			r.Partitions(&o)
			e.notifier.Notices(&o, c, slog.New(slog.NewTextHandler(a.stderr, nil)).With(slog.String("component", "notify")))
			fmt.Fprintf(a.stderr, "worker: serving partition jobs, %d at a time\n", o.PartitionWorkers)
			err = queue.Serve(ctx, e.st, o, grace, r.Drain)
			stop()
			r.Drain()
			drained := make(chan struct{})
			go func() { runs.Wait(); close(drained) }()
			select {
			case <-drained:
			case <-time.After(grace):
				stopRuns()
				<-drained
			}
			return err
		},
	}
	cmd.Flags().DurationVar(&grace, "grace", 30*time.Second, "how long the partitions in flight may finish on shutdown (SIGTERM) before they are cancelled")
	return cmd
}
