// Package control decides whether a plan may run now, and records the
// people in the loop: approvals, rejections and the manual checklist.
//
// One function, Unmet, answers "may this plan run now?" with every
// requirement not yet met; `refill show` prints that list and `refill
// apply` refuses while it is not empty (atlantis's apply requirements,
// docs/design.md §4 and §10).
package control

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/planner"
	"github.com/refill-dev/refill/proof"
	"github.com/refill-dev/refill/store"
)

// Control works on stored plans.
type Control struct {
	Config *refill.Config
	Store  *store.Store
	// Warehouse is needed by the steps that touch data: snapshot, rollback.
	Warehouse refill.Warehouse
	// WarehouseErr, when Warehouse is nil, is why it could not be opened:
	// steps that can do without it (verifying the audit log) say so.
	WarehouseErr error
	// Now is the "as of" clock (REFILL_NOW may move it) that plans and
	// checks run on; what people do is always dated by the real one.
	Now refill.Clock
	// Clock is the real clock (nil: time.Now). It dates what people do and
	// runs housekeeping (policy.plan_ttl, policy.snapshot_ttl) and run
	// leases: REFILL_NOW, which anyone may set, never moves it. Tests
	// replace it to move housekeeping on without sleeping.
	Clock refill.Clock
	// Planner makes plans; Prover proves jobs; Executor runs plans (the
	// run package).
	Planner  *planner.Planner
	Prover   *proof.Prover
	Executor Executor
	// OnSwept, when set, hears what housekeeping did before a change.
	OnSwept func(Swept)
	// Extra, when set, adds requirements of its own to every action (an
	// organisation's rule on top of refill's; a test that every door
	// follows Requirements). It can only add: what refill requires stays.
	Extra func(act Action, sub Subject, user string) []Unmet
}

// stamp dates a decision or a checklist step as it is recorded: always the
// real clock. REFILL_NOW (c.Now) moves the planning clock; it is kept beside
// the real time in the audit entry (as_of), never as when a person acted.
func (c *Control) stamp() time.Time { return c.Clock.Now() }

// State is a plan with everything that decides whether it may run.
type State struct {
	Plan      *refill.Plan           `json:"plan"`
	Approvals []refill.Approval      `json:"approvals"`
	Checklist []refill.ChecklistStep `json:"checklist"`
	Holders   []store.Holder         `json:"holders,omitempty"`
	// Stale lists every difference between what the plan sealed and the
	// config now; a stale plan may not be approved or applied.
	Stale []string `json:"stale,omitempty"`
	// Unmet lists every requirement not yet met to run the plan now; empty
	// means it may run.
	Unmet []string `json:"unmet"`
	// unmet is Unmet with each requirement's class (Requirements).
	unmet []Unmet
	// Offers says which of the plan's decisions some configured user could
	// take now (Requirements asked for Anyone): what a message in a shared
	// channel offers buttons for. Rollback and sign-off, which need a look
	// at the snapshot or the report, are asked of Requirements itself.
	Offers map[Action]bool `json:"offers"`
	// FourEyes is false when the config names no users: then anyone may
	// act under any name, and approvals cannot prove a second person.
	FourEyes bool `json:"four_eyes_enforced"`
	// Contradiction says how the stored status disagreed with the audit
	// log, which then decided it.
	Contradiction string `json:"contradiction,omitempty"`
	// Expired is true when the plan waited past policy.plan_ttl.
	Expired bool `json:"expired,omitempty"`
	// Freeze is the freeze in force (refill freeze), if any: it stops
	// auto plans, which nobody approves.
	Freeze *refill.Freeze `json:"freeze,omitempty"`
	// Cancel is the request to stop the plan's run, if one was made.
	Cancel *refill.CancelRequest `json:"cancel,omitempty"`
	// Run says who holds a running plan's run, and whether anyone does.
	Run *RunHolder `json:"run_holder,omitempty"`
	// RollbackPending is a rollback that was begun and not finished: the
	// warehouse may be restored while the plan still says it is not.
	// Running refill rollback again finishes it.
	RollbackPending *store.PendingOp `json:"rollback_pending,omitempty"`
	// ApplyGate is the source gate's verdict when the plan's run began, if
	// it failed there: the plan passed the gate when it was made and was
	// blocked at apply, so its own Gate still reads passed.
	ApplyGate *refill.GateVerdict `json:"apply_gate,omitempty"`
	// Reviews are the partitions waiting for refill resolve.
	Reviews []store.Review `json:"reviews,omitempty"`
	// Waits are the partitions waiting out an outage of the warehouse.
	Waits []store.OutageWait `json:"waiting,omitempty"`
}

