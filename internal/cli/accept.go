package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
)

func (a *app) acceptCmd() *cobra.Command {
	var req control.AcceptRequest
	var revoke bool
	cmd := &cobra.Command{
		Use:   "accept DATASET --partition P --check CHECK [--column C] --reason TEXT [--as USER]",
		Short: "Accept a failing finding as real data: a holiday, a launch, an outage that happened (audited)",
		Long: `A blocked partition is usually a broken source, but some anomalies are real:
Christmas, a launch day, an outage that really happened. Accepting the finding
records who says so and why; the check then passes on that partition, and the
partition leaves later volume and drift history, so a holiday never becomes
the norm.

The acceptance is bound to what the check measured: if the partition's data
changes afterwards (its row count, or the figures the check saw), it lapses
and the check fails again. It names one check (and, for per-column checks,
one column), and passes nothing else. It needs an identity (--as or
REFILL_USER) and a reason; on datasets with a tag in policy.accept_lead_tags
(default: the manual tags) only a lead may accept.

--revoke withdraws the acceptance in force (its author or a lead, with a
reason): the finding fails again where it fails. Both are audited.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if a.as == "" && a.getenv("REFILL_USER") == "" {
				return refill.NotPermittedf("accepting a finding needs an identity: pass --as USER or set REFILL_USER")
			}
			if req.Partition == "" || req.Check == "" {
				return refill.BadInputf("--partition and --check are required: name the finding that is real data")
			}
			e, c, actor, err := a.openControl(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer e.Close()
			req.Dataset = args[0]
			accept := c.Accept
			if revoke {
				accept = c.Revoke
			}
			acc, err := accept(cmd.Context(), req, actor)
			if err != nil {
				return err
			}
			return a.view().Accepted(acc)
		},
	}
	cmd.Flags().StringVar(&req.Partition, "partition", "", "the partition (YYYY-MM-DD or YYYY-MM-DDTHH)")
	cmd.Flags().StringVar(&req.Check, "check", "", "the check whose finding is real: volume, not_null, unique, accepted_values, drift, time_order, no_future")
	cmd.Flags().StringVar(&req.Column, "column", "", "the column, for per-column checks")
	cmd.Flags().StringVar(&req.Reason, "reason", "", "why the anomaly is real (required; audited)")
	cmd.Flags().StringVar(&a.as, "as", "", "who is accepting (default $REFILL_USER)")
	cmd.Flags().BoolVar(&revoke, "revoke", false, "withdraw the acceptance in force instead (its author or a lead)")
	return cmd
}

func renderAccepted(acc refill.Acceptance) string {
	what := acc.Check
	if acc.Column != "" {
		what += " on " + acc.Column
	}
	if r := acc.Revoked; r != nil {
		return fmt.Sprintf("Withdrew %s's acceptance of %s on %s %s, by %s: %s\nThe finding fails again wherever it fails.\n", acc.By, what, acc.Dataset, acc.Partition, r.By, refill.OneLine(r.Reason))
	}
	return fmt.Sprintf("Accepted %s of %s %s as real data, by %s: %s\n"+
		"Bound to what was measured (%s): if the partition changes, the acceptance lapses and the check fails again.\n",
		what, acc.Dataset, acc.Partition, acc.By, refill.OneLine(acc.Reason), acc.Measured)
}
