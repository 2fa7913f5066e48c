package server

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/planner"
)

// decide runs one of the plan page's buttons through control as the
// signed-in user. Done, it redirects to the plan page (303) with a flash
// message. Refused, it shows the plan page at once with the refusal and
// its status (403 for a decision the user may not take, 409 for a lock):
// the refusal is control's, whatever the page offered.
func (ui *webUI) decide(w http.ResponseWriter, r *http.Request, v *view) {
	id, act := r.PathValue("id"), r.PathValue("action")
	note := strings.TrimSpace(r.PostForm.Get("note"))
	c, ctx, user := ui.s.ctl(), r.Context(), v.User
	var msg string
	var err error
	switch act {
	case "approve":
		_, err = c.Approve(ctx, id, user, note)
		msg = "You approved the plan."
	case "reject":
		_, err = c.Reject(ctx, id, user, note)
		msg = "You rejected the plan."
	case "snapshot":
		var parts []refill.SnapshotPart
		_, parts, err = c.Snapshot(ctx, id, user)
		msg = fmt.Sprintf("Snapshot taken: %d partition(s) copied.", len(parts))
	case "scope":
		_, err = c.Scope(ctx, id, user, note)
		msg = "Scope recorded."
	case "signoff":
		_, err = c.Signoff(ctx, id, user, note)
		msg = "You signed off the run."
	case "cancel":
		var st *control.State
		if st, err = c.Cancel(ctx, id, user, note); err == nil {
			msg = "The plan is cancelled."
			if st.Plan.Status == refill.StatusRunning {
				msg = "The run was asked to stop: no new partition starts, and those in flight finish first."
			}
		}
	case "resolve":
		ran := r.PostForm.Get("ran")
		if ran != "yes" && ran != "no" {
			err = refill.BadInputf("say whether the job ran: yes or no")
			break
		}
		_, err = c.Resolve(ctx, user, control.ResolveRequest{PlanID: id, Dataset: r.PostForm.Get("dataset"), Partition: r.PostForm.Get("partition"), Ran: ran == "yes", Reason: note})
		msg = "Recorded: it did not run, and runs again when the plan resumes."
		if ran == "yes" {
			msg = "Recorded: it ran, and counts as published."
		}
	case "rollback":
		var parts []refill.SnapshotPart
		_, parts, err = c.Rollback(ctx, id, user, control.RollbackOptions{Force: r.PostForm.Get("force") != "", Reason: note})
		msg = fmt.Sprintf("Rolled back: %d partition(s) restored from the snapshot.", len(parts))
	case "apply":
		err = ui.s.startApply(ctx, id, user)
		msg = "The run started."
	default:
		ui.fail(w, r, v, refill.NotFoundf("no action %q on a plan (approve, reject, apply, cancel, snapshot, scope, signoff, resolve, rollback)", act))
		return
	}
	if err != nil {
		ui.s.Log.InfoContext(ctx, "web action refused", slog.String("plan", id), slog.String("action", act),
			slog.String("user", user), slog.String("error", err.Error()))
		st, lerr := c.Load(ctx, id)
		if lerr != nil {
			ui.fail(w, r, v, err)
			return
		}
		status, text := HTTPStatus(err), err.Error()
		if status == http.StatusInternalServerError {
			ui.s.Log.ErrorContext(ctx, "internal error", slog.String("path", r.URL.Path), slog.String("error", text))
			text = "Internal error: the server log has the details."
		}
		v.Flash = &flash{Kind: "error", Msg: text}
		ui.renderPlan(w, r, v, st, status)
		return
	}
	ui.setFlash(w, r, flash{Kind: "ok", Msg: msg})
	http.Redirect(w, r, "/plans/"+url.PathEscape(id), http.StatusSeeOther)
}

// newPlan makes a plan from the plans page's form (refill plan), as the
// signed-in user, and shows it. A refused request shows the form again
// with what was typed and why; a plan the source gate blocked is stored
// and shown, as the CLI prints it.
func (ui *webUI) newPlan(w http.ResponseWriter, r *http.Request, v *view) {
	f := planForm{Targets: r.PostForm["targets"], From: strings.TrimSpace(r.PostForm.Get("from")),
		To: strings.TrimSpace(r.PostForm.Get("to")), Reason: strings.TrimSpace(r.PostForm.Get("reason")),
		Select: strings.TrimSpace(r.PostForm.Get("select")), Exclude: strings.TrimSpace(r.PostForm.Get("exclude")),
		NoDownstream: r.PostForm.Get("no_downstream") != ""}
	targets := append(slices.Clone(f.Targets), selectors(f.Select)...)
	var p *refill.Plan
	err := refill.BadInputf("choose at least one dataset to rebuild, or type a selector")
	if len(targets) > 0 {
		select {
		case ui.s.planning <- struct{}{}:
			p, err = ui.s.ctl().Plan(r.Context(), v.User, planner.Request{Targets: targets, Exclude: selectors(f.Exclude), NoDownstream: f.NoDownstream,
				From: f.From, To: f.To, Reason: f.Reason})
			<-ui.s.planning
		case <-r.Context().Done():
			err = r.Context().Err()
		}
	}
	if p == nil {
		list, next, lerr := ui.s.plans(r.Context(), refill.PlanFilter{Limit: pageDefault})
		if lerr != nil {
			ui.fail(w, r, v, err)
			return
		}
		status, text := HTTPStatus(err), err.Error()
		if status == http.StatusInternalServerError {
			ui.s.Log.ErrorContext(r.Context(), "internal error", slog.String("path", r.URL.Path), slog.String("error", text))
			text = "Internal error: the server log has the details."
		}
		v.Flash = &flash{Kind: "error", Msg: text}
		v.Title, v.Nav = "Plans", "plans"
		v.Data = plansData{Plans: list, Next: next, Statuses: refill.Statuses, Limit: pageDefault, Datasets: ui.s.conf().DatasetNames(), Form: f}
		ui.render(w, r, status, "plans", v)
		return
	}
	msg, kind := fmt.Sprintf("Planned: %s, %s.", p.Tier, p.Status), "ok"
	if err != nil {
		// Stored, but refused (blocked by the source gate): shown, with why.
		msg, kind = fmt.Sprintf("The source gate blocked this plan (%d failed check(s)): it can never run; repair the source and plan again.", p.Gate.Failed()), "error"
	}
	ui.setFlash(w, r, flash{Kind: kind, Msg: msg})
	http.Redirect(w, r, "/plans/"+url.PathEscape(p.ID), http.StatusSeeOther)
}