// RunHolder is who runs a running plan: the holder of its run lease.
// Orphaned means nobody does — the process that ran it died, or its lease
// lapsed, or none was ever recorded — so the plan says running while
// nothing runs it, until `refill apply` resumes it. Lapsed and Gone say
// which, so a door never calls an expiry still to come a lapse: a holder
// killed a moment ago is gone while its lease still runs.
type RunHolder struct {
	Holder   string    `json:"holder,omitempty"`
	Expires  time.Time `json:"lease_expires,omitempty"`
	Orphaned bool      `json:"orphaned"`
	// Lapsed is true when the lease's expiry has passed by the real
	// clock: nobody renewed it.
	Lapsed bool `json:"lease_lapsed,omitempty"`
	// Gone is true when the holder was a process on this host that no
	// longer exists, whatever its lease's expiry says.
	Gone bool `json:"holder_gone,omitempty"`
}

// Holder returns who runs plan id now (see RunHolder), by the real clock.
func (c *Control) Holder(ctx context.Context, id string) (RunHolder, error) {
	l, held, err := c.Store.Lease(ctx, id)
	if err != nil {
		return RunHolder{}, err
	}
	h := RunHolder{Holder: l.Holder, Expires: l.Expires}
	if held {
		h.Lapsed = !l.Expires.After(c.Clock.Now())
		h.Gone = !l.HolderAlive()
	}
	// As store.Lease.Alive decides, and TakeLease with it.
	h.Orphaned = !held || h.Lapsed || h.Gone
	return h, nil
}

// StateJSON is the plan of docs/design.md §7 with its state beside it: what
// `refill show -o json` prints and the API answers.
type StateJSON struct {
	*refill.Plan
	Approvals []refill.Approval      `json:"approvals"`
	Checklist []refill.ChecklistStep `json:"checklist"`
	Stale     []string               `json:"stale"`
	Unmet     []string               `json:"unmet"`
	MayRun    bool                   `json:"may_run"`
	FourEyes  bool                   `json:"four_eyes_enforced"`
	Freeze    *refill.Freeze         `json:"freeze,omitempty"`
	Cancel    *refill.CancelRequest  `json:"cancel,omitempty"`
	RunHolder *RunHolder             `json:"run_holder,omitempty"`
	// RollbackPending is State.RollbackPending.
	RollbackPending *store.PendingOp `json:"rollback_pending,omitempty"`
	// ApplyGate is State.ApplyGate.
	ApplyGate *refill.GateVerdict `json:"apply_gate,omitempty"`
	// Reviews and Waits are State's.
	Reviews []store.Review     `json:"reviews,omitempty"`
	Waits   []store.OutageWait `json:"waiting,omitempty"`
	// Offers is State.Offers.
	Offers map[Action]bool `json:"offers"`
}

// JSON is the state as StateJSON.
func (s *State) JSON() StateJSON {
	stale := s.Stale
	if stale == nil {
		stale = []string{}
	}
	return StateJSON{s.Plan, s.Approvals, s.Checklist, stale, s.Unmet, len(s.Unmet) == 0, s.FourEyes, s.Freeze, s.Cancel, s.Run, s.RollbackPending, s.ApplyGate, s.Reviews, s.Waits, s.Offers}
}

