package control

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
)

// Action is a decision a person can take through any door.
type Action string

// The actions. Each Control method that takes one asks Requirements first,
// and every door (the CLI's show, the web page's buttons, Slack's buttons,
// the API's answers) shows what Requirements says: nothing else decides.
const (
	ActApprove      Action = "approve"
	ActReject       Action = "reject"
	ActSnapshot     Action = "snapshot"
	ActScope        Action = "scope"
	ActSignoff      Action = "signoff"
	ActApply        Action = "apply"
	ActRollback     Action = "rollback"
	ActCancel       Action = "cancel"
	ActResolve      Action = "resolve"
	ActAccept       Action = "accept"
	ActRevoke       Action = "revoke"
	ActSchemaAccept Action = "schema_accept"
	ActSnapshotDrop Action = "snapshot_drop"
	ActFreeze       Action = "freeze"
	ActUnfreeze     Action = "unfreeze"
	ActTokenRevoke  Action = "token_revoke"
)

// Actions lists every action, for the doors that show them all.
var Actions = []Action{ActApprove, ActReject, ActSnapshot, ActScope, ActSignoff, ActApply, ActRollback, ActCancel, ActResolve,
	ActAccept, ActRevoke, ActSchemaAccept, ActSnapshotDrop, ActFreeze, ActUnfreeze, ActTokenRevoke}

// Unmet is one requirement of an action not met: why, in words a person
// acts on, and the class of the refusal (refill.ErrNotPermitted,
// refill.ErrLocked, refill.ErrBlocked).
type Unmet struct {
	Why   string
	Class error
}

// Subject is what an action is taken on: a plan's state for the plan's
// actions; a dataset (and its acceptances in force, for revoke) for
// accept, revoke and schema accept; the freeze in force for freeze and
// unfreeze; a token for token revoke. Force asks for a forced rollback.
type Subject struct {
	State       *State
	Dataset     *refill.Dataset
	Acceptances []refill.Acceptance
	Freeze      *refill.Freeze
	Token       *refill.Token
	Force       bool
}

// Anyone asks Requirements whether some configured user could take an
// action (what a message in a shared channel shows its buttons by).
const Anyone = ""

