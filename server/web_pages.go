package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/dustin/go-humanize"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/lineage"
	"github.com/refill-dev/refill/store"
)

var webFuncs = template.FuncMap{
	// stamp shows a time the JSON writes as RFC 3339 (a plan summary's
	// created_at) to the minute, as when does.
	"stamp": func(s string) string {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return s
		}
		return t.UTC().Format("2006-01-02 15:04 UTC")
	},
	"warningGroups": refill.GroupWarnings,
	// failedProofs are a plan's failed proofs, from its reasons or its
	// attention: the page shows them first.
	"failedProofs": (*refill.Plan).FailedProofs,
	// has reports whether list holds s.
	"has": func(list []string, s string) bool { return slices.Contains(list, s) },
	// rows is a row count for a person, or a dash when it is unknown.
	"rows": func(n *int64) string {
		if n == nil {
			return "—"
		}
		return humanize.Comma(*n)
	},
	"when": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04 UTC")
	},
	"pct": func(f *float64) string {
		if f == nil {
			return ""
		}
		return fmt.Sprintf("%+.1f%%", 100**f)
	},
	"percent": func(f float64) string { return strconv.FormatFloat(100*f, 'f', -1, 64) + "%" },
	"num":     func(f float64) string { return strconv.FormatFloat(f, 'g', 4, 64) },
	"join":    strings.Join,
	// clip shortens a stored text to what a page shows of it
	// (refill.ClipText): one stored before texts were bounded may be any
	// length, and the API has it whole.
	"clip": func(s any) string {
		switch s := s.(type) {
		case string:
			return refill.ClipText(s)
		case []byte:
			return refill.ClipText(string(s))
		case json.RawMessage:
			return refill.ClipText(string(s))
		}
		return refill.ClipText(fmt.Sprint(s))
	},
	"short": func(s string) string {
		if len(s) > 19 {
			return s[:19] + "…"
		}
		return s
	},
}

// The plans list.

type plansData struct {
	Plans []refill.PlanSummary
	// Mine lists only the plans waiting for the signed-in user
	// (control.WaitingFor), not paged.
	Mine     bool
	Status   refill.Status
	Statuses []refill.Status
	Limit    int
	// Before is the page's cursor ("" for the newest plans); Next, the
	// next page's, when there are older plans.
	Before, Next string
	// Datasets are the configured datasets, for the new-plan form; Form
	// holds what was typed when a request was refused.
	Datasets []string
	Form     planForm
}

// planForm is the new-plan form: refill plan's inputs.
type planForm struct {
	Targets []string
	// Select and Exclude are selectors as typed, separated by spaces or
	// commas.
	Select, Exclude string
	NoDownstream    bool
	From, To        string
	Reason          string
}

// selectors splits typed selectors on spaces and commas.
func selectors(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
}

func (ui *webUI) plans(w http.ResponseWriter, r *http.Request, v *view) {
	f, err := planPage(r.URL.Query())
	if err != nil {
		ui.fail(w, r, v, err)
		return
	}
	d := plansData{Status: f.Status, Statuses: refill.Statuses, Limit: f.Limit, Before: f.Before, Datasets: ui.s.conf().DatasetNames()}
	if d.Status != "" && !d.Status.Known() {
		ui.fail(w, r, v, refill.BadInputf("status %q: want one of %s", d.Status, statusNames()))
		return
	}
	if r.URL.Query().Get("waiting") == "me" {
		d.Mine = true
		d.Plans, err = ui.s.ctl().WaitingFor(r.Context(), v.User, 0)
		if d.Status != "" {
			d.Plans = slices.DeleteFunc(d.Plans, func(p refill.PlanSummary) bool { return p.Status != d.Status })
		}
	} else {
		d.Plans, d.Next, err = ui.s.plans(r.Context(), f)
	}
	if err != nil {
		ui.fail(w, r, v, err)
		return
	}
	v.Title, v.Nav, v.Data = "Plans", "plans", d
	ui.render(w, r, http.StatusOK, "plans", v)
}

func statusNames() string {
	var s []string
	for _, st := range refill.Statuses {
		s = append(s, string(st))
	}
	return strings.Join(s, ", ")
}

// One plan.