// finalFromLog is the status the audit log makes final for a plan — it
// was rejected, superseded or rolled back — or "" when the log leaves it
// open.
func finalFromLog(evs []refill.Event) refill.Status {
	final := refill.Status("")
	for _, e := range evs {
		switch {
		case e.Kind == refill.EventRejection:
			final = refill.StatusRejected
		case e.Kind == refill.EventSuperseded && final == "":
			final = refill.StatusSuperseded
		case e.Kind == refill.EventRollback && e.Partition == "":
			final = refill.StatusRolledBack
		case e.Kind == refill.EventRunCancelled:
			final = refill.StatusCancelled
		case e.Kind == refill.EventRunFinished && final == "":
			// A run that finished is applied, whatever the status column
			// says: it never runs again (a rollback after it still wins).
			final = refill.StatusApplied
		}
	}
	return final
}

// Load reads a plan and its state.
func (c *Control) Load(ctx context.Context, id string) (*State, error) {
	p, err := c.Store.Plan(ctx, id)
	if err != nil {
		return nil, err
	}
	s := &State{Plan: p}
	if s.Approvals, err = c.Store.Approvals(ctx, id); err != nil {
		return nil, err
	}
	if s.Checklist, err = c.Store.Checklist(ctx, id); err != nil {
		return nil, err
	}
	if s.Holders, err = c.Store.Holders(ctx, id); err != nil {
		return nil, err
	}
	// The store returns only the approvals and steps the audit log made
	// (store/ledger.go); the log also decides a status the store
	// contradicts.
	evs, err := c.Store.Audit(ctx, store.AuditFilter{PlanID: id})
	if err != nil {
		return nil, err
	}
	for _, e := range evs {
		switch e.Kind {
		case refill.EventGateResult:
			var g struct {
				Passed   bool             `json:"passed"`
				At       string           `json:"at"`
				Findings []refill.Finding `json:"findings"`
			}
			if json.Unmarshal(e.Detail, &g) == nil && g.At == "apply" && !g.Passed {
				s.ApplyGate = &refill.GateVerdict{Passed: false, Checked: p.Gate.Checked, Findings: g.Findings}
			}
		}
	}
	// A status the log contradicts was set behind refill's back: a
	// rejection, a rollback or a supersession the log records is final.
	if c.overdue(p, evs) {
		// Past plan_ttl: expired, whether or not a sweep has recorded it yet.
		s.Expired = true
		p.Status = refill.StatusExpired
	}
	if final := finalFromLog(evs); final != "" && p.Status != final {
		s.Contradiction = fmt.Sprintf("the state store says %s, but the audit log records the plan %s: the log decides", p.Status, final)
		p.Status = final
	}
	s.FourEyes = len(c.Config.Users) > 0
	if f, frozen, err := c.Store.Freeze(ctx); err != nil {
		return nil, err
	} else if frozen {
		s.Freeze = &f
	}
	if cr, asked, err := c.Store.CancelRequested(ctx, id); err != nil {
		return nil, err
	} else if asked {
		s.Cancel = &cr
	}
	if p.Status.Live() {
		s.Stale = Stale(p, c.Config)
	}
	if op, begun, err := c.Store.Pending(ctx, id, opRollback); err != nil {
		return nil, err
	} else if begun {
		s.RollbackPending = &op
	}
	if p.Status == refill.StatusRunning {
		h, err := c.Holder(ctx, id)
		if err != nil {
			return nil, err
		}
		s.Run = &h
		if !h.Orphaned { // a run nobody holds waits for nothing
			if s.Waits, err = c.Store.OutageWaits(ctx, id); err != nil {
				return nil, err
			}
		}
	}
	if p.Status.Live() {
		if s.Reviews, err = c.Store.Reviews(ctx, id); err != nil {
			return nil, err
		}
	}
	s.unmet = c.unmet(s)
	if c.Extra != nil {
		s.unmet = append(s.unmet, c.Extra(ActApply, Subject{State: s}, Anyone)...)
	}
	s.Unmet = []string{}
	for _, u := range s.unmet {
		s.Unmet = append(s.Unmet, u.Why)
	}
	if err := c.Offer(ctx, s); err != nil {
		return nil, err
	}
	return s, nil
}