// Requirements lists what stands between user and act on sub: nothing
// when user may take it now. With user Anyone it answers whether some
// configured user could. The error is the state store's, when a
// requirement needs a look there (a rollback's snapshot, a sign-off's
// report).
func (c *Control) Requirements(ctx context.Context, act Action, sub Subject, user string) ([]Unmet, error) {
	var r reqs
	switch act {
	case ActApprove, ActReject, ActSnapshot, ActScope, ActSignoff, ActApply, ActRollback, ActCancel, ActResolve, ActSnapshotDrop:
		if sub.State == nil {
			return nil, fmt.Errorf("control: %s needs a plan", act)
		}
	}
	s := sub.State
	switch act {
	case ActApprove:
		c.approveReqs(&r, s, user)
	case ActReject:
		c.rejectReqs(&r, s, user)
	case ActSnapshot:
		p := s.Plan
		switch p.Status {
		case refill.StatusPending, refill.StatusReady, refill.StatusApproved:
		default:
			r.no("plan %s is %s: a snapshot is taken before the run", p.ID, p.Status)
		}
		if _, ok := s.Done(refill.ChecklistSnapshot); ok {
			r.no("plan %s already has a snapshot", p.ID)
		}
		c.runnableReqs(&r, s, "snapshot")
	case ActScope:
		p := s.Plan
		c.checklistReqs(&r, s)
		if _, ok := s.Done(refill.ChecklistSnapshot); !ok {
			r.no("plan %s: the checklist runs in order; snapshot first (refill snapshot %s)", p.ID, p.ID)
		}
		if _, ok := s.Done(refill.ChecklistScope); ok {
			r.no("plan %s: its scope is stated already", p.ID)
		}
		c.runnableReqs(&r, s, "scope")
	case ActSignoff:
		if err := c.signoffReqs(ctx, &r, s, user); err != nil {
			return nil, err
		}
	case ActApply:
		r.list = s.applyUnmet()
	case ActRollback:
		if err := c.rollbackReqs(ctx, &r, s, user, sub.Force); err != nil {
			return nil, err
		}
	case ActCancel:
		p := s.Plan
		if !c.mayCancel(s, user) {
			r.no("only the requester (%s), an approver or a lead may cancel plan %s", p.Request.RequestedBy, p.ID)
		}
		switch p.Status {
		case refill.StatusRunning:
			if s.Cancel != nil && s.Run != nil && !s.Run.Orphaned {
				r.no("%s asked the run to stop already, at %s: partitions in flight are finishing", s.Cancel.Actor, s.Cancel.At.UTC().Format(time.RFC3339))
			}
		case refill.StatusPending, refill.StatusReady, refill.StatusApproved, refill.StatusFailed, refill.StatusNeedsReview:
		default:
			r.no("plan %s is %s: there is nothing to cancel", p.ID, p.Status)
		}
	case ActResolve:
		p := s.Plan
		switch {
		case p.Status == refill.StatusRunning:
			r.locked("plan %s is still running its other partitions: once they are done it waits (needs_review), and then you say whether each ran", p.ID)
		case len(s.Reviews) == 0:
			r.no("plan %s has no partition waiting for review (it is %s)", p.ID, p.Status)
		}
		if !c.mayCancel(s, user) {
			r.no("only the requester (%s), an approver or a lead may say whether plan %s's partitions ran", p.Request.RequestedBy, p.ID)
		}
	case ActSnapshotDrop:
		if err := c.dropReqs(ctx, &r, s); err != nil {
			return nil, err
		}
	case ActAccept, ActRevoke, ActSchemaAccept:
		c.personReqs(&r, user, map[Action]string{ActAccept: "accepting a finding", ActRevoke: "withdrawing an acceptance", ActSchemaAccept: "accepting a schema"}[act])
		d := sub.Dataset
		if d == nil {
			return nil, fmt.Errorf("control: %s needs a dataset", act)
		}
		switch {
		case act == ActAccept && c.Config.AcceptNeedsLead(d):
			if !c.someone(user, func(name string) bool { return c.isLead(name) }) {
				r.no("%s is tagged %s: only a lead may accept its findings (policy.accept_lead_tags)", d.Name, strings.Join(d.Tags, ", "))
			}
		case act == ActRevoke && len(sub.Acceptances) > 0:
			live := sub.Acceptances
			if !c.someone(user, func(name string) bool {
				return c.isLead(name) || slices.ContainsFunc(live, func(a refill.Acceptance) bool { return a.By == name })
			}) {
				a := live[len(live)-1]
				r.no("only whoever accepted it (%s) or a lead may withdraw the acceptance of %s on %s %s", a.By, label(a.Check, a.Column), a.Dataset, a.Partition)
			}
		}
	case ActFreeze, ActUnfreeze:
		what := map[Action]string{ActFreeze: "freeze refill", ActUnfreeze: "unfreeze refill"}[act]
		if len(c.Config.Users) > 0 && !c.someone(user, c.isLead) {
			r.no("only a lead may %s, and %s is not a lead", what, user)
		}
		switch f := sub.Freeze; {
		case act == ActFreeze && f != nil:
			r.no("refill is frozen already, by %s since %s: %s", f.By, f.At.Format(time.RFC3339), refill.OneLine(f.Reason))
		case act == ActUnfreeze && f == nil:
			r.no("refill is not frozen")
		}
	case ActTokenRevoke:
		tok := sub.Token
		if tok == nil {
			return nil, fmt.Errorf("control: %s needs a token", act)
		}
		if len(c.Config.Users) > 0 && !c.someone(user, func(name string) bool { return name == tok.User || c.isLead(name) }) {
			r.no("token %s belongs to %s: only they or a lead may revoke it", tok.ID, tok.User)
		}
	default:
		return nil, fmt.Errorf("control: unknown action %q", act)
	}
	if c.Extra != nil {
		r.list = append(r.list, c.Extra(act, sub, user)...)
	}
	return r.list, nil
}

// require is Requirements as an error: nil when nothing stands in the
// way, else the first requirement unmet, of its class (for apply, every
// one: the list refill show prints).
func (c *Control) require(ctx context.Context, act Action, sub Subject, user string) error {
	unmet, err := c.Requirements(ctx, act, sub, user)
	if err != nil || len(unmet) == 0 {
		return err
	}
	return Refusal(act, sub, unmet)
}

