package cli

import (
	"github.com/spf13/cobra"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
)

func (a *app) tokenCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "API tokens for refill serve"}
	var expires string
	create := &cobra.Command{
		Use:   "create --as USER [--expires 90d]",
		Short: "Make an API token for yourself; it is printed once",
		Long: `Make a bearer token that acts as USER on refill serve's API and web UI. The
token is printed once; only its hash is kept. It ends when it expires or is
revoked, or when USER leaves users: in refill.yaml.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := control.ParseExpiry(expires)
			if err != nil {
				return err
			}
			e, c, actor, err := a.openControl(cmd.Context(), false)
			if err != nil {
				return err
			}
			defer e.Close()
			plain, tok, err := c.CreateToken(cmd.Context(), actor, d)
			if err != nil {
				return err
			}
			return a.view().Token(plain, tok)
		},
	}
	create.Flags().StringVar(&a.as, "as", "", "whose token (default $REFILL_USER)")
	create.Flags().StringVar(&expires, "expires", "90d", "lifetime: whole days (90d) or a duration (36h); 0 never expires")
	revoke := &cobra.Command{
		Use:   "revoke TOKEN_ID [--as USER]",
		Short: "End a token at once (its owner or a lead)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, c, actor, err := a.openControl(cmd.Context(), false)
			if err != nil {
				return err
			}
			defer e.Close()
			tok, err := c.RevokeToken(cmd.Context(), args[0], actor)
			if err != nil {
				return err
			}
			return a.view().Token("", tok)
		},
	}
	revoke.Flags().StringVar(&a.as, "as", "", "who is acting (default $REFILL_USER)")
	list := &cobra.Command{
		Use:   "list",
		Short: "List tokens (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := a.open(cmd.Context(), false, true)
			if err != nil {
				return err
			}
			defer e.Close()
			list, err := e.st.Tokens(cmd.Context())
			if err != nil {
				return err
			}
			return a.view().Tokens(list)
		},
	}
	cmd.AddCommand(create, revoke, list)
	return cmd
}

func (a *app) cancelCmd() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "cancel PLAN --reason TEXT [--as USER]",
		Short: "Stop a plan: no new partition starts; the plan ends cancelled",
		Long: `Cancel a plan, as its requester, an approver or a lead. A plan that has not
started ends cancelled at once. A running plan is asked to stop: no new
partition starts, partitions in flight finish and are published (or roll
back, never half-written), and the run then ends the plan cancelled. What it
published stays; refill rollback undoes it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, c, actor, err := a.openControl(cmd.Context(), false)
			if err != nil {
				return err
			}
			defer e.Close()
			s, err := c.Cancel(cmd.Context(), args[0], actor, reason)
			if err != nil {
				return err
			}
			return a.printState(s, e.cfg)
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why the plan stops (required; kept in the audit log)")
	cmd.Flags().StringVar(&a.as, "as", "", "who is acting (default $REFILL_USER)")
	return cmd
}

func (a *app) resolveCmd() *cobra.Command {
	var reason, dataset, partition string
	var ran, notRan bool
	cmd := &cobra.Command{
		Use:   "resolve PLAN --partition P (--ran | --not-ran) --reason TEXT [--dataset D] [--as USER]",
		Short: "Say whether a side_effects job whose outcome is unknown ran",
		Long: `A job with side_effects (a partner upload, an email) is never run twice on
refill's own: when one of its attempts ends with its outcome unknown — the
job finished but its record did not commit, or its process vanished — the
partition needs review and the plan waits (status needs_review). Find out
whether it ran (the partner's receipt, the job's log, REFILL_ATTEMPT_KEY in
what it wrote) and say so, as the plan's requester, an approver or a lead:

  --ran      it had its effect: the partition is recorded published and
             never runs again
  --not-ran  it did not: it runs again when the plan resumes

Both are audited with your reason. Once every partition is resolved,
refill apply PLAN resumes the run.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if ran == notRan {
				return refill.BadInputf("say either --ran (its job had its effect) or --not-ran (it did not, and runs again)")
			}
			if partition == "" {
				return refill.BadInputf("--partition is required: the partition that needs review (refill show %s lists them)", args[0])
			}
			e, c, actor, err := a.openControl(cmd.Context(), false)
			if err != nil {
				return err
			}
			defer e.Close()
			s, err := c.Resolve(cmd.Context(), actor, control.ResolveRequest{PlanID: args[0], Dataset: dataset, Partition: partition, Ran: ran, Reason: reason})
			if err != nil {
				return err
			}
			return a.printState(s, e.cfg)
		},
	}
	cmd.Flags().StringVar(&partition, "partition", "", "the partition that needs review (required)")
	cmd.Flags().StringVar(&dataset, "dataset", "", "its dataset, when the plan has the partition in more than one")
	cmd.Flags().BoolVar(&ran, "ran", false, "the job had its effect: record the partition published")
	cmd.Flags().BoolVar(&notRan, "not-ran", false, "the job did not have its effect: run it again on resume")
	cmd.Flags().StringVar(&reason, "reason", "", "how you know (required; kept in the audit log)")
	cmd.Flags().StringVar(&a.as, "as", "", "who is acting (default $REFILL_USER)")
	return cmd
}

func (a *app) freezeCmd(lift bool) *cobra.Command {
	var reason string
	use, short := "freeze --reason TEXT [--as LEAD]", "Stop every automatic apply until unfrozen (leads only)"
	if lift {
		use, short = "unfreeze [--reason TEXT] [--as LEAD]", "Lift the freeze (leads only)"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long: `A freeze stops every automatic apply — auto plans, the watcher — across every
process sharing the state store, until a lead lifts it. Plans a person
approved still run. Both are audited, shown on every page of refill serve and
posted to Slack.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			e, c, actor, err := a.openControl(cmd.Context(), false)
			if err != nil {
				return err
			}
			defer e.Close()
			if lift {
				f, err := c.Unfreeze(cmd.Context(), actor, reason)
				if err != nil {
					return err
				}
				return a.view().Freeze(&f, true)
			}
			f, err := c.Freeze(cmd.Context(), actor, reason)
			if err != nil {
				return err
			}
			return a.view().Freeze(&f, false)
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (kept in the audit log)")
	cmd.Flags().StringVar(&a.as, "as", "", "who is acting (default $REFILL_USER)")
	return cmd
}