// Offer fills s.Offers: which decisions some configured user could take
// on the plan now.
func (c *Control) Offer(ctx context.Context, s *State) error {
	s.Offers = map[Action]bool{}
	for _, act := range offered {
		unmet, err := c.Requirements(ctx, act, Subject{State: s}, Anyone)
		if err != nil {
			return err
		}
		s.Offers[act] = len(unmet) == 0
	}
	return nil
}

// offered are the decisions State.Offers answers.
var offered = []Action{ActApprove, ActReject, ActScope, ActSnapshot, ActApply, ActCancel, ActResolve}

// addStep records a checklist step, first clearing any row for it that
// the audit log does not back: a forged row neither stands in for the step
// (store.Checklist) nor stops it from being done for real.
func addStep(ctx context.Context, tx *store.Tx, st refill.ChecklistStep) error {
	if err := tx.DropUnauditedStep(ctx, st.PlanID, st.Step); err != nil {
		return err
	}
	return tx.AddStep(ctx, st)
}

// Done reports whether a checklist step was recorded.
func (s *State) Done(step refill.ChecklistItem) (refill.ChecklistStep, bool) {
	for _, st := range s.Checklist {
		if st.Step == step {
			return st, true
		}
	}
	return refill.ChecklistStep{}, false
}

// Approval is the approval that counts, if there is one: by someone other
// than the requester, of this exact plan content, by a lead when the plan
// is manual, from someone still in users:.
func (c *Control) Approval(s *State) (refill.Approval, bool) { return c.approval(s) }

// approval returns the approval that counts: by someone other than the
// requester, of this exact plan content, by a lead when the plan is manual.
func (c *Control) approval(s *State) (refill.Approval, bool) {
	for _, a := range s.Approvals {
		if a.Decision != refill.DecisionApprove || a.PlanHash != s.Plan.Hash || a.Actor == s.Plan.Request.RequestedBy {
			continue
		}
		if c.lapsed(s.Plan, a) != "" {
			continue
		}
		return a, true
	}
	return refill.Approval{}, false
}

// lapsed says why an approval of the plan's content no longer counts, or
// "": its author left users: (an approval is a person's, and counts only
// while refill still knows that person), or lost the lead role a manual
// plan needs.
func (c *Control) lapsed(p *refill.Plan, a refill.Approval) string {
	if len(c.Config.Users) > 0 {
		if _, ok := c.Config.Users[a.Actor]; !ok {
			return fmt.Sprintf("the approval by %s no longer counts: %s is no longer in users:", a.Actor, a.Actor)
		}
	}
	if p.Tier == refill.TierManual && !c.isLead(a.Actor) {
		return fmt.Sprintf("the approval by %s no longer counts: %s is not a lead now, and a manual plan needs a lead's", a.Actor, a.Actor)
	}
	return ""
}

// lapses lists the approvals of the plan's content that no longer count.
func (c *Control) lapses(s *State) []string {
	var out []string
	for _, a := range s.Approvals {
		if a.Decision == refill.DecisionApprove && a.PlanHash == s.Plan.Hash && a.Actor != s.Plan.Request.RequestedBy {
			if why := c.lapsed(s.Plan, a); why != "" {
				out = append(out, why)
			}
		}
	}
	return out
}

func (c *Control) isLead(name string) bool {
	u, ok := c.Config.Users[name]
	return ok && u.HasRole(refill.RoleLead)
}