// Refusal is the error of an action refused for unmet: the first
// requirement, of its class; for apply, every requirement, classed by the
// gravest (blocked, then not permitted, then locked: a lock clears on its
// own).
func Refusal(act Action, sub Subject, unmet []Unmet) error {
	if act != ActApply || (len(unmet) == 1 && strings.HasPrefix(unmet[0].Why, "plan "+sub.State.Plan.ID+" ")) {
		return classed(unmet[0].Class, unmet[0].Why)
	}
	class := refill.ErrLocked
	var whys []string
	for _, u := range unmet {
		whys = append(whys, u.Why)
		switch {
		case errors.Is(u.Class, refill.ErrBlocked):
			class = refill.ErrBlocked
		case errors.Is(u.Class, refill.ErrNotPermitted) && !errors.Is(class, refill.ErrBlocked):
			class = refill.ErrNotPermitted
		}
	}
	return classed(class, fmt.Sprintf("plan %s may not run yet:\n  - %s", sub.State.Plan.ID, strings.Join(whys, "\n  - ")))
}

// classed is why as an error of class.
func classed(class error, why string) error {
	switch {
	case errors.Is(class, refill.ErrLocked):
		return refill.Lockedf("%s", why)
	case errors.Is(class, refill.ErrBlocked):
		return fmt.Errorf("%s: %w", why, refill.ErrBlocked)
	}
	return refill.NotPermittedf("%s", why)
}

// May reports whether user may take act on sub now; a requirement that
// could not be looked up counts as unmet.
func (c *Control) May(ctx context.Context, act Action, sub Subject, user string) bool {
	unmet, err := c.Requirements(ctx, act, sub, user)
	return err == nil && len(unmet) == 0
}

// reqs collects requirements not met.
type reqs struct{ list []Unmet }

func (r *reqs) no(format string, args ...any) {
	r.list = append(r.list, Unmet{Why: fmt.Sprintf(format, args...), Class: refill.ErrNotPermitted})
}

// add is one requirement, in words already made.
func (r *reqs) add(why string) {
	r.list = append(r.list, Unmet{Why: why, Class: refill.ErrNotPermitted})
}

func (r *reqs) blocked(format string, args ...any) {
	r.list = append(r.list, Unmet{Why: fmt.Sprintf(format, args...), Class: refill.ErrBlocked})
}

func (r *reqs) locked(format string, args ...any) {
	r.list = append(r.list, Unmet{Why: fmt.Sprintf(format, args...), Class: refill.ErrLocked})
}

// someone reports whether user passes ok, or, for Anyone, whether some
// configured user does (without users:, anyone may).
func (c *Control) someone(user string, ok func(string) bool) bool {
	if user != Anyone {
		return ok(user)
	}
	if len(c.Config.Users) == 0 {
		return true
	}
	for name := range c.Config.Users {
		if ok(name) {
			return true
		}
	}
	return false
}

// personReqs: an action only a person known to refill takes.
func (c *Control) personReqs(r *reqs, user, doing string) {
	if user == Anyone {
		return
	}
	if refill.Reserved(user) {
		r.no("%s needs a person's identity: pass --as USER or set REFILL_USER", doing)
		return
	}
	if len(c.Config.Users) > 0 {
		if _, ok := c.Config.Users[user]; !ok {
			r.no("%s is not in users: of %s", user, c.Config.Name())
		}
	}
}

// mayCancel: the requester, anyone who approved the plan, or a lead;
// without users:, anyone.
func (c *Control) mayCancel(s *State, user string) bool {
	return c.someone(user, func(name string) bool {
		if len(c.Config.Users) == 0 || name == s.Plan.Request.RequestedBy || c.isLead(name) {
			return true
		}
		return slices.ContainsFunc(s.Approvals, func(a refill.Approval) bool { return a.Decision == refill.DecisionApprove && a.Actor == name })
	})
}

