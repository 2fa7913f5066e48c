package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/lineage"
	"github.com/refill-dev/refill/planner"
)

// api registers /api/v1 (docs/design.md §7a). Every route needs a bearer token
// and acts as its user, through control: the same rules as the CLI.
func (s *Server) api() {
	h := func(pattern string, fn func(w http.ResponseWriter, r *http.Request, user string)) {
		s.mux.Handle(pattern, s.authed(fn))
	}
	s.mux.HandleFunc("GET /api/v1/openapi.json", s.serveOpenAPI)
	h("POST /api/v1/plans", s.createPlan)
	h("GET /api/v1/plans", s.listPlans)
	h("GET /api/v1/plans/{id}", s.getPlan)
	h("POST /api/v1/plans/{id}/approve", s.decide(func(c *control.Control, r *http.Request, id, user, note string) (*control.State, error) {
		return c.Approve(r.Context(), id, user, note)
	}))
	h("POST /api/v1/plans/{id}/reject", s.decide(func(c *control.Control, r *http.Request, id, user, note string) (*control.State, error) {
		return c.Reject(r.Context(), id, user, note)
	}))
	h("POST /api/v1/plans/{id}/scope", s.decide(func(c *control.Control, r *http.Request, id, user, note string) (*control.State, error) {
		return c.Scope(r.Context(), id, user, note)
	}))
	h("POST /api/v1/plans/{id}/signoff", s.decide(func(c *control.Control, r *http.Request, id, user, note string) (*control.State, error) {
		return c.Signoff(r.Context(), id, user, note)
	}))
	h("POST /api/v1/plans/{id}/snapshot", s.decide(func(c *control.Control, r *http.Request, id, user, _ string) (*control.State, error) {
		st, _, err := c.Snapshot(r.Context(), id, user)
		return st, err
	}))
	h("POST /api/v1/plans/{id}/cancel", s.decide(func(c *control.Control, r *http.Request, id, user, reason string) (*control.State, error) {
		return c.Cancel(r.Context(), id, user, reason)
	}))
	h("POST /api/v1/plans/{id}/resolve", s.resolve)
	h("POST /api/v1/plans/{id}/rollback", s.rollback)
	h("POST /api/v1/plans/{id}/apply", s.apply)
	h("GET /api/v1/plans/{id}/report", s.report)
	h("GET /api/v1/plans/{id}/lineage.svg", s.planLineage("svg"))
	h("GET /api/v1/plans/{id}/lineage.dot", s.planLineage("dot"))
	h("GET /api/v1/lineage", s.lineage)
	h("POST /api/v1/lineage", s.postLineage)
	h("GET /api/v1/history", s.history)
	h("GET /api/v1/freeze", s.getFreeze)
	h("POST /api/v1/freeze", s.freeze(false))
	h("DELETE /api/v1/freeze", s.freeze(true))
	h("POST /api/v1/dags/{dataset}/dagRuns", s.dagRun)
	h("POST /api/v1/datasets/{dataset}/prove", s.prove)
	h("POST /api/v1/datasets/{dataset}/accept", s.accept(false))
	h("POST /api/v1/datasets/{dataset}/accept/revoke", s.accept(true))
	h("GET /api/v1/audit/verify", s.verifyAudit)
	s.mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		// A path served for other methods is 405, with them in Allow.
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, pattern := s.mux.Handler(probe); pattern != "/api/" && pattern != "" {
				allow = append(allow, m)
			}
		}
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeJSON(w, http.StatusMethodNotAllowed, apiError{Error: fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, strings.Join(allow, " or ")), Code: refill.ExitBadInput})
			return
		}
		writeJSON(w, http.StatusNotFound, apiError{Error: fmt.Sprintf("no route %s %s (see docs/design.md §7a)", r.Method, r.URL.Path), Code: refill.ExitBadInput})
	})
}

// planRequest is the body of POST /api/v1/plans: refill plan's inputs.
type planRequest struct {
	// Targets are selectors: NAME, NAME+, +NAME, tag:TAG.
	Targets      []string `json:"targets"`
	Exclude      []string `json:"exclude"`
	NoDownstream bool     `json:"no_downstream"`
	From         string   `json:"from"`
	To           string   `json:"to"`
	Reason       string   `json:"reason"`
}