// unmet is the one place that decides whether a plan may run now.
func (c *Control) unmet(s *State) []Unmet {
	p := s.Plan
	var r reqs
	if s.Contradiction != "" {
		r.add(s.Contradiction)
	}
	switch p.Status {
	case refill.StatusBlocked:
		if g := s.ApplyGate; g != nil && p.Gate.Passed {
			r.blocked("the source gate failed when the run began (%d finding(s)), though it passed when the plan was made; nothing was written: a blocked plan can never run; repair the source and plan again", g.Failed())
			return r.list
		}
		r.blocked("the source gate failed (%d finding(s)): a blocked plan can never run; repair the source and plan again", p.Gate.Failed())
		return r.list
	case refill.StatusRejected:
		who := ""
		for _, a := range s.Approvals {
			if a.Decision == refill.DecisionReject {
				who = fmt.Sprintf(" by %s: %s", a.Actor, refill.OneLine(a.Note))
			}
		}
		r.add("the plan was rejected" + who)
		return r.list
	case refill.StatusSuperseded:
		r.add("a newer plan of the same request superseded this one: review and approve that one (refill plans)")
		return r.list
	case refill.StatusApplied:
		r.add("the plan has already been applied")
		return r.list
	case refill.StatusRolledBack:
		r.add("the plan was rolled back; plan again to reprocess")
		return r.list
	case refill.StatusCancelled:
		r.add("the plan was cancelled; plan again to reprocess")
		return r.list
	case refill.StatusExpired:
		r.add(fmt.Sprintf("the plan expired: it waited longer than policy.plan_ttl (%s) without running, and released its partitions; plan again", c.planTTL()))
		return r.list
	}
	// What the plan sealed decides, whatever its status says: a gate that
	// failed blocks it, and a tier refill does not know runs nothing.
	if !p.Gate.Passed && p.Status != refill.StatusBlocked {
		r.blocked("the source gate failed (%d finding(s)) when the plan was made: it can never run, whatever its status says (%s)", p.Gate.Failed(), p.Status)
	}
	if p.Tier.Rank() < 0 {
		r.add(fmt.Sprintf("the plan's tier %q is not auto, semi-auto or manual: it can never run", p.Tier))
	}
	// The plan is a sealed contract: anything that decides what it writes
	// or how it was tiered, changed since, makes it a different backfill,
	// which needs a plan (and approval) of its own.
	if len(s.Stale) > 0 {
		r.add(fmt.Sprintf("the plan is stale: the config changed in %d way(s) since it was sealed (listed above); plan again to run with the current config", len(s.Stale)))
	}
	for _, rv := range s.Reviews {
		r.add(fmt.Sprintf("%s %s needs review: %s; say whether it ran: refill resolve %s --partition %s --ran|--not-ran --reason ...", rv.Dataset, rv.Partition, rv.Why, p.ID, rv.Partition))
	}
	if s.Cancel != nil && p.Status.Live() {
		r.add(fmt.Sprintf("%s asked to cancel the plan: %s", s.Cancel.Actor, refill.OneLine(s.Cancel.Reason)))
	}
	if s.Freeze != nil && p.Tier == refill.TierAuto {
		r.add(fmt.Sprintf("refill is frozen by %s since %s (%s): auto plans wait until a lead runs refill unfreeze", s.Freeze.By, s.Freeze.At.Format(time.RFC3339), refill.OneLine(s.Freeze.Reason)))
	}
	if _, ok := c.approval(s); !ok {
		for _, l := range c.lapses(s) {
			r.add(l)
		}
	}
	switch p.Tier {
	case refill.TierSemiAuto:
		if _, ok := c.approval(s); !ok {
			r.add(fmt.Sprintf("needs one approval by someone other than %s (refill approve %s --as USER)", p.Request.RequestedBy, p.ID))
		}
	case refill.TierManual:
		if len(c.Config.Users) == 0 {
			r.add("manual plans need a lead's approval: add users: to refill.yaml with at least one user with roles: [lead]")
		}
		if _, ok := s.Done(refill.ChecklistSnapshot); !ok {
			r.add(fmt.Sprintf("checklist 1/5: snapshot the partitions it will overwrite (refill snapshot %s)", p.ID))
		}
		if _, ok := s.Done(refill.ChecklistScope); !ok {
			r.add(fmt.Sprintf("checklist 2/5: state the scope (refill scope %s --note ...)", p.ID))
		}
		if _, ok := c.approval(s); !ok {
			r.add(fmt.Sprintf("checklist 3/5: approval by a lead other than %s (refill approve %s --as LEAD)", p.Request.RequestedBy, p.ID))
		}
	}
	for _, h := range s.Holders {
		r.locked("plan %s (%s) holds %d partition(s) of %s: it must finish, be rejected or be superseded first", h.PlanID, h.Status, h.Partitions, h.Dataset)
	}
	return r.list
}