// planData is what the plan page shows.
type planData struct {
	P         *refill.Plan
	St        *control.State
	Impact    string
	Progress  *Progress
	Report    *control.Report
	ReportErr string
	Steps     []stepView
	Checklist []checkItem
	Failed    int
	May       mayDo
	// Running is true while the run is in progress: the page follows it.
	Running      bool
	ShowProgress bool
	// Changes are the plan's content diffs step by step, changed steps
	// first; Sample a few changed rows of the first changed partition.
	Changes []refill.DatasetChange
	Sample  *sampleView
}

// sampleView is a few changed rows of one partition, one line each.
type sampleView struct {
	Dataset, Partition string
	Rows               []string
}

// mayDo says which buttons the page shows the signed-in user. It mirrors
// control's rules so that nobody is offered a button that will refuse
// them; control still decides every press.
type mayDo struct {
	Approve, Reject, Apply, Cancel, Snapshot, Scope, Signoff bool
	// Resolve says whether a side_effects partition of unknown outcome ran.
	Resolve bool
	// Rollback restores the snapshot after a run; Force is a lead's
	// rollback over partitions another plan wrote since.
	Rollback, Force bool
}

type stepView struct {
	Dataset string
	Order   int
	Kind    refill.JobKind
	Tags    []string
	Target  bool
	// ExpectedNote says why the expected rows are what they are, when
	// they are not the job's own count (refill.Step.ExpectedNote).
	ExpectedNote string
	Partitions   []partitionView
}

// partitionView is one partition of a step: the plan's counts, and after
// the run what it found and left.
type partitionView struct {
	Partition      string
	Current        *int64
	Expected       *int64
	ExpectedMethod refill.ExpectedMethod
	Published      bool
	Before, After  *int64
	Deviation      *float64
	// Diff is the dry run's content diff of the partition.
	Diff *refill.PartitionDiff
	// Flagged: after differs from expected beyond the tolerance.
	// Changed: the content changed (checksums differ).
	Flagged, Changed bool
}

// checkItem is one line of the manual checklist.
type checkItem struct {
	N      int
	Name   string
	Done   bool
	By     string
	At     time.Time
	Note   string
	Action string // the form that does it, when the user may now
	Wait   string // what it waits for, when not done
}

func (ui *webUI) plan(w http.ResponseWriter, r *http.Request, v *view) {
	st, err := ui.s.ctl().Load(r.Context(), r.PathValue("id"))
	if err != nil {
		ui.fail(w, r, v, err)
		return
	}
	ui.renderPlan(w, r, v, st, http.StatusOK)
}

// renderPlan shows a plan's page with status: 200, or the status of a
// refused action whose refusal v.Flash carries.
func (ui *webUI) renderPlan(w http.ResponseWriter, r *http.Request, v *view, st *control.State, status int) {
	p := st.Plan
	d := planData{P: p, St: st, Impact: refill.ClipText(control.Impact(p)), Progress: ui.s.progress(r, st), Failed: p.Gate.Failed()}
	// A run this server just started may not have marked the plan
	// running yet: the page follows it all the same.
	d.Running = d.Progress.Running
	rep, err := ui.s.ctl().Report(r.Context(), p.ID)
	switch {
	case err == nil || errors.Is(err, refill.ErrVerification):
		d.Report = &rep
		if err != nil {
			d.ReportErr = err.Error()
		}
	default:
		ui.fail(w, r, v, err)
		return
	}
	byKey := map[string]control.PartitionReport{}
	for _, pr := range rep.Partitions {
		byKey[pr.Dataset+"\x00"+pr.Partition] = pr
	}
	for _, s := range p.Steps {
		sv := stepView{Dataset: s.Dataset, Order: s.Order, Kind: s.Kind, Tags: s.Tags, Target: slices.Contains(p.Request.Targets, s.Dataset), ExpectedNote: s.ExpectedNote}
		for _, pp := range s.Partitions {
			pv := partitionView{Partition: pp.Partition, Current: pp.CurrentRows, Expected: pp.ExpectedRows, ExpectedMethod: pp.ExpectedMethod, Diff: pp.Diff}
			if d.Sample == nil && pp.Diff.Changes() && len(pp.Diff.Sample) > 0 {
				d.Sample = &sampleView{Dataset: s.Dataset, Partition: pp.Partition}
				for _, row := range pp.Diff.Sample {
					d.Sample.Rows = append(d.Sample.Rows, row.Describe(pp.Diff.Key))
				}
			}
			if pr, ok := byKey[s.Dataset+"\x00"+pp.Partition]; ok && pr.Published {
				pv.Published, pv.Deviation, pv.Flagged = true, pr.Deviation, pr.Flagged
				if pr.Before != nil {
					pv.Before = &pr.Before.Rows
				}
				if pr.After != nil {
					pv.After = &pr.After.Rows
				}
				pv.Changed = pr.Before == nil || pr.After == nil || pr.Before.Checksum != pr.After.Checksum
			}
			sv.Partitions = append(sv.Partitions, pv)
		}
		d.Steps = append(d.Steps, sv)
	}
	d.Changes = refill.ChangedFirst(p.Changes())
	d.May = ui.mayDo(r.Context(), st, v.User)
	if p.Tier == refill.TierManual {
		d.Checklist = ui.checklist(st, d.May)
	}
	v.Refresh = d.Running
	switch p.Status {
	case refill.StatusRunning, refill.StatusApplied, refill.StatusFailed, refill.StatusNeedsReview, refill.StatusCancelled, refill.StatusRolledBack:
		d.ShowProgress = true
	default:
		d.ShowProgress = d.Running || d.Progress.Published > 0
	}
	v.Title, v.Nav, v.Data = "Plan "+p.ID, "plans", d
	ui.render(w, r, status, "plan", v)
}