func (s *Server) createPlan(w http.ResponseWriter, r *http.Request, user string) {
	var req planRequest
	if err := decode(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.plan(w, r, user, planner.Request{Targets: req.Targets, Exclude: req.Exclude, NoDownstream: req.NoDownstream, From: req.From, To: req.To, Reason: req.Reason}, "reason", nil)
}

// plan makes a plan and answers 201 with it, or 409 with the error and the
// plan when the source gate blocked it (as the CLI exits 3 after printing
// it). reasonKey is the body's key the reason came in, which a refused
// reason is named by; wrap, when set, shapes the success body.
func (s *Server) plan(w http.ResponseWriter, r *http.Request, user string, req planner.Request, reasonKey string, wrap func(control.StateJSON) any) {
	if len(req.Targets) == 0 {
		s.writeError(w, r, refill.BadInputf("targets: name at least one dataset"))
		return
	}
	select {
	case s.planning <- struct{}{}:
	case <-r.Context().Done():
		s.writeError(w, r, r.Context().Err())
		return
	}
	p, err := s.ctl().Plan(r.Context(), user, req)
	<-s.planning
	var te *refill.TextError
	if errors.As(err, &te) && te.Field == "--reason" {
		te.Field = reasonKey
	}
	if p == nil {
		s.writeError(w, r, err)
		return
	}
	st, lerr := s.ctl().Load(r.Context(), p.ID)
	if lerr != nil {
		s.writeError(w, r, lerr)
		return
	}
	w.Header().Set("Location", "/api/v1/plans/"+p.ID)
	if err != nil {
		// Stored, but refused (blocked by the source gate): the error
		// and the plan.
		s.metrics.gate.WithLabelValues("plan").Inc()
		writeJSON(w, HTTPStatus(err), struct {
			apiError
			Plan control.StateJSON `json:"plan"`
		}{apiError{err.Error(), refill.ExitCode(err)}, st.JSON()})
		return
	}
	var body any = st.JSON()
	if wrap != nil {
		body = wrap(st.JSON())
	}
	writeJSON(w, http.StatusCreated, body)
}

// Lists of plans page by default, so that what one request reads and
// answers is bounded whatever the state store holds.
const (
	pageDefault = 50
	pageMax     = 500
)

// planPage reads a list of plans' query: status; limit, 50 by default,
// and more than 500 read as 500 (the page then says there is more); and
// before, the cursor: the ID of the last plan of the page before.
func planPage(q url.Values) (refill.PlanFilter, error) {
	f := refill.PlanFilter{Status: refill.Status(q.Get("status")), Limit: pageDefault, Before: q.Get("before")}
	if f.Status != "" && !slices.Contains(refill.Statuses, f.Status) {
		names := make([]string, len(refill.Statuses))
		for i, st := range refill.Statuses {
			names[i] = string(st)
		}
		return f, refill.BadInputf("status %q: want one of %s", f.Status, strings.Join(names, ", "))
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return f, refill.BadInputf("limit %q: want a number from 1 to %d", v, pageMax)
		}
		f.Limit = min(n, pageMax)
	}
	return f, nil
}

// plans lists one page of plans, with the cursor of the next page: ""
// on the last.
func (s *Server) plans(ctx context.Context, f refill.PlanFilter) ([]refill.PlanSummary, string, error) {
	more := f
	more.Limit = f.Limit + 1
	list, err := s.ctl().Plans(ctx, more)
	if err != nil {
		return nil, "", err
	}
	if list == nil {
		list = []refill.PlanSummary{}
	}
	if len(list) > f.Limit {
		list = list[:f.Limit]
		return list, list[len(list)-1].ID, nil
	}
	return list, "", nil
}