func short(h string) string {
	if len(h) > 19 {
		return h[:19]
	}
	return h
}

// notDecidable explains why a plan in its status can take no decision.
func notDecidable(p *refill.Plan) error {
	switch p.Status {
	case refill.StatusBlocked:
		return refill.NotPermittedf("plan %s is blocked by the source gate and can never be approved; repair the source and plan again", p.ID)
	case refill.StatusRejected:
		return refill.NotPermittedf("plan %s was rejected; plan again if it should run", p.ID)
	case refill.StatusSuperseded:
		return refill.NotPermittedf("plan %s was superseded by a newer plan of the same request (its inputs changed): approve the newest one (refill plans)", p.ID)
	case refill.StatusApproved:
		return refill.NotPermittedf("plan %s is already approved", p.ID)
	case refill.StatusReady:
		return refill.NotPermittedf("plan %s is auto: it needs no approval (refill apply %s)", p.ID, p.ID)
	case refill.StatusPending:
		return nil
	}
	return refill.NotPermittedf("plan %s is %s: it can no longer be approved", p.ID, p.Status)
}

// Approve records actor's approval of plan id, bound to its hash.
func (c *Control) Approve(ctx context.Context, id, actor, note string) (*State, error) {
	if err := refill.CheckText("--note", note); err != nil {
		return nil, err
	}
	if err := c.BeforeWrite(ctx); err != nil {
		return nil, err
	}
	s, err := c.Load(ctx, id)
	if err != nil {
		return nil, err
	}
	p := s.Plan
	if err := c.require(ctx, ActApprove, Subject{State: s}, actor); err != nil {
		return nil, err
	}
	a := refill.Approval{PlanID: id, PlanHash: p.Hash, Actor: actor, Decision: refill.DecisionApprove, Note: note, At: c.stamp()}
	err = c.Store.Update(ctx, func(tx *store.Tx) error {
		held, err := tx.Holders(ctx, id)
		if err != nil {
			return err
		}
		if len(held) > 0 {
			return refill.Lockedf("plan %s is locked: plan %s (%s) holds partitions of %s", id, held[0].PlanID, held[0].Status, held[0].Dataset)
		}
		if err := tx.SetStatus(ctx, id, refill.StatusPending, refill.StatusApproved); err != nil {
			return err
		}
		if err := tx.AddApproval(ctx, a); err != nil {
			return err
		}
		return tx.Append(ctx, &refill.Event{Kind: refill.EventApproval, Actor: actor, PlanID: id, At: c.Now.Now(),
			Detail: refill.Detail(map[string]any{"hash": p.Hash, "tier": p.Tier, "note": note, "four_eyes_enforced": s.FourEyes})})
	})
	if err != nil {
		return nil, err
	}
	return c.Load(ctx, id)
}