// mayDo is what the page offers the signed-in user: control's
// Requirements for each decision, and nothing of its own but that a plan
// this server runs already is not offered to apply again.
func (ui *webUI) mayDo(ctx context.Context, st *control.State, user string) mayDo {
	c := ui.s.ctl()
	sub := control.Subject{State: st}
	may := func(act control.Action, sub control.Subject) bool { return c.May(ctx, act, sub, user) }
	m := mayDo{
		Approve:  may(control.ActApprove, sub),
		Reject:   may(control.ActReject, sub),
		Apply:    may(control.ActApply, sub) && !ui.s.Running(st.Plan.ID),
		Cancel:   may(control.ActCancel, sub),
		Resolve:  may(control.ActResolve, sub),
		Snapshot: may(control.ActSnapshot, sub),
		Scope:    may(control.ActScope, sub),
		Signoff:  may(control.ActSignoff, sub),
		Rollback: may(control.ActRollback, sub),
	}
	// A forced rollback is a lead's: offered where users: names leads.
	m.Force = m.Rollback && len(ui.s.conf().Users) > 0 && may(control.ActRollback, control.Subject{State: st, Force: true})
	return m
}

// checklist is the manual checklist in control's order and numbering.
func (ui *webUI) checklist(st *control.State, may mayDo) []checkItem {
	p := st.Plan
	item := func(n int, name string, step refill.ChecklistItem, action bool, form, wait string) checkItem {
		c := checkItem{N: n, Name: name, Wait: wait}
		if s, ok := st.Done(step); ok {
			c.Done, c.By, c.At, c.Note = true, s.Actor, s.At, s.Note
		} else if action {
			c.Action = form
		}
		return c
	}
	out := []checkItem{
		item(1, "Snapshot the partitions it will overwrite", refill.ChecklistSnapshot, may.Snapshot, "snapshot", "open to anyone, before approval"),
		item(2, "State the scope", refill.ChecklistScope, may.Scope, "scope", "waits for the snapshot"),
	}
	approval := checkItem{N: 3, Name: "Approval by a lead other than " + p.Request.RequestedBy, Wait: "waits for a lead, after snapshot and scope"}
	if a, ok := ui.s.ctl().Approval(st); ok {
		approval.Done, approval.By, approval.At, approval.Note = true, a.Actor, a.At, a.Note
	}
	if !approval.Done && may.Approve {
		approval.Action = "approve"
	}
	run := checkItem{N: 4, Name: "Run", Wait: "waits for the first three steps"}
	switch p.Status {
	case refill.StatusApplied:
		run.Done = true
	case refill.StatusRunning:
		run.Wait = "running now"
	}
	if may.Apply {
		run.Action = "apply"
	}
	out = append(out, approval, run,
		item(5, "Sign off the report", refill.ChecklistSignoff, may.Signoff, "signoff", "waits for a second person's review of the report, after the run"))
	if !p.Status.Live() && p.Status != refill.StatusApplied {
		// A blocked, rejected, superseded, expired, cancelled or rolled
		// back plan waits for nothing: its open steps are closed.
		for i := range out {
			if !out[i].Done {
				out[i].Wait = "closed: the plan is " + string(p.Status)
			}
		}
	}
	return out
}

