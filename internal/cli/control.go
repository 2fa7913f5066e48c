package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/project"
	"github.com/refill-dev/refill/run"
	"github.com/refill-dev/refill/warehouse"
)

// core wires the project's core over e: control, with the planner, the
// prover and the runner it decides for. What housekeeping did before a
// change is told on stderr.
func (a *app) core(e *env) (*control.Control, *run.Runner, error) {
	now, err := a.now()
	if err != nil {
		return nil, nil, err
	}
	c, r, err := project.Wire(e.cfg, e.wh, e.st, now)
	if err != nil {
		return nil, nil, err
	}
	c.OnSwept = func(s control.Swept) {
		for _, id := range s.Expired {
			fmt.Fprintf(a.stderr, "plan %s expired: it waited longer than policy.plan_ttl without running\n", id)
		}
		for _, id := range s.SnapshotsDropped {
			fmt.Fprintf(a.stderr, "plan %s: snapshot tables dropped (policy.snapshot_ttl passed)\n", id)
		}
	}
	return c, r, nil
}

func (a *app) control(e *env) (*control.Control, error) {
	c, _, err := a.core(e)
	return c, err
}

// decisionCmd builds approve, reject and scope: each acts as --as on one
// plan and prints the plan's state after.
func (a *app) decisionCmd(use, short, long string, act func(c *control.Control, cmd *cobra.Command, id, actor, note string) (*control.State, error)) *cobra.Command {
	var note string
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, c, actor, err := a.openControl(cmd.Context(), false)
			if err != nil {
				return err
			}
			defer e.Close()
			s, err := act(c, cmd, args[0], actor, note)
			if err != nil {
				return err
			}
			return a.printState(s, e.cfg)
		},
	}
	cmd.Flags().StringVar(&note, "note", "", "a note kept with the decision in the audit log")
	cmd.Flags().StringVar(&a.as, "as", "", "who is acting (default $REFILL_USER)")
	return cmd
}

func (a *app) approveCmd() *cobra.Command {
	return a.decisionCmd("approve PLAN [--note TEXT] [--as USER]", "Approve a plan after reviewing its dry run",
		`Approve a semi-auto or manual plan. Nobody approves their own request; manual
plans need a lead, after the snapshot and scope steps. The approval is bound to
the plan's hash: a re-plan of the same request is a new plan and needs its own.`,
		func(c *control.Control, cmd *cobra.Command, id, actor, note string) (*control.State, error) {
			return c.Approve(cmd.Context(), id, actor, note)
		})
}

func (a *app) rejectCmd() *cobra.Command {
	return a.decisionCmd("reject PLAN --note TEXT [--as USER]", "Reject a plan that has not run, saying why",
		"Reject a plan; it can never be approved or applied afterwards.",
		func(c *control.Control, cmd *cobra.Command, id, actor, note string) (*control.State, error) {
			return c.Reject(cmd.Context(), id, actor, note)
		})
}

func (a *app) scopeCmd() *cobra.Command {
	return a.decisionCmd("scope PLAN --note TEXT [--as USER]", "Manual checklist step 2: state the scope",
		`Record the scope statement of a manual plan: your note, with the plan's own
impact summary (datasets, range, partitions, rows) attached.`,
		func(c *control.Control, cmd *cobra.Command, id, actor, note string) (*control.State, error) {
			return c.Scope(cmd.Context(), id, actor, note)
		})
}

func (a *app) printState(s *control.State, cfg *refill.Config) error {
	return a.view().State(s, cfg)
}