// Reject records actor's rejection of a plan that has not run.
func (c *Control) Reject(ctx context.Context, id, actor, note string) (*State, error) {
	if err := refill.CheckText("--note", note); err != nil {
		return nil, err
	}
	if err := c.BeforeWrite(ctx); err != nil {
		return nil, err
	}
	if strings.TrimSpace(note) == "" {
		return nil, refill.BadInputf("--note is required: say why the plan is rejected")
	}
	s, err := c.Load(ctx, id)
	if err != nil {
		return nil, err
	}
	p := s.Plan
	if err := c.require(ctx, ActReject, Subject{State: s}, actor); err != nil {
		return nil, err
	}
	a := refill.Approval{PlanID: id, PlanHash: p.Hash, Actor: actor, Decision: refill.DecisionReject, Note: note, At: c.stamp()}
	err = c.Store.Update(ctx, func(tx *store.Tx) error {
		if err := tx.SetStatus(ctx, id, p.Status, refill.StatusRejected); err != nil {
			return err
		}
		if err := tx.AddApproval(ctx, a); err != nil {
			return err
		}
		return tx.Append(ctx, &refill.Event{Kind: refill.EventRejection, Actor: actor, PlanID: id, At: c.Now.Now(),
			Detail: refill.Detail(map[string]any{"hash": p.Hash, "note": note, "four_eyes_enforced": s.FourEyes})})
	})
	if err != nil {
		return nil, err
	}
	return c.Load(ctx, id)
}

// Impact is the plan's own summary of what it will change: the text a
// scope statement starts from.
func Impact(p *refill.Plan) string {
	var parts, curUnknown, expUnknown int
	var cur, exp int64
	var names []string
	for _, s := range p.Steps {
		names = append(names, s.Dataset)
		parts += len(s.Partitions)
		c, e, cu, eu := s.RowTotals()
		cur, exp, curUnknown, expUnknown = cur+c, exp+e, curUnknown+cu, expUnknown+eu
	}
	return fmt.Sprintf("Rebuild %s for %s..%s (%d days): %d partitions, %s rows now, %s expected after. Reason: %s.",
		strings.Join(names, ", "), p.Request.From, p.Request.To, p.Request.Days, parts, Total(cur, curUnknown), Total(exp, expUnknown), refill.OneLine(p.Request.Reason))
}

// Total sums known row counts for a person to read; unknown ones stay
// unknown rather than count as zero: "≥ 740 (+ 3 partitions unknown)".
func Total(sum int64, unknown int) string {
	if unknown == 0 {
		return humanize.Comma(sum)
	}
	noun := "partitions"
	if unknown == 1 {
		noun = "partition"
	}
	return fmt.Sprintf("≥ %s (+ %d %s unknown)", humanize.Comma(sum), unknown, noun)
}

// Scope records the scope statement of a manual plan: its impact summary
// and the note of the person stating it.
func (c *Control) Scope(ctx context.Context, id, actor, note string) (*State, error) {
	if err := refill.CheckText("--note", note); err != nil {
		return nil, err
	}
	if err := c.BeforeWrite(ctx); err != nil {
		return nil, err
	}
	if strings.TrimSpace(note) == "" {
		return nil, refill.BadInputf("--note is required: state the scope in your words; refill adds the plan's impact summary")
	}
	s, err := c.Load(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := c.require(ctx, ActScope, Subject{State: s}, actor); err != nil {
		return nil, err
	}
	step := refill.ChecklistStep{PlanID: id, Step: refill.ChecklistScope, Actor: actor, Note: note, At: c.stamp(),
		Detail: refill.Detail(map[string]any{"impact": Impact(s.Plan)})}
	err = c.Store.Update(ctx, func(tx *store.Tx) error {
		if err := addStep(ctx, tx, step); err != nil {
			return err
		}
		return tx.Append(ctx, &refill.Event{Kind: refill.EventScope, Actor: actor, PlanID: id, At: c.Now.Now(),
			Detail: refill.Detail(map[string]any{"note": note, "impact": Impact(s.Plan), "four_eyes_enforced": s.FourEyes})})
	})
	if err != nil {
		return nil, err
	}
	return c.Load(ctx, id)
}