// approveReqs: a pending plan, current, approved by someone other than its
// requester; a manual one by a lead, after its snapshot and scope; no
// older plan holding its partitions.
func (c *Control) approveReqs(r *reqs, s *State, user string) {
	p := s.Plan
	if err := notDecidable(p); err != nil {
		r.no("%s", strings.TrimPrefix(err.Error(), refill.ErrNotPermitted.Error()+": "))
		return
	}
	if user != Anyone && user == p.Request.RequestedBy {
		r.no("%s requested plan %s and cannot approve it: nobody approves their own request", user, p.ID)
	}
	if len(s.Stale) > 0 {
		r.no("plan %s is stale and cannot be approved: the config changed since it was sealed:\n  - %s\nplan again", p.ID, strings.Join(s.Stale, "\n  - "))
	}
	if p.Tier == refill.TierManual {
		switch {
		case len(c.Config.Users) == 0:
			r.no("plan %s is manual and needs a lead's approval: add users: to refill.yaml with a lead (roles: [lead]), then approve with --as that lead", p.ID)
		case !c.someone(user, func(name string) bool { return c.isLead(name) && name != p.Request.RequestedBy }):
			if user == Anyone {
				r.no("plan %s is manual: only a lead other than %s may approve it, and users: names none", p.ID, p.Request.RequestedBy)
			} else if user != p.Request.RequestedBy {
				r.no("plan %s is manual: only a lead may approve it, and %s is not a lead", p.ID, user)
			}
		}
		for _, step := range []refill.ChecklistItem{refill.ChecklistSnapshot, refill.ChecklistScope} {
			if _, ok := s.Done(step); !ok {
				r.no("plan %s: the checklist runs in order and its %s step is not done yet (refill %s %s)", p.ID, step, step, p.ID)
				break
			}
		}
	} else if user == Anyone && !c.someone(user, func(name string) bool { return name != p.Request.RequestedBy }) {
		r.no("plan %s needs one approval by someone other than %s, and users: names nobody else", p.ID, p.Request.RequestedBy)
	}
	if len(s.Holders) > 0 {
		h := s.Holders[0]
		r.locked("plan %s is locked: plan %s (%s) holds %d partition(s) of %s; it must finish, be rejected or be superseded first", p.ID, h.PlanID, h.Status, h.Partitions, h.Dataset)
	}
}

// rejectReqs: any configured user other than the requester may reject a
// plan that has not started (a lead, when the plan is manual); the
// requester cancels instead.
func (c *Control) rejectReqs(r *reqs, s *State, user string) {
	p := s.Plan
	switch p.Status {
	case refill.StatusPending, refill.StatusReady, refill.StatusApproved:
	case refill.StatusFailed, refill.StatusNeedsReview, refill.StatusRunning:
		r.no("plan %s is %s: its run has begun, so it can no longer be rejected; cancel it instead (refill cancel %s --reason ...), and roll back what it wrote", p.ID, p.Status, p.ID)
		return
	default:
		r.no("plan %s is %s and can no longer be rejected", p.ID, p.Status)
		return
	}
	switch {
	case user != Anyone && user == p.Request.RequestedBy:
		r.no("%s requested plan %s: a requester withdraws a plan with refill cancel %s --reason ..., and a reviewer rejects it", user, p.ID, p.ID)
	case p.Tier == refill.TierManual && len(c.Config.Users) > 0 && !c.someone(user, func(name string) bool { return c.isLead(name) && name != p.Request.RequestedBy }):
		// A manual plan is a lead's to decide, either way.
		if user == Anyone {
			r.no("plan %s is manual: only a lead other than %s may reject it, and users: names none", p.ID, p.Request.RequestedBy)
		} else {
			r.no("plan %s is manual: only a lead may reject it, and %s is not a lead", p.ID, user)
		}
	case !c.someone(user, func(name string) bool { return name != p.Request.RequestedBy }):
		r.no("plan %s can be rejected only by someone other than %s, and users: names nobody else", p.ID, p.Request.RequestedBy)
	}
}

// checklistReqs: the checklist steps before approval are a pending manual
// plan's.
func (c *Control) checklistReqs(r *reqs, s *State) {
	p := s.Plan
	if p.Tier != refill.TierManual {
		r.no("plan %s is %s: the checklist is for manual plans", p.ID, p.Tier)
	} else if p.Status != refill.StatusPending {
		r.no("plan %s is %s: the checklist steps before approval are closed", p.ID, p.Status)
	}
}

