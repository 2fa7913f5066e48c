package control

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/gate"
	"github.com/refill-dev/refill/planner"
	"github.com/refill-dev/refill/store"
)

// Executor runs a plan that may run, or resumes one, in two steps: Start
// re-checks the source gate and takes the run (its lease), marking the
// plan running, and the HeldRun it returns rebuilds the partitions in
// lineage order. The run package implements it; control decides whether
// it may be called.
type Executor interface {
	// Start takes plan p's run for this process as actor. It refuses
	// (ErrLocked) when another process holds the run, or took it first:
	// the store's lease decides, in one transaction, which of two
	// starts at once wins. A source gate that fails now blocks the plan
	// (ErrBlocked) and nothing is taken.
	Start(ctx context.Context, p *refill.Plan, actor string) (HeldRun, error)
}

// HeldRun is a plan's run that this process holds: Start took its lease,
// and calling it carries the run to its end — applied, failed or
// cancelled — renewing the lease meanwhile and releasing it then. Nothing
// renews the lease before it is called, so it is called at once: a run
// left uncalled lapses (its lease runs out) and apply resumes it.
type HeldRun func(ctx context.Context) error

// BeforeWrite is what every change starts with, whichever door it came
// through: the audit log is verified from its last checkpoint (nothing is
// recorded on top of a tampered log: the next entry would chain onto a
// lie), then housekeeping runs (plans past policy.plan_ttl expire before
// anything is decided about them).
func (c *Control) BeforeWrite(ctx context.Context) error {
	if _, err := c.Store.VerifyAuditFrom(ctx); err != nil {
		var ke *store.AuditKeyError
		if errors.As(err, &ke) {
			return err
		}
		return refill.NotPermittedf("refusing to change anything: %v; run refill audit verify and restore the state store", err)
	}
	// A state store older than the warehouse's last anchor was put back
	// from a copy: nothing is written over it (which would launder it).
	var an refill.Anchorer // nil while the warehouse is not open
	if c.Warehouse != nil {
		an = c.Warehouse
	}
	if err := c.Store.CheckLatestAnchor(ctx, an); err != nil {
		return refill.NotPermittedf("refusing to change anything: %v", err)
	}
	swept, err := c.Sweep(ctx)
	if err != nil {
		return fmt.Errorf("housekeeping: %w", err)
	}
	if c.OnSwept != nil && (len(swept.Expired) > 0 || len(swept.SnapshotsDropped) > 0) {
		c.OnSwept(swept)
	}
	return nil
}

// Plan makes, gates, tiers and stores the plan for a request, as actor.
// A plan the source gate blocked is stored and returned all the same, for
// people to see what failed, with an error wrapping ErrBlocked: it can
// never be approved or applied, and every door says so alike.
func (c *Control) Plan(ctx context.Context, actor string, r planner.Request) (*refill.Plan, error) {
	if c.Planner == nil {
		return nil, errors.New("control: no planner")
	}
	if err := c.BeforeWrite(ctx); err != nil {
		return nil, err
	}
	r.Actor = actor
	p, err := c.Planner.Plan(ctx, r)
	if err != nil {
		return nil, err
	}
	if p.Status == refill.StatusBlocked {
		return p, fmt.Errorf("plan %s: %w: %d failed check(s); it can never be approved or applied — fix the source, then plan again", p.ID, refill.ErrBlocked, p.Gate.Failed())
	}
	return p, nil
}