// stateJSON is the plan of docs/design.md §7 with its state beside it.
func stateJSON(s *control.State) any { return s.JSON() }

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func renderState(s *control.State) string {
	var b strings.Builder
	if len(s.Approvals) > 0 || len(s.Checklist) > 0 {
		b.WriteString("\nDecisions and checklist:\n")
		for _, st := range s.Checklist {
			note := ""
			if st.Note != "" {
				note = ": " + refill.OneLine(st.Note)
			}
			fmt.Fprintf(&b, "  %s  %-8s by %s%s\n", st.At.Format("2006-01-02 15:04"), st.Step, st.Actor, note)
		}
		for _, ap := range s.Approvals {
			note := ""
			if ap.Note != "" {
				note = ": " + refill.OneLine(ap.Note)
			}
			fmt.Fprintf(&b, "  %s  %-8s by %s%s\n", ap.At.Format("2006-01-02 15:04"), ap.Decision, ap.Actor, note)
		}
	}
	if s.Cancel != nil {
		fmt.Fprintf(&b, "\nCancel requested by %s at %s: %s\n", s.Cancel.Actor, s.Cancel.At.Format("2006-01-02 15:04"), refill.OneLine(s.Cancel.Reason))
	}
	if g := s.ApplyGate; g != nil {
		b.WriteString("\nWhen the run began, the source gate was checked again and failed, so nothing was written:\n")
		renderGate(&b, *g)
	}
	if h := s.Run; h != nil {
		// A lease lapsed at a time past, and expires at one to come:
		// control says which (RunHolder.Lapsed), by the clock it decided
		// by.
		at := h.Expires.UTC().Format("2006-01-02 15:04:05 UTC")
		switch {
		case h.Orphaned && h.Holder != "" && h.Lapsed:
			fmt.Fprintf(&b, "\nNothing is running this plan: its run's holder (%s) stopped renewing its lease, which lapsed at %s. refill apply %s resumes it.\n", h.Holder, at, s.Plan.ID)
		case h.Orphaned && h.Holder != "":
			fmt.Fprintf(&b, "\nNothing is running this plan: its run's holder (%s) is no longer running on this host, though its lease expires only at %s. refill apply %s resumes it now.\n", h.Holder, at, s.Plan.ID)
		case h.Orphaned:
			fmt.Fprintf(&b, "\nNothing is running this plan: no process holds its run. refill apply %s resumes it.\n", s.Plan.ID)
		default:
			fmt.Fprintf(&b, "\nRunning: held by %s; its lease expires at %s unless renewed, as it is while the holder lives.\n", h.Holder, at)
		}
	}
	for _, wt := range s.Waits {
		fmt.Fprintf(&b, "\n%s %s: waiting for the %s (since %s)\n", wt.Dataset, wt.Partition, wt.For, wt.Since.UTC().Format("15:04:05 UTC"))
	}
	if len(s.Reviews) > 0 {
		fmt.Fprintf(&b, "\nNeeds review: %d partition(s) of jobs with side effects ended with their outcome unknown; refill will not run them again on its own:\n", len(s.Reviews))
		for _, rv := range s.Reviews {
			fmt.Fprintf(&b, "  - %s %s: %s\n", rv.Dataset, rv.Partition, rv.Why)
		}
		fmt.Fprintf(&b, "Say whether each ran: refill resolve %s --partition P --ran|--not-ran --reason ...; then refill apply %s resumes the run.\n", s.Plan.ID, s.Plan.ID)
	}
	if op := s.RollbackPending; op != nil {
		fmt.Fprintf(&b, "\nA rollback was begun by %s at %s and not finished: the warehouse may already be restored while the plan still says %s. refill rollback %s finishes it.\n", op.Actor, op.Started.UTC().Format("2006-01-02 15:04:05 UTC"), s.Plan.Status, s.Plan.ID)
	}
	if !s.FourEyes && (len(s.Approvals) > 0 || len(s.Checklist) > 0) {
		b.WriteString("\nFour-eyes is NOT enforced: refill.yaml names no users:, so anyone may act under any name and these decisions cannot prove a second person.\n")
	}
	if len(s.Stale) > 0 {
		b.WriteString("\nStale: the config changed since this plan was sealed, so it is not the backfill that was planned (and approved):\n")
		for _, d := range s.Stale {
			fmt.Fprintf(&b, "  - %s\n", d)
		}
	}
	if len(s.Unmet) == 0 {
		b.WriteString("\nMay run now: yes\n")
	} else {
		b.WriteString("\nMay run now: no\n")
		for _, u := range s.Unmet {
			fmt.Fprintf(&b, "  - %s\n", u)
		}
	}
	return b.String()
}

func (a *app) auditCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "The audit log"}
	cmd.AddCommand(&cobra.Command{
		Use:   "verify",
		Short: "Walk the audit log's hash chain; exit 5 naming the first broken entry",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := a.open(cmd.Context(), false, true)
			if err != nil {
				return err
			}
			defer e.Close()
			// The anchor lives in the warehouse; control decides what an
			// unreachable one means.
			wh, whErr := warehouse.Open(cmd.Context(), a.secrets(e.cfg).DSN(e.cfg.Warehouse), e.cfg.Dir)
			e.wh = wh
			c, err := a.control(e)
			if err != nil {
				return err
			}
			c.WarehouseErr = whErr
			rep, verr := c.VerifyAudit(cmd.Context())
			if err := a.view().Audit(rep, verr); err != nil {
				return err
			}
			return verr
		},
	})
	return cmd
}

func (a *app) schemaCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "schema", Short: "Source schemas: the baseline drift is judged against"}
	var reason string
	accept := &cobra.Command{
		Use:   "accept DATASET --reason TEXT [--as USER]",
		Short: "Accept a source's current schema as the new drift baseline (audited)",
		Long: `Schema drift is judged against the schema accepted last: by applying a plan
that saw it, or with this command. A plan that merely sees a new schema never
moves the baseline, so drift cannot be cleared by planning again. Accepting
needs an identity and a reason, and the audit log keeps both schemas.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, c, actor, err := a.openControl(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer e.Close()
			snap, err := c.AcceptSchema(cmd.Context(), args[0], actor, reason)
			if err != nil {
				return err
			}
			return a.view().Schema(snap, actor)
		},
	}
	accept.Flags().StringVar(&reason, "reason", "", "why the new schema is right (required; audited)")
	accept.Flags().StringVar(&a.as, "as", "", "who is accepting (default $REFILL_USER)")
	cmd.AddCommand(accept)
	return cmd
}
