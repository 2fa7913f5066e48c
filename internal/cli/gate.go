package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/refill-dev/refill"
)

func (a *app) checkCmd() *cobra.Command {
	var from, to string
	cmd := &cobra.Command{
		Use:   "check DATASET... --from D --to D",
		Short: "Run the source gate only: nulls, volume, timestamp order, future timestamps, schema drift",
		Long: `Check datasets' partitions against their configured checks, from one scan
of the range in the warehouse. Exits 3 when a check fails, so it can guard a
pipeline; insufficient history is shown as a warning and does not fail.`,
		Example: `  refill check events_raw --from 2026-11-01 --to 2026-11-07`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := a.open(cmd.Context(), true, true)
			if err != nil {
				return err
			}
			defer e.Close()
			rng, err := refill.ParseRange(from, to, e.cfg.MaxRangeDays)
			if err != nil {
				return err
			}
			c, err := a.control(e)
			if err != nil {
				return err
			}
			// A failing verdict is printed, and its error exits 3.
			verdict, err := c.Check(cmd.Context(), args, rng)
			if verdict != nil {
				if verr := a.view().Check(*verdict, args, rng); verr != nil {
					return verr
				}
			}
			return err
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "first partition, YYYY-MM-DD")
	cmd.Flags().StringVar(&to, "to", "", "last partition, both ends included")
	return cmd
}

func (a *app) proveCmd() *cobra.Command {
	var partition string
	cmd := &cobra.Command{
		Use:   "prove DATASET --partition P",
		Short: "Prove a job safe to rerun: build over existing rows, again, and from empty; all three must agree",
		Long: `Run the dataset's job three times on one partition — over its existing rows,
again, and from an emptied partition — and compare row counts and content
checksums. query and sql jobs run inside one warehouse transaction that is
always rolled back; command jobs run against proof_warehouse, never the
production warehouse. The evidence is stored against the job's fingerprint,
so editing the job makes it stale. Exits 0 when proven, 5 when not: usable as
a CI assertion.`,
		Example: `  refill prove events_daily --partition 2026-11-02 --as alice`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if partition == "" {
				return refill.BadInputf("--partition is required (YYYY-MM-DD)")
			}
			e, c, actor, err := a.openControl(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer e.Close()
			pr, err := c.Prove(cmd.Context(), args[0], partition, actor)
			if pr != nil {
				if verr := a.view().Proof(pr); verr != nil {
					return verr
				}
			}
			return err
		},
	}
	cmd.Flags().StringVar(&partition, "partition", "", "the partition to build three times")
	cmd.Flags().StringVar(&a.as, "as", "", "who is proving (default $REFILL_USER)")
	return cmd
}

func renderProof(pr *refill.Proof) string {
	var b strings.Builder
	verdict := "PROVEN"
	if !pr.Passed {
		verdict = "NOT IDEMPOTENT"
	}
	fmt.Fprintf(&b, "Proof of %s (%s job) on %s: %s\n", pr.Dataset, pr.Kind, pr.Partition, verdict)
	fmt.Fprintf(&b, "  ran in   %s\n  job      %s\n\n", pr.Warehouse, pr.Fingerprint)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  BUILD\tROWS\tCHECKSUM")
	for _, bd := range pr.Builds {
		fmt.Fprintf(tw, "  %s\t%d\t%s\n", bd.Build, bd.Digest.Rows, bd.Digest.Checksum)
	}
	tw.Flush()
	fmt.Fprintf(&b, "\n%s\n", pr.Message)
	return b.String()
}