// Check runs the source gate alone over targets' partitions in r (refill
// check), from one scan of the range. It only reads: it needs no identity
// and records nothing a plan would. A verdict that fails comes with an
// error wrapping ErrBlocked, so a pipeline can stop on it; the verdict is
// nil when the gate could not give one.
func (c *Control) Check(ctx context.Context, targets []string, r refill.Range) (*refill.GateVerdict, error) {
	if c.Warehouse == nil {
		return nil, errors.New("control: checking the source gate needs the warehouse")
	}
	if len(targets) == 0 {
		return nil, refill.BadInputf("name at least one dataset to check")
	}
	for _, name := range targets {
		d, ok := c.Config.Datasets[name]
		if !ok {
			return nil, refill.NotFoundf("unknown dataset %q (known: %s)", name, strings.Join(c.Config.DatasetNames(), ", "))
		}
		if d.Table == "" {
			return nil, refill.BadInputf("%s has no table to check", name)
		}
	}
	g := &gate.Gate{Config: c.Config, Warehouse: c.Warehouse, Store: c.Store, Now: c.Now}
	res, err := g.Check(ctx, targets, r)
	if err != nil {
		return nil, err
	}
	if !res.Passed {
		return &res.GateVerdict, fmt.Errorf("%w: %d failed check(s)", refill.ErrBlocked, res.GateVerdict.Failed())
	}
	return &res.GateVerdict, nil
}

// Prove proves one dataset's job on one partition and records the
// evidence, as actor (see proof.Prover). A failing proof is recorded too,
// and returned with an error wrapping ErrVerification.
func (c *Control) Prove(ctx context.Context, dataset, partition, actor string) (*refill.Proof, error) {
	if c.Prover == nil {
		return nil, errors.New("control: no prover")
	}
	if err := c.BeforeWrite(ctx); err != nil {
		return nil, err
	}
	return c.Prover.Prove(ctx, dataset, partition, actor)
}

// Apply runs plan id as actor, or resumes it, to its end: Start, then the
// run it holds.
func (c *Control) Apply(ctx context.Context, id, actor string) error {
	run, err := c.Start(ctx, id, actor)
	if err != nil {
		return err
	}
	return run(ctx)
}