// listPlans answers GET /api/v1/plans: a bare array of plans, newest
// first, as before paging — a client that reads one page sees what it
// always saw — and, when there are more, a Link header to the next page
// (RFC 8288, rel="next"), as GitHub's API pages.
func (s *Server) listPlans(w http.ResponseWriter, r *http.Request, _ string) {
	f, err := planPage(r.URL.Query())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	list, next, err := s.plans(r.Context(), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if next != "" {
		q := url.Values{"limit": {strconv.Itoa(f.Limit)}, "before": {next}}
		if f.Status != "" {
			q.Set("status", string(f.Status))
		}
		w.Header().Set("Link", fmt.Sprintf(`</api/v1/plans?%s>; rel="next"`, q.Encode()))
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) getPlan(w http.ResponseWriter, r *http.Request, user string) {
	st, err := s.ctl().Load(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	v := s.withProgress(r, st)
	// What the token's user may do now, and if not, why: control's
	// Requirements for each of the plan's decisions.
	v.Requirements = map[control.Action][]string{}
	for _, act := range []control.Action{control.ActApprove, control.ActReject, control.ActSnapshot, control.ActScope, control.ActSignoff,
		control.ActApply, control.ActRollback, control.ActCancel, control.ActResolve, control.ActSnapshotDrop} {
		unmet, err := s.ctl().Requirements(r.Context(), act, control.Subject{State: st}, user)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		whys := []string{}
		for _, u := range unmet {
			whys = append(whys, u.Why)
		}
		v.Requirements[act] = whys
	}
	writeJSON(w, http.StatusOK, v)
}

// planView is a plan's state with its run's progress.
type planView struct {
	control.StateJSON
	Progress *Progress `json:"progress,omitempty"`
	// Requirements are, for each decision on the plan, what stands between
	// the token's user and it now (empty: they may take it). Only GET
	// /api/v1/plans/{id} answers them.
	Requirements map[control.Action][]string `json:"requirements,omitempty"`
}

// Progress is how far a plan's run has got.
type Progress struct {
	Published  int  `json:"published"`
	Partitions int  `json:"partitions"`
	Running    bool `json:"running"`
}

func (s *Server) progress(r *http.Request, st *control.State) *Progress {
	p := st.Plan
	// A run this server just started may not have marked the plan
	// running yet.
	pr := &Progress{Running: p.Status == refill.StatusRunning || (s.Running(p.ID) && p.Status.Live())}
	for _, step := range p.Steps {
		pr.Partitions += len(step.Partitions)
	}
	pubs, err := s.Store.Published(r.Context(), p.ID)
	if err == nil {
		pr.Published = len(pubs)
	}
	return pr
}

func (s *Server) withProgress(r *http.Request, st *control.State) planView {
	return planView{StateJSON: st.JSON(), Progress: s.progress(r, st)}
}

// noteBody is the body of decisions: a note (or, for cancel, the reason).
type noteBody struct {
	Note   string `json:"note"`
	Reason string `json:"reason"`
	Force  bool   `json:"force"`
}

// readNote reads an optional decision body.
func readNote(w http.ResponseWriter, r *http.Request) (noteBody, error) {
	var b noteBody
	if r.ContentLength == 0 {
		return b, nil
	}
	err := decode(w, r, &b)
	return b, err
}

func (s *Server) decide(act func(c *control.Control, r *http.Request, id, user, note string) (*control.State, error)) func(http.ResponseWriter, *http.Request, string) {
	return func(w http.ResponseWriter, r *http.Request, user string) {
		b, err := readNote(w, r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		note := b.Note
		if note == "" {
			note = b.Reason
		}
		st, err := act(s.ctl(), r, r.PathValue("id"), user, note)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, s.withProgress(r, st))
	}
}

// resolveBody is a person's word on a partition that needs review.
type resolveBody struct {
	Dataset   string `json:"dataset"`
	Partition string `json:"partition"`
	Ran       *bool  `json:"ran"`
	Reason    string `json:"reason"`
}

// resolve says whether a side_effects partition whose outcome was unknown
// ran (refill resolve).
func (s *Server) resolve(w http.ResponseWriter, r *http.Request, user string) {
	var b resolveBody
	if err := decode(w, r, &b); err != nil {
		s.writeError(w, r, err)
		return
	}
	if b.Partition == "" || b.Ran == nil {
		s.writeError(w, r, refill.BadInputf(`resolve needs "partition" and "ran" (true: its job had its effect; false: it did not, and runs again), with a "reason"`))
		return
	}
	st, err := s.ctl().Resolve(r.Context(), user, control.ResolveRequest{PlanID: r.PathValue("id"), Dataset: b.Dataset, Partition: b.Partition, Ran: *b.Ran, Reason: b.Reason})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.withProgress(r, st))
}

func (s *Server) rollback(w http.ResponseWriter, r *http.Request, user string) {
	b, err := readNote(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	st, parts, err := s.ctl().Rollback(r.Context(), r.PathValue("id"), user, control.RollbackOptions{Force: b.Force, Reason: b.Reason})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"plan": st.JSON(), "restored": parts})
}

// apply starts (or resumes) the plan's run and answers 202 once this
// server holds it: the run goes on in the server, and the plan's progress
// shows on GET. A run another process holds, or takes first, is 409.
func (s *Server) apply(w http.ResponseWriter, r *http.Request, user string) {
	id := r.PathValue("id")
	if err := s.startApply(r.Context(), id, user); err != nil {
		s.writeError(w, r, err)
		return
	}
	st, err := s.ctl().Load(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/v1/plans/"+id)
	writeJSON(w, http.StatusAccepted, s.withProgress(r, st))
}

func (s *Server) report(w http.ResponseWriter, r *http.Request, _ string) {
	rep, err := s.ctl().Report(r.Context(), r.PathValue("id"))
	if err != nil && !errors.Is(err, refill.ErrVerification) {
		s.writeError(w, r, err)
		return
	}
	if err != nil {
		// Out of tolerance: the report is the evidence; the status says so.
		writeJSON(w, HTTPStatus(err), struct {
			apiError
			Report control.Report `json:"report"`
		}{apiError{err.Error(), refill.ExitCode(err)}, rep})
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

func (s *Server) history(w http.ResponseWriter, r *http.Request, _ string) {
	q := r.URL.Query()
	dataset, partition := q.Get("dataset"), q.Get("partition")
	if dataset == "" || partition == "" {
		s.writeError(w, r, refill.BadInputf("dataset and partition are required: /api/v1/history?dataset=D&partition=P"))
		return
	}
	h, err := s.ctl().PartitionHistory(r.Context(), dataset, partition)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, h)
}

// planLineage serves a plan's lineage picture: its datasets highlighted in
// run order, from what the plan sealed.
func (s *Server) planLineage(format string) func(http.ResponseWriter, *http.Request, string) {
	return func(w http.ResponseWriter, r *http.Request, _ string) {
		st, err := s.ctl().Load(r.Context(), r.PathValue("id"))
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		dot, err := lineage.PlanDOT(st.Plan, s.conf())
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.writeLineage(w, r, format, dot)
	}
}

// lineage serves the whole lineage, or one dataset's neighbourhood.
func (s *Server) lineage(w http.ResponseWriter, r *http.Request, _ string) {
	g, err := lineage.Of(s.conf())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	names := g.Names()
	h := lineage.Highlight{Targets: map[string]bool{}}
	if d := r.URL.Query().Get("dataset"); d != "" {
		if names, err = g.Neighbourhood(d); err != nil {
			s.writeError(w, r, err)
			return
		}
		h.Targets[d] = true
	}
	format := r.URL.Query().Get("format")
	if format == "" {
		format = "svg"
	}
	s.writeLineage(w, r, format, g.DOT(names, h))
}

func (s *Server) writeLineage(w http.ResponseWriter, r *http.Request, format, dot string) {
	switch format {
	case "dot":
		w.Header().Set("Content-Type", "text/vnd.graphviz; charset=utf-8")
		_, _ = w.Write([]byte(dot))
	case "svg":
		svg, err := lineage.SVG(r.Context(), dot)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		w.Header().Set("Content-Type", "image/svg+xml")
		w.Header().Set("Cache-Control", "private, max-age=60")
		_, _ = w.Write(svg)
	default:
		s.writeError(w, r, refill.BadInputf("format %q: want svg or dot", format))
	}
}

func (s *Server) getFreeze(w http.ResponseWriter, r *http.Request, _ string) {
	f, err := s.ctl().Frozen(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"frozen": f != nil, "freeze": f})
}

func (s *Server) freeze(lift bool) func(http.ResponseWriter, *http.Request, string) {
	return func(w http.ResponseWriter, r *http.Request, user string) {
		b, err := readNote(w, r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		reason := b.Reason
		if reason == "" {
			reason = b.Note
		}
		var f refill.Freeze
		if lift {
			f, err = s.ctl().Unfreeze(r.Context(), user, reason)
		} else {
			f, err = s.ctl().Freeze(r.Context(), user, reason)
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"frozen": !lift, "freeze": f})
	}
}

// dagRunBody is Airflow's trigger body (v1 DAGRun and v2
// TriggerDAGRunPostBody): the range comes from conf.start_date/end_date,
// else from the data interval; the reason from note. Airflow's other
// fields are accepted and ignored; anything else is refused.
type dagRunBody struct {
	Conf              *dagRunConf `json:"conf"`
	Note              *string     `json:"note"`
	DataIntervalStart *string     `json:"data_interval_start"`
	DataIntervalEnd   *string     `json:"data_interval_end"`
	// Accepted and ignored.
	DagRunID        any `json:"dag_run_id"`
	LogicalDate     any `json:"logical_date"`
	ExecutionDate   any `json:"execution_date"`
	RunAfter        any `json:"run_after"`
	PartitionKey    any `json:"partition_key"`
	DagID           any `json:"dag_id"`
	State           any `json:"state"`
	StartDate       any `json:"start_date"`
	EndDate         any `json:"end_date"`
	ExternalTrigger any `json:"external_trigger"`
	RunType         any `json:"run_type"`
	LastScheduling  any `json:"last_scheduling_decision"`
}

type dagRunConf struct {
	StartDate string `json:"start_date"`
	EndDate   string `json:"end_date"`
	// Other conf keys are the DAG's own business and are ignored; a key
	// that is start_date or end_date in another case is refused.
	Other map[string]any `json:",inline"`
}

func (s *Server) dagRun(w http.ResponseWriter, r *http.Request, user string) {
	dataset := r.PathValue("dataset")
	var b dagRunBody
	if err := decode(w, r, &b); err != nil {
		s.writeError(w, r, err)
		return
	}
	from, to, err := dagRunRange(b, s.grain(dataset))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.plan(w, r, user, planner.Request{Targets: []string{dataset}, From: from, To: to, Reason: deref(b.Note)}, "note", func(st control.StateJSON) any {
		return map[string]any{"dag_id": dataset, "dag_run_id": "refill__" + st.ID, "state": st.Status, "note": deref(b.Note),
			"conf": map[string]string{"start_date": from, "end_date": to}, "plan": st}
	})
}

// prove proves a dataset's job on one partition (refill prove): 200 with
// the evidence, or 422 with it when the proof fails.
func (s *Server) prove(w http.ResponseWriter, r *http.Request, user string) {
	var b struct {
		Partition string `json:"partition"`
	}
	if err := decode(w, r, &b); err != nil {
		s.writeError(w, r, err)
		return
	}
	if b.Partition == "" {
		s.writeError(w, r, refill.BadInputf("partition is required"))
		return
	}
	pr, err := s.ctl().Prove(r.Context(), r.PathValue("dataset"), b.Partition, user)
	if err != nil && (pr == nil || !errors.Is(err, refill.ErrVerification)) {
		s.writeError(w, r, err)
		return
	}
	if err != nil {
		writeJSON(w, HTTPStatus(err), struct {
			apiError
			Proof *refill.Proof `json:"proof"`
		}{apiError{err.Error(), refill.ExitCode(err)}, pr})
		return
	}
	writeJSON(w, http.StatusOK, pr)
}

// accept is refill accept (or, revoking, refill accept --revoke): a failing
// finding accepted as real data, or the acceptance withdrawn, as the
// token's user, by control's rules; 201 with the acceptance (200 when
// revoking).
func (s *Server) accept(revoke bool) func(http.ResponseWriter, *http.Request, string) {
	return func(w http.ResponseWriter, r *http.Request, user string) {
		var b struct {
			Partition string `json:"partition"`
			Check     string `json:"check"`
			Column    string `json:"column"`
			Reason    string `json:"reason"`
		}
		if err := decode(w, r, &b); err != nil {
			s.writeError(w, r, err)
			return
		}
		if b.Partition == "" || b.Check == "" {
			s.writeError(w, r, refill.BadInputf("partition and check are required: name the finding"))
			return
		}
		req := control.AcceptRequest{Dataset: r.PathValue("dataset"), Partition: b.Partition, Check: b.Check, Column: b.Column, Reason: b.Reason}
		act, status := s.ctl().Accept, http.StatusCreated
		if revoke {
			act, status = s.ctl().Revoke, http.StatusOK
		}
		acc, err := act(r.Context(), req, user)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, status, acc)
	}
}

// verifyAudit walks the audit chain (refill audit verify): 200 when it
// holds, 422 when it does not.
func (s *Server) verifyAudit(w http.ResponseWriter, r *http.Request, _ string) {
	rep, err := s.ctl().VerifyAudit(r.Context())
	if err != nil {
		writeJSON(w, HTTPStatus(err), struct {
			apiError
			Report control.AuditCheck `json:"report"`
		}{apiError{err.Error(), refill.ExitCode(err)}, rep})
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// dagRunRange is the partition range an Airflow trigger body asks for.
func dagRunRange(b dagRunBody, grain refill.Grain) (from, to string, err error) {
	switch {
	case b.Conf != nil && (b.Conf.StartDate != "" || b.Conf.EndDate != ""):
		// refill's own convention (its airflow job kind sends the same):
		// both ends are partitions, included.
		from, to = b.Conf.StartDate, b.Conf.EndDate
		if from == "" || to == "" {
			return "", "", refill.BadInputf("conf: set both start_date and end_date")
		}
		return from, to, nil
	case b.DataIntervalStart != nil || b.DataIntervalEnd != nil:
		return dataInterval(deref(b.DataIntervalStart), deref(b.DataIntervalEnd), grain)
	}
	return "", "", refill.BadInputf("no range: set conf.start_date and conf.end_date, or data_interval_start and data_interval_end")
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// grain is a dataset's partition grain (day when unknown: the planner
// reports an unknown dataset).
func (s *Server) grain(dataset string) refill.Grain {
	if d, ok := s.conf().Datasets[dataset]; ok && d.Partition.Grain != "" {
		return d.Partition.Grain
	}
	return refill.GrainDay
}

// dataInterval turns Airflow's data interval — RFC 3339 times, the end
// excluded — into the first and last partitions it covers: a daily run's
// interval [11-01T00:00, 11-02T00:00) is the one partition 11-01.
func dataInterval(start, end string, grain refill.Grain) (string, string, error) {
	if start == "" || end == "" {
		return "", "", refill.BadInputf("set both data_interval_start and data_interval_end")
	}
	s, err := time.Parse(time.RFC3339, start)
	if err != nil {
		return "", "", refill.BadInputf("data_interval_start %q: want an RFC 3339 time such as 2026-11-01T00:00:00Z", start)
	}
	e, err := time.Parse(time.RFC3339, end)
	if err != nil {
		return "", "", refill.BadInputf("data_interval_end %q: want an RFC 3339 time such as 2026-11-02T00:00:00Z", end)
	}
	if !e.After(s) {
		return "", "", refill.BadInputf("data interval %s..%s is empty: the end is excluded and must come after the start", start, end)
	}
	s, e = s.UTC(), e.UTC()
	step, layout := 24*time.Hour, "2006-01-02"
	if grain == refill.GrainHour {
		step, layout = time.Hour, "2006-01-02T15"
	}
	last := e.Add(-time.Nanosecond).Truncate(step)
	return s.Truncate(step).Format(layout), last.Format(layout), nil
}
