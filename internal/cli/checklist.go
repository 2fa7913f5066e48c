package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
)

// warehouseCmd builds snapshot and rollback: acts on data, so it opens the
// warehouse too, and prints the partitions it copied or restored.
func (a *app) warehouseCmd(use, short, long string, act func(c *control.Control, cmd *cobra.Command, id, actor string) (*control.State, []refill.SnapshotPart, error)) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, c, actor, err := a.openControl(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer e.Close()
			s, parts, err := act(c, cmd, args[0], actor)
			if err != nil {
				return err
			}
			return a.view().Snapshot(s, parts)
		},
	}
	cmd.Flags().StringVar(&a.as, "as", "", "who is acting (default $REFILL_USER)")
	return cmd
}

func (a *app) snapshotCmd() *cobra.Command {
	cmd := a.warehouseCmd("snapshot PLAN [--as USER]", "Manual checklist step 1: copy every partition the plan will overwrite",
		`Copy every partition the plan will overwrite, and the source partitions it
reads, into snapshot tables in the warehouse (refill_snap_<plan>_<table>), in
one transaction, recording each partition's row count and checksum. A
rollback restores exactly these.`,
		func(c *control.Control, cmd *cobra.Command, id, actor string) (*control.State, []refill.SnapshotPart, error) {
			return c.Snapshot(cmd.Context(), id, actor)
		})
	var reason string
	drop := &cobra.Command{
		Use:   "drop PLAN --reason TEXT [--as USER]",
		Short: "Drop a finished plan's snapshot tables now (audited)",
		Long: `Snapshot tables are dropped on their own once their plan is done (signed off,
rejected, expired or rolled back) and policy.snapshot_ttl (default 14 days) has
passed. This drops them now, with who and why in the audit log. A plan that
may still run, or be rolled back, keeps its snapshot.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, c, actor, err := a.openControl(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer e.Close()
			tables, err := c.DropSnapshot(cmd.Context(), args[0], actor, reason)
			if err != nil {
				return err
			}
			return a.view().Dropped(args[0], tables)
		},
	}
	drop.Flags().StringVar(&reason, "reason", "", "why the snapshot may go (required; audited)")
	drop.Flags().StringVar(&a.as, "as", "", "who is acting (default $REFILL_USER)")
	cmd.AddCommand(drop)
	return cmd
}

func (a *app) rollbackCmd() *cobra.Command {
	var force bool
	var reason string
	cmd := a.warehouseCmd("rollback PLAN [--as USER] [--force --reason TEXT]", "Restore every snapshotted partition, proven by checksum",
		`Restore every partition the plan rewrote from its snapshot, in one
transaction; each restored partition must match the row count and checksum
recorded at snapshot time, or nothing is restored (exit 5). Works after a
finished or a failed run, and is audited.

A partition someone else wrote since this plan published it (its checksum is
not what the run published), or that changed between the snapshot and the
run, is refused (exit 4): restoring it would silently undo their work. A lead
may force it with --force --reason, which the audit log records.`,
		func(c *control.Control, cmd *cobra.Command, id, actor string) (*control.State, []refill.SnapshotPart, error) {
			if !force && reason != "" {
				return nil, nil, refill.BadInputf("--reason goes with --force")
			}
			return c.Rollback(cmd.Context(), id, actor, control.RollbackOptions{Force: force, Reason: reason})
		})
	cmd.Flags().BoolVar(&force, "force", false, "a lead restores partitions written by someone else since (needs --reason; audited)")
	cmd.Flags().StringVar(&reason, "reason", "", "why the rollback is forced")
	return cmd
}

func (a *app) signoffCmd() *cobra.Command {
	return a.decisionCmd("signoff PLAN [--note TEXT] [--as USER]", "Manual checklist step 5: sign off the before/after comparison",
		"Record that the finished run's report was reviewed and accepted.",
		func(c *control.Control, cmd *cobra.Command, id, actor, note string) (*control.State, error) {
			return c.Signoff(cmd.Context(), id, actor, note)
		})
}

func (a *app) historyCmd() *cobra.Command {
	var partition string
	cmd := &cobra.Command{
		Use:   "history DATASET --partition P",
		Short: "Why was this date reprocessed? Every plan that touched a partition",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if partition == "" {
				return refill.BadInputf("--partition is required")
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
			h, err := c.PartitionHistory(cmd.Context(), args[0], partition)
			if err != nil {
				return err
			}
			return a.view().History(h)
		},
	}
	cmd.Flags().StringVar(&partition, "partition", "", "the partition (YYYY-MM-DD or YYYY-MM-DDTHH)")
	return cmd
}

func renderHistory(dataset, partition string, hist []control.Touch) string {
	var b strings.Builder
	if len(hist) == 0 {
		fmt.Fprintf(&b, "No plan has touched %s %s.\n", dataset, partition)
		return b.String()
	}
	fmt.Fprintf(&b, "%s %s was in %d plan(s):\n\n", dataset, partition, len(hist))
	for _, t := range hist {
		fmt.Fprintf(&b, "  plan %s  %s  %s  planned %s by %s\n", t.PlanID, t.Tier, t.Status, t.PlannedAt.Format("2006-01-02 15:04"), t.RequestedBy)
		fmt.Fprintf(&b, "    why        %s (range %s)\n", refill.OneLine(t.Reason), t.Range)
		if len(t.ApprovedBy) > 0 {
			fmt.Fprintf(&b, "    approved   by %s\n", strings.Join(t.ApprovedBy, ", "))
		}
		fmt.Fprintf(&b, "    planned    %s -> %s rows\n", rows(t.RowsNow), rows(t.RowsExpected))
		if t.Ran != nil {
			fmt.Fprintf(&b, "    ran        %s: %s -> %s rows\n", t.Ran.Format("2006-01-02 15:04"), rows(t.RowsBefore), rows(t.RowsAfter))
		}
		for _, ev := range t.Events {
			fmt.Fprintf(&b, "    %s  %s by %s\n", ev.At.Format("2006-01-02 15:04"), ev.Kind, ev.Actor)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// renderAcceptances lists the findings people accepted as real data.
func renderSchemaChanges(dataset string, chs []control.SchemaChange) string {
	if len(chs) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nSchema baseline of %s moved by people (refill schema accept):\n\n", dataset)
	for _, ch := range chs {
		fmt.Fprintf(&b, "  %s  by %s: %s\n", ch.At.Format("2006-01-02 15:04"), ch.By, refill.OneLine(ch.Reason))
		var what []string
		for _, c := range ch.Added {
			what = append(what, "+"+c)
		}
		for _, c := range ch.Removed {
			what = append(what, "-"+c)
		}
		what = append(what, ch.Retyped...)
		if len(what) > 0 {
			fmt.Fprintf(&b, "    columns    %s\n", strings.Join(what, ", "))
		}
	}
	return b.String()
}

func renderAcceptances(acc []refill.Acceptance) string {
	if len(acc) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Accepted as real data:\n\n")
	for _, a := range acc {
		what := a.Check
		if a.Column != "" {
			what += " on " + a.Column
		}
		fmt.Fprintf(&b, "  %s  %s accepted by %s: %s\n", a.At.Format("2006-01-02 15:04"), what, a.By, refill.OneLine(a.Reason))
		fmt.Fprintf(&b, "    bound to   %s (lapses if the partition changes)\n", a.Measured)
		if r := a.Revoked; r != nil {
			fmt.Fprintf(&b, "    withdrawn  %s by %s: %s\n", r.At.Format("2006-01-02 15:04"), r.By, refill.OneLine(r.Reason))
		}
	}
	return b.String()
}