// Start takes plan id's run for this process as actor, or resumes it, and
// returns once this process holds it; the HeldRun carries it on. It
// refuses whatever MayApply refuses — anything unmet (ErrNotPermitted),
// the same list `refill show` prints; a run alive elsewhere (ErrLocked) —
// and a run another process took first (ErrLocked), and stops
// (ErrBlocked) for a blocked plan or a gate that fails now. A door that
// runs the plan in the background calls it before it answers, so its
// caller hears every refusal, and "started" means started here.
func (c *Control) Start(ctx context.Context, id, actor string) (HeldRun, error) {
	if c.Executor == nil {
		return nil, errors.New("control: no executor to run plans")
	}
	if err := c.BeforeWrite(ctx); err != nil {
		return nil, err
	}
	s, err := c.Load(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := c.require(ctx, ActApply, Subject{State: s}, actor); err != nil {
		return nil, err
	}
	return c.Executor.Start(ctx, s.Plan, actor)
}

// MayApply is the answer to "may this plan start here now?" as one
// classified error, or nil: ErrBlocked for a plan the source gate blocked;
// ErrLocked when a live process runs it (it clears when that run ends, or
// its holder dies) or when only other plans' holds stand in the way (that
// clears when they are done); ErrNotPermitted for anything else unmet.
// It is refill's own rules, read from the state as loaded (Load adds
// Control.Extra's); Start and every door ask Requirements(ActApply), and
// two starts at once are decided by Start, which takes the run's lease.
func (s *State) MayApply() error {
	if unmet := s.applyUnmet(); len(unmet) > 0 {
		return Refusal(ActApply, Subject{State: s}, unmet)
	}
	return nil
}

// Report compares a plan's run with its expectations and gives the
// verdict: a report with partitions off their expectation by more than the
// tolerance the plan sealed is a failed verification (ErrVerification),
// returned with the report itself.
func (c *Control) Report(ctx context.Context, id string) (Report, error) {
	p, err := c.Store.Plan(ctx, id)
	if err != nil {
		return Report{}, err
	}
	rep, err := BuildReport(ctx, c.Store, p, Tolerance(p, c.Config))
	if err != nil {
		return rep, err
	}
	if rep.Flagged > 0 {
		return rep, fmt.Errorf("%w: plan %s: %s; look at them, and roll back if they are wrong (refill rollback %s)",
			refill.ErrVerification, p.ID, rep.Trouble(), p.ID)
	}
	return rep, nil
}

// AuditCheck is a full verification of the audit log and how it was
// anchored.
type AuditCheck struct {
	store.AuditReport
	// AnchorNote says what the warehouse's anchor showed.
	AnchorNote string `json:"anchor_note"`
	// Rows are the state rows that change decisions and do not add up
	// with the log: a row no entry made, an entry whose row is gone.
	Rows []store.RowProblem `json:"rows,omitempty"`
}

// VerifyAudit walks the whole audit log and checks it against the anchor
// the warehouse holds — its head as written at the last publish, outside
// the state store, so a log rewritten or cut short there no longer matches.
// The warehouse's anchors of other store ids go with it, since the id that
// finds this store's anchors is itself kept in the state store.
//
// A warehouse that cannot be reached — it could not be opened
// (WarehouseErr), or its anchors cannot be read — does not stop the walk:
// the log is verified without the anchor, and AnchorNote says so and why.
func (c *Control) VerifyAudit(ctx context.Context) (AuditCheck, error) {
	var opts store.VerifyOptions
	read := false // the warehouse's anchors were read
	note := "no anchor in the warehouse yet (nothing published)"
	unreachable := "the warehouse is unreachable, so the anchor was not checked: "
	an := c.Warehouse
	switch {
	case c.Warehouse == nil && c.WarehouseErr != nil:
		note = unreachable + c.WarehouseErr.Error()
	case c.Warehouse == nil:
		note = "the warehouse is not open, so the anchor was not checked"
	default:
		id, err := c.Store.ID(ctx)
		if err != nil {
			return AuditCheck{}, err
		}
		anchors, err := an.LatestAnchors(ctx)
		if err != nil {
			note = unreachable + "reading the audit anchors: " + err.Error()
			break
		}
		read = true
		for i, a := range anchors {
			if a.Store == id {
				opts.Anchor = &anchors[i]
				note = fmt.Sprintf("matches the warehouse's anchor at entry %d", a.Seq)
			} else {
				opts.Elsewhere = append(opts.Elsewhere, a)
			}
		}
		if opts.Anchor != nil {
			opts.Elsewhere = nil
		}
	}
	rep, err := c.Store.VerifyAudit(ctx, opts)
	check := AuditCheck{AuditReport: rep, AnchorNote: note}
	if err != nil {
		return check, err
	}
	// A log that records publishes must have its anchors in the warehouse.
	if read {
		if err := c.Store.CheckLatestAnchor(ctx, an); err != nil {
			check.OK = false
			return check, err
		}
	}
	// Every anchor of this store, not the latest alone: a store put back
	// from a copy and grown past its latest anchor since fails the older.
	if opts.Anchor != nil {
		all, err := an.Anchors(ctx, opts.Anchor.Store)
		if err != nil {
			return check, fmt.Errorf("reading the audit anchors: %w", err)
		}
		if err := c.Store.CheckAnchors(ctx, all); err != nil {
			check.OK = false
			return check, err
		}
		if err := c.Store.CheckPublishesAnchored(ctx, all); err != nil {
			check.OK = false
			return check, err
		}
		check.AnchorNote += " and every earlier one"
	}
	// The chain holds, so its word on the state rows can be trusted.
	if check.Rows, err = c.Store.VerifyRows(ctx); err != nil {
		return check, err
	}
	if n := len(check.Rows); n > 0 {
		check.OK = false
		lines := make([]string, n)
		for i, p := range check.Rows {
			lines[i] = "  - " + p.String()
		}
		return check, fmt.Errorf("%w: the audit log's chain holds, but %d state row(s) do not add up with it (each counts for nothing; the log decides):\n%s",
			refill.ErrVerification, n, strings.Join(lines, "\n"))
	}
	return check, nil
}