// runnableReqs: a step that prepares a run is of a current plan no older
// plan stands in front of.
func (c *Control) runnableReqs(r *reqs, s *State, what string) {
	if len(s.Stale) > 0 {
		r.no("plan %s is stale, so its %s would be of a different backfill: the config changed since it was sealed:\n  - %s\nplan again", s.Plan.ID, what, strings.Join(s.Stale, "\n  - "))
	}
	if len(s.Holders) > 0 {
		h := s.Holders[0]
		r.no("plan %s: no %s while older plan %s (%s) can still run over %d partition(s) of %s; it must finish, be rejected or be superseded first", s.Plan.ID, what, h.PlanID, h.Status, h.Partitions, h.Dataset)
	}
}

// signoffReqs: a manual plan's applied run, its report within tolerance,
// signed off by someone other than its requester.
func (c *Control) signoffReqs(ctx context.Context, r *reqs, s *State, user string) error {
	p := s.Plan
	if p.Tier != refill.TierManual {
		r.no("plan %s is %s: sign-off is the manual checklist's last step", p.ID, p.Tier)
		return nil
	}
	if p.Status != refill.StatusApplied {
		r.no("plan %s is %s: sign off after the run finished and its report was reviewed (refill report %s)", p.ID, p.Status, p.ID)
		return nil
	}
	if _, ok := s.Done(refill.ChecklistSignoff); ok {
		r.no("plan %s is signed off already", p.ID)
		return nil
	}
	if user != Anyone && user == p.Request.RequestedBy {
		r.no("%s requested plan %s: sign-off is a second person's review of its report", user, p.ID)
	} else if !c.someone(user, func(name string) bool { return name != p.Request.RequestedBy }) {
		r.no("plan %s: sign-off is a second person's, and users: names nobody but %s", p.ID, p.Request.RequestedBy)
	}
	rep, err := BuildReport(ctx, c.Store, p, Tolerance(p, c.Config))
	if err != nil {
		return err
	}
	if rep.Flagged > 0 {
		r.no("plan %s: in its report, %s: investigate, or roll back (refill rollback %s)", p.ID, rep.Trouble(), p.ID)
	}
	return nil
}

// applyUnmet: everything unmet (the list refill show prints), and no
// live run elsewhere.
func (s *State) applyUnmet() []Unmet {
	var r reqs
	p := s.Plan
	if p.Status == refill.StatusBlocked {
		r.blocked("plan %s is blocked by the source gate: it can never run; repair the source and plan again", p.ID)
		return r.list
	}
	if h := s.Run; h != nil && !h.Orphaned {
		r.locked("plan %s is running now in another process: %s holds its run, its lease expiring at %s unless renewed; its progress shows in refill show %s",
			p.ID, h.Holder, h.Expires.UTC().Format(time.RFC3339), p.ID)
		return r.list
	}
	return s.unmet
}

// rollbackReqs: a finished, failed or cancelled run with its snapshot
// kept, no later plan's run over it; forced, by a lead.
func (c *Control) rollbackReqs(ctx context.Context, r *reqs, s *State, user string, force bool) error {
	p := s.Plan
	if force && !c.someone(user, c.isLead) {
		r.no("only a lead may force a rollback, and %s is not one (users: in refill.yaml)", user)
	}
	parts, err := c.Store.Snapshot(ctx, p.ID)
	if err != nil {
		return err
	}
	if len(parts) == 0 {
		r.no("plan %s has no snapshot, so there is nothing to restore: take one with refill snapshot before a run", p.ID)
		return nil
	}
	if kept, err := c.Store.SnapshotKept(ctx, p.ID); err != nil {
		return err
	} else if !kept {
		r.no("plan %s's snapshot tables were dropped (refill history and the audit log say when and why), so there is nothing to restore", p.ID)
		return nil
	}
	switch p.Status {
	case refill.StatusApplied, refill.StatusFailed, refill.StatusCancelled:
	default:
		r.no("plan %s is %s: rollback restores partitions after a finished, failed or cancelled run", p.ID, p.Status)
		return nil
	}
	// Not even a forced rollback undoes a later plan's run: that plan would
	// still say applied, and its report would still read clean.
	later, err := c.Store.PublishedSince(ctx, p.ID)
	if err != nil {
		return err
	}
	if len(later) > 0 {
		r.no("plan %s published %s after this plan did: roll that plan back first, or this rollback would undo it", later[0].PlanID, later[0].Dataset+" "+later[0].Partition)
	}
	return nil
}