// planLineage is the plan's lineage picture for the page's <img>.
func (ui *webUI) planLineage(w http.ResponseWriter, r *http.Request, _ string) {
	if dot, ok := ui.planDOT(w, r, r.PathValue("id")); ok {
		ui.svg(w, r, dot)
	}
}

// planDOT is plan id's lineage as DOT; when it cannot be made, it has
// answered the request (false).
func (ui *webUI) planDOT(w http.ResponseWriter, r *http.Request, id string) (string, bool) {
	st, err := ui.s.ctl().Load(r.Context(), id)
	if err != nil {
		http.Error(w, err.Error(), HTTPStatus(err))
		return "", false
	}
	dot, err := lineage.PlanDOT(st.Plan, ui.s.conf())
	if err != nil {
		ui.s.writeError(w, r, err)
		return "", false
	}
	return dot, true
}

// signedPicture answers a picture link (lineage.PictureLink): 403 when its
// signature does not hold or it has expired, the PNG otherwise.
func (ui *webUI) signedPicture(w http.ResponseWriter, r *http.Request) {
	secureHeaders(w.Header())
	c := ui.s.ctl()
	seal, err := c.Store.SealKey(r.Context())
	if err != nil {
		ui.s.writeError(w, r, err)
		return
	}
	id, q := r.PathValue("id"), r.URL.Query()
	if err := lineage.CheckPictureLink(lineage.PictureLinkKey(seal), id, q.Get("expires"), q.Get("sig"), time.Now()); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	dot, ok := ui.planDOT(w, r, id)
	if !ok {
		return
	}
	pic, err := lineage.PNG(r.Context(), dot)
	if err != nil {
		ui.s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	w.Header().Set("Cache-Control", "private, max-age=300")
	_, _ = w.Write(pic)
}

func (ui *webUI) datasetLineage(w http.ResponseWriter, r *http.Request, _ string) {
	name := r.PathValue("name")
	g, err := lineage.Of(ui.s.conf())
	if err != nil {
		ui.s.writeError(w, r, err)
		return
	}
	names, err := g.Neighbourhood(name)
	if err != nil {
		http.Error(w, err.Error(), HTTPStatus(err))
		return
	}
	ui.svg(w, r, g.DOT(names, lineage.Highlight{Targets: map[string]bool{name: true}}))
}

func (ui *webUI) svg(w http.ResponseWriter, r *http.Request, dot string) {
	svg, err := lineage.SVG(r.Context(), dot)
	if err != nil {
		ui.s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Header().Set("Cache-Control", "private, max-age=60")
	_, _ = w.Write(svg)
}

// planProgress is the run's progress as JSON, for the page's refresher.
func (ui *webUI) planProgress(w http.ResponseWriter, r *http.Request, _ string) {
	st, err := ui.s.ctl().Load(r.Context(), r.PathValue("id"))
	if err != nil {
		ui.s.writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, struct {
		Status refill.Status `json:"status"`
		*Progress
	}{st.Plan.Status, ui.s.progress(r, st)})
}

// One dataset.

type datasetData struct {
	D          *refill.Dataset
	Downstream []string
	Checks     string
	Touches    []touchView
	More       bool
	// Accepted are the findings people accepted as real data, newest
	// first.
	Accepted []refill.Acceptance
}

// touchView is one plan's dealings with one partition, from the audit log.
type touchView struct {
	Partition  string
	PlanID     string
	Status     refill.Status
	By, Reason string
	Events     []refill.Event
	RowsBefore *int64
	RowsAfter  *int64
}

// maxTouches bounds the dataset page's history table.
const maxTouches = 500

func (ui *webUI) dataset(w http.ResponseWriter, r *http.Request, v *view) {
	name := r.PathValue("name")
	d, ok := ui.s.conf().Datasets[name]
	if !ok {
		ui.fail(w, r, v, refill.NotFoundf("unknown dataset %q (known: %s)", name, strings.Join(ui.s.conf().DatasetNames(), ", ")))
		return
	}
	g, err := lineage.Of(ui.s.conf())
	if err != nil {
		ui.fail(w, r, v, err)
		return
	}
	data := datasetData{D: d, Downstream: g.Downstream(name)}
	if d.Checks != nil {
		b, _ := json.MarshalIndent(d.Checks, "", "  ")
		data.Checks = string(b)
	}
	evs, err := ui.s.Store.Audit(r.Context(), store.AuditFilter{Dataset: name})
	if err != nil {
		ui.fail(w, r, v, err)
		return
	}
	// Group the partition-level entries by partition and plan, newest
	// partition first.
	idx := map[string]int{}
	for _, e := range evs {
		if e.Partition == "" || e.PlanID == "" {
			continue
		}
		k := e.Partition + "\x00" + e.PlanID
		i, ok := idx[k]
		if !ok {
			i = len(data.Touches)
			idx[k] = i
			data.Touches = append(data.Touches, touchView{Partition: e.Partition, PlanID: e.PlanID})
		}
		t := &data.Touches[i]
		t.Events = append(t.Events, e)
		if e.Kind == refill.EventPartitionPublished {
			var det struct {
				RowsBefore *int64 `json:"rows_before"`
				RowsAfter  *int64 `json:"rows_after"`
			}
			if json.Unmarshal(e.Detail, &det) == nil {
				t.RowsBefore, t.RowsAfter = det.RowsBefore, det.RowsAfter
			}
		}
	}
	slices.SortStableFunc(data.Touches, func(a, b touchView) int {
		if c := strings.Compare(b.Partition, a.Partition); c != 0 {
			return c
		}
		return int(a.Events[0].Seq - b.Events[0].Seq)
	})
	if len(data.Touches) > maxTouches {
		data.Touches, data.More = data.Touches[:maxTouches], true
	}
	plans := map[string]*refill.Plan{}
	for i := range data.Touches {
		t := &data.Touches[i]
		p, ok := plans[t.PlanID]
		if !ok {
			if p, err = ui.s.Store.Plan(r.Context(), t.PlanID); err != nil && !errors.Is(err, refill.ErrNotFound) {
				ui.fail(w, r, v, err)
				return
			}
			plans[t.PlanID] = p
		}
		if p != nil {
			t.Status, t.By, t.Reason = p.Status, p.Request.RequestedBy, refill.ClipText(p.Request.Reason)
		}
	}
	if data.Accepted, err = ui.s.Store.Acceptances(r.Context(), name, ""); err != nil {
		ui.fail(w, r, v, err)
		return
	}
	slices.Reverse(data.Accepted)
	v.Title, v.Nav, v.Data = "Dataset "+name, "", data
	ui.render(w, r, http.StatusOK, "dataset", v)
}

// The audit log.

type auditData struct {
	Entries []refill.Event
	Limit   int
	Before  int64
	// Older is the seq to page on from, when there are older entries.
	Older                int64
	Plan, Dataset, Event string
	Filtered             bool
}

func (ui *webUI) audit(w http.ResponseWriter, r *http.Request, v *view) {
	q := r.URL.Query()
	d := auditData{Limit: 50, Plan: q.Get("plan"), Dataset: q.Get("dataset"), Event: q.Get("event")}
	d.Filtered = d.Plan != "" || d.Dataset != "" || d.Event != ""
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 500 {
			ui.fail(w, r, v, refill.BadInputf("limit %q: want a number from 1 to 500", s))
			return
		}
		d.Limit = n
	}
	if s := q.Get("before"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 {
			ui.fail(w, r, v, refill.BadInputf("before %q: want an entry number (seq)", s))
			return
		}
		d.Before = n
	}
	// The store reads the log in order; the page is its newest entries
	// before d.Before.
	evs, err := ui.s.Store.Audit(r.Context(), store.AuditFilter{PlanID: d.Plan, Dataset: d.Dataset, Kind: refill.EventKind(d.Event)})
	if err != nil {
		ui.fail(w, r, v, err)
		return
	}
	for i := len(evs) - 1; i >= 0; i-- {
		e := evs[i]
		if d.Before > 0 && e.Seq >= d.Before {
			continue
		}
		if len(d.Entries) == d.Limit {
			d.Older = d.Entries[len(d.Entries)-1].Seq
			break
		}
		d.Entries = append(d.Entries, e)
	}
	v.Title, v.Nav, v.Data = "Audit log", "audit", d
	ui.render(w, r, http.StatusOK, "audit", v)
}