// dropReqs: a plan's snapshot may go once the plan is done with it.
func (c *Control) dropReqs(ctx context.Context, r *reqs, s *State) error {
	p := s.Plan
	kept, err := c.Store.KeptSnapshots(ctx)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(kept, func(k store.KeptSnapshot) bool { return k.PlanID == p.ID }) {
		r.no("plan %s has no snapshot tables to drop", p.ID)
		return nil
	}
	switch p.Status {
	case refill.StatusRejected, refill.StatusExpired, refill.StatusRolledBack, refill.StatusSuperseded, refill.StatusBlocked:
	case refill.StatusCancelled:
		// A cancelled run that published partitions may still be rolled
		// back: the snapshot is what that would restore.
		if pub, err := c.Store.Published(ctx, p.ID); err != nil {
			return err
		} else if len(pub) > 0 {
			r.no("plan %s was cancelled after publishing %d partition(s), which may still be rolled back from its snapshot: roll back first (refill rollback %s), or let policy.snapshot_ttl drop it", p.ID, len(pub), p.ID)
		}
	case refill.StatusApplied:
		// Until its report is signed off, an applied manual run may still
		// be rolled back: the snapshot is what that would restore. Other
		// tiers have no sign-off: whoever drops theirs says why.
		if _, signed := s.Done(refill.ChecklistSignoff); !signed && p.Tier == refill.TierManual {
			r.no("plan %s is applied but not signed off: its run may still be rolled back, and the snapshot is what that restores; sign off first (refill signoff %s)", p.ID, p.ID)
		}
	default:
		r.no("plan %s is %s: its snapshot is what a rollback would restore; drop it once the plan is done", p.ID, p.Status)
	}
	return nil
}

// waitingActions are the steps a person takes that a plan waits for.
// Snapshot and scope wait only on a manual plan (elsewhere they are
// optional), and for its requester, who states the scope of their own
// request.
var waitingActions = []Action{ActApprove, ActSnapshot, ActScope, ActSignoff, ActResolve}

func waitsOn(act Action, p *refill.Plan, user string) bool {
	switch act {
	case ActSnapshot, ActScope:
		return p.Tier == refill.TierManual && user == p.Request.RequestedBy
	}
	return true
}

// waitingStatuses are the statuses in which a plan waits for a person's
// step: approval (and a manual plan's checklist), a manual plan's
// sign-off, a review of side effects.
var waitingStatuses = []refill.Status{refill.StatusPending, refill.StatusApplied, refill.StatusNeedsReview}

// WaitingFor lists the plans, newest first, on which user could take a
// step now that the plan waits for — approve it, snapshot or scope their
// own manual plan, sign it off, say whether a partition ran — by
// Requirements, as the buttons are decided. Only the newest limit plans of each status are
// looked at (0: 200).
func (c *Control) WaitingFor(ctx context.Context, user string, limit int) ([]refill.PlanSummary, error) {
	if limit <= 0 {
		limit = 200
	}
	var out []refill.PlanSummary
	for _, status := range waitingStatuses {
		list, err := c.Plans(ctx, refill.PlanFilter{Status: status, Limit: limit})
		if err != nil {
			return nil, err
		}
		for _, ps := range list {
			if ps.Status == refill.StatusApplied && ps.Tier != refill.TierManual {
				continue // only a manual plan is signed off
			}
			s, err := c.Load(ctx, ps.ID)
			if err != nil {
				// A plan that cannot be read (altered in the store) waits
				// for nobody's step; its own page says why.
				continue
			}
			for _, act := range waitingActions {
				if !waitsOn(act, s.Plan, user) {
					continue
				}
				unmet, err := c.Requirements(ctx, act, Subject{State: s}, user)
				if err != nil {
					return nil, err
				}
				if len(unmet) == 0 {
					out = append(out, ps)
					break
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b refill.PlanSummary) int { return strings.Compare(b.CreatedAt, a.CreatedAt) })
	return out, nil
}
