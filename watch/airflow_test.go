package watch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/internal/fixtures"
	"github.com/refill-dev/refill/jobs/airflow"
	"github.com/refill-dev/refill/project"
	"github.com/refill-dev/refill/watch"
)

const (
	afDAG  = "events_daily_dag"
	afUser = "airflow-user"
	afPass = "s3cret-Pa55"
)

// afSpecs are Airflow's published API specs (shared/fixtures/airflow),
// which every answer of the fake is checked against.
var (
	afSpecsOnce sync.Once
	afSpecs     map[string]*openapi3.T
	afSpecsErr  error
)

func loadAirflowSpecs(t *testing.T) map[string]*openapi3.T {
	t.Helper()
	dir := fixtures.Dir(t, "airflow")
	afSpecsOnce.Do(func() {
		afSpecs = map[string]*openapi3.T{}
		for api, file := range map[string]string{"v1": "airflow2_v1_2.10.0.yaml", "v2": "airflow3_v2_3.2.1rc1.yaml"} {
			doc, err := openapi3.NewLoader().LoadFromFile(filepath.Join(dir, file))
			if err != nil {
				afSpecsErr = fmt.Errorf("%s: %w", file, err)
				return
			}
			// The v2 copy says 3.1 but writes nullability the 3.0 way
			// (see jobs/airflow's fake): read it by the rules it is in.
			doc.OpenAPI = "3.0.3"
			afSpecs[api] = doc
		}
	})
	if afSpecsErr != nil {
		t.Fatal(afSpecsErr)
	}
	return afSpecs
}

// afRun is a DAG run the fake holds; a nil time is null.
type afRun struct {
	id, state, runType string
	logical            *time.Time
	start, end         *time.Time // data interval
	began              *time.Time // start_date
	runAfter           time.Time
	conf               map[string]any
}

// fakeAF answers GET dagRuns as Airflow 2 (/api/v1, basic auth) or 3
// (/api/v2, a bearer token from POST /auth/token) does, in pages of at most
// pageCap runs. Any other request, a trigger included, is counted in
// others: the watcher must not start DAG runs on its own.
type fakeAF struct {
	t       *testing.T
	api     string
	doc     *openapi3.T
	pageCap int

	mu     sync.Mutex
	runs   []afRun
	pages  int
	others []string
	fail   int // 500s still to give
	token  string

	srv *httptest.Server
}

func newFakeAF(t *testing.T, api string) *fakeAF {
	t.Helper()
	f := &fakeAF{t: t, api: api, doc: loadAirflowSpecs(t)[api], pageCap: 2}
	f.srv = httptest.NewServer(f)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAF) job() *refill.AirflowJob {
	return &refill.AirflowJob{URL: f.srv.URL, DagID: afDAG, API: f.api, UsernameEnv: "AF_USER", PasswordEnv: "AF_PASS"}
}

func afClient(pass string) *airflow.Client {
	env := map[string]string{"AF_USER": afUser, "AF_PASS": pass}
	return &airflow.Client{HTTP: &http.Client{Timeout: 5 * time.Second}, Getenv: func(k string) string { return env[k] }}
}

// scheduled adds the run an interval timetable makes for [start,
// start+length): logical date and data interval start at start.
func (f *fakeAF) scheduled(start time.Time, length time.Duration, state string) {
	end := start.Add(length)
	began := end.Add(5 * time.Minute)
	f.add(afRun{id: "scheduled__" + start.Format(time.RFC3339), state: state, runType: "scheduled",
		logical: &start, start: &start, end: &end, began: &began, runAfter: end})
}

// triggered adds a run as airflow.Runner triggers it at at, for the
// partition [start, end): Airflow 2 makes the trigger time its logical
// date and infers a data interval from it; Airflow 3 leaves both null.
func (f *fakeAF) triggered(id string, at, start, end time.Time, state string) {
	r := afRun{id: id, state: state, runType: "manual", began: &at, runAfter: at,
		conf: map[string]any{"start_date": start.Format(time.RFC3339), "end_date": end.Format(time.RFC3339)}}
	if f.api == "v1" {
		ds, de := at.Truncate(24*time.Hour).Add(-24*time.Hour), at.Truncate(24*time.Hour)
		r.logical, r.start, r.end = &at, &ds, &de
	}
	f.add(r)
}

func (f *fakeAF) add(r afRun) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.conf == nil {
		r.conf = map[string]any{}
	}
	f.runs = append(f.runs, r)
}

func (f *fakeAF) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	list := "/api/" + f.api + "/dags/" + afDAG + "/dagRuns"
	switch {
	case f.api == "v2" && r.Method == http.MethodPost && r.URL.Path == "/auth/token":
		var lb struct{ Username, Password string }
		_ = json.NewDecoder(r.Body).Decode(&lb)
		if lb.Username != afUser || lb.Password != afPass {
			f.reply(w, nil, http.StatusUnauthorized, map[string]any{"detail": "Invalid credentials"})
			return
		}
		f.token = fmt.Sprintf("eyJhbGciOiJIUzUxMiJ9.fake-%d.sig", len(f.others)+f.pages+1)
		f.reply(w, nil, http.StatusCreated, map[string]any{"access_token": f.token})
	case r.Method == http.MethodGet && r.URL.Path == list:
		op := f.operation()
		if !f.authorized(r) {
			f.reply(w, op, http.StatusUnauthorized, f.errorBody(http.StatusUnauthorized, "Not authenticated"))
			return
		}
		if f.fail > 0 {
			f.fail--
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, "Internal Server Error")
			return
		}
		f.pages++
		f.reply(w, op, http.StatusOK, f.page(r, op))
	default:
		f.others = append(f.others, r.Method+" "+r.URL.Path)
		w.WriteHeader(http.StatusNotFound)
	}
}

func (f *fakeAF) operation() *openapi3.Operation {
	path := "/dags/{dag_id}/dagRuns"
	if f.api == "v2" {
		path = "/api/v2" + path
	}
	return f.doc.Paths.Value(path).Get
}

func (f *fakeAF) authorized(r *http.Request) bool {
	if f.api == "v1" {
		u, p, ok := r.BasicAuth()
		return ok && u == afUser && p == afPass
	}
	return f.token != "" && r.Header.Get("Authorization") == "Bearer "+f.token
}

func (f *fakeAF) errorBody(status int, detail string) any {
	if f.api == "v1" {
		return map[string]any{"type": "about:blank", "title": http.StatusText(status), "status": status, "detail": detail}
	}
	return map[string]any{"detail": detail}
}

// page filters and paginates the runs as Airflow does. Every query
// parameter must be one the operation declares.
func (f *fakeAF) page(r *http.Request, op *openapi3.Operation) map[string]any {
	q := r.URL.Query()
	for k := range q {
		if op.Parameters.GetByInAndName("query", k) == nil {
			f.t.Errorf("fake Airflow %s: query parameter %q is not in the spec", f.api, k)
		}
	}
	var match []afRun
	for _, run := range f.runs {
		if f.matches(q, run) {
			match = append(match, run)
		}
	}
	limit, _ := strconv.Atoi(q.Get("limit"))
	offset, _ := strconv.Atoi(q.Get("offset"))
	if limit <= 0 || limit > f.pageCap {
		limit = f.pageCap
	}
	out := []any{}
	for i := offset; i < len(match) && i < offset+limit; i++ {
		out = append(out, f.render(match[i]))
	}
	return map[string]any{"dag_runs": out, "total_entries": len(match)}
}

// matches applies the date filters; a null column matches nothing.
func (f *fakeAF) matches(q map[string][]string, run afRun) bool {
	cols := map[string]*time.Time{"logical_date": run.logical, "run_after": &run.runAfter}
	if f.api == "v1" {
		cols = map[string]*time.Time{"execution_date": run.logical}
	}
	for param, vals := range q {
		var col, op string
		switch {
		case strings.HasSuffix(param, "_gte"):
			col, op = strings.TrimSuffix(param, "_gte"), "gte"
		case strings.HasSuffix(param, "_lte"):
			col, op = strings.TrimSuffix(param, "_lte"), "lte"
		default:
			continue
		}
		v, ok := cols[col]
		bound, err := time.Parse(time.RFC3339, vals[0])
		if !ok || err != nil {
			f.t.Errorf("fake Airflow %s: filter %s=%s", f.api, param, vals[0])
			return false
		}
		if v == nil || (op == "gte" && v.Before(bound)) || (op == "lte" && v.After(bound)) {
			return false
		}
	}
	return true
}

func (f *fakeAF) render(run afRun) map[string]any {
	ts := func(t *time.Time) any {
		if t == nil {
			return nil
		}
		return t.Format("2006-01-02T15:04:05+00:00")
	}
	if f.api == "v1" {
		return map[string]any{
			"dag_id": afDAG, "dag_run_id": run.id, "conf": run.conf, "state": run.state,
			"logical_date": ts(run.logical), "execution_date": ts(run.logical), "start_date": ts(run.began), "end_date": nil,
			"data_interval_start": ts(run.start), "data_interval_end": ts(run.end), "last_scheduling_decision": nil,
			"run_type": run.runType, "external_trigger": run.runType == "manual", "note": nil,
		}
	}
	by := "timetable"
	if run.runType == "manual" {
		by = "rest_api"
	}
	return map[string]any{
		"dag_id": afDAG, "dag_display_name": afDAG, "dag_run_id": run.id, "conf": run.conf, "state": run.state,
		"logical_date": ts(run.logical), "run_after": ts(&run.runAfter), "queued_at": ts(&run.runAfter), "start_date": ts(run.began),
		"end_date": nil, "duration": nil, "data_interval_start": ts(run.start), "data_interval_end": ts(run.end),
		"last_scheduling_decision": nil, "run_type": run.runType, "triggered_by": by, "triggering_user_name": nil,
		"note": nil, "bundle_version": nil, "partition_key": nil,
		"dag_versions": []any{map[string]any{
			"id": "0b9d6a3e-5f0e-4c1b-9a52-2d7d1c6a8f10", "version_number": 1, "dag_id": afDAG,
			"dag_display_name": afDAG, "created_at": "2026-10-01T00:00:00+00:00", "bundle_name": "dags-folder",
			"bundle_url": nil, "bundle_version": nil,
		}},
	}
}

// reply sends body, after checking it against the schema op declares for
// status (the auth manager's answers, outside the core spec, are not).
func (f *fakeAF) reply(w http.ResponseWriter, op *openapi3.Operation, status int, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		f.t.Errorf("fake Airflow %s: %v", f.api, err)
	}
	if op != nil {
		f.check(op, status, b)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

func (f *fakeAF) check(op *openapi3.Operation, status int, b []byte) {
	resp := op.Responses.Status(status)
	if resp == nil || resp.Value == nil {
		f.t.Errorf("fake Airflow %s: the spec declares no HTTP %d for listing runs", f.api, status)
		return
	}
	mt := resp.Value.Content.Get("application/json")
	if mt == nil || mt.Schema == nil {
		f.t.Errorf("fake Airflow %s: HTTP %d has no JSON schema", f.api, status)
		return
	}
	var v any
	_ = json.Unmarshal(b, &v)
	if err := mt.Schema.Value.VisitJSON(v); err != nil {
		f.t.Errorf("fake Airflow %s: an answer the real API would not give: %v\n%s", f.api, err, b)
	}
}

func (f *fakeAF) requests() (pages int, others []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pages, slices.Clone(f.others)
}

func day(d int) time.Time { return time.Date(2026, 11, d, 0, 0, 0, 0, time.UTC) }

func airflowDataset(job *refill.AirflowJob, g refill.Grain) *refill.Dataset {
	return &refill.Dataset{Name: "events", Partition: refill.PartitionSpec{Grain: g},
		Job: &refill.Job{Kind: refill.JobAirflow, Airflow: job}}
}

func ask(t *testing.T, c *airflow.Client, d *refill.Dataset, from, to string) (failed, missing []string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return watch.AirflowRuns(c, "")(ctx, d, from, to)
}

// TestAirflowRunsAtDayGrain: the failed and the never-run days, with
// reruns — refill's own, and a clear in Airflow — deciding by which began
// last.
func TestAirflowRunsAtDayGrain(t *testing.T) {
	t.Parallel()
	for _, api := range []string{"v1", "v2"} {
		t.Run(api, func(t *testing.T) {
			f := newFakeAF(t, api)
			f.scheduled(day(1), 24*time.Hour, "success")
			f.scheduled(day(2), 24*time.Hour, "failed") // failed, never rerun
			// day 3: the scheduler never ran it (a paused DAG)
			f.scheduled(day(4), 24*time.Hour, "failed") // failed, then rerun by refill
			f.triggered("refill__p1__events__2026-11-04__r1", day(6).Add(9*time.Hour), day(4), day(5), "success")
			f.scheduled(day(5), 24*time.Hour, "success") // fine, then a rerun failed
			f.triggered("refill__p2__events__2026-11-05__r1", day(6).Add(10*time.Hour), day(5), day(6), "failed")
			f.scheduled(day(6), 24*time.Hour, "running")
			// day 7: not run yet either
			f.scheduled(day(8), 24*time.Hour, "failed") // outside the range
			failed, missing, err := ask(t, afClient(afPass), airflowDataset(f.job(), refill.GrainDay), "2026-11-01", "2026-11-07")
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(failed, " "); got != "2026-11-02 2026-11-05" {
				t.Errorf("failed %s, want 2026-11-02 2026-11-05", got)
			}
			if got := strings.Join(missing, " "); got != "2026-11-03 2026-11-07" {
				t.Errorf("missing %s, want 2026-11-03 2026-11-07", got)
			}
			if pages, others := f.requests(); pages < 4 || len(others) != 0 {
				t.Errorf("%d pages (pages of 2: want several), other requests %v", pages, others)
			}
		})
	}
}

// TestAirflowRunsAtHourGrain: the same at hour grain, over a day boundary.
func TestAirflowRunsAtHourGrain(t *testing.T) {
	t.Parallel()
	for _, api := range []string{"v1", "v2"} {
		t.Run(api, func(t *testing.T) {
			f := newFakeAF(t, api)
			base := day(1).Add(21 * time.Hour)
			for h, state := range []string{"success", "failed", "", "failed", "success", "queued"} {
				if state != "" {
					f.scheduled(base.Add(time.Duration(h)*time.Hour), time.Hour, state)
				}
			}
			// The 00:00 run of Nov 2 failed and refill reran it.
			f.triggered("refill__p1__events__2026-11-02T00__r1", day(2).Add(5*time.Hour), day(2), day(2).Add(time.Hour), "success")
			failed, missing, err := ask(t, afClient(afPass), airflowDataset(f.job(), refill.GrainHour), "2026-11-01T21", "2026-11-02T03")
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(failed, " "); got != "2026-11-01T22" {
				t.Errorf("failed %s, want 2026-11-01T22", got)
			}
			if got := strings.Join(missing, " "); got != "2026-11-01T23 2026-11-02T03" {
				t.Errorf("missing %s, want 2026-11-01T23 2026-11-02T03", got)
			}
		})
	}
}

// TestAirflowRunsErrors: refused credentials and a server error come back
// as errors that say so, with no secret in them.
func TestAirflowRunsErrors(t *testing.T) {
	t.Parallel()
	for _, api := range []string{"v1", "v2"} {
		t.Run(api, func(t *testing.T) {
			f := newFakeAF(t, api)
			f.scheduled(day(1), 24*time.Hour, "success")
			d := airflowDataset(f.job(), refill.GrainDay)
			_, _, err := ask(t, afClient("wrong-"+afPass), d, "2026-11-01", "2026-11-02")
			if err == nil || !strings.Contains(err.Error(), "HTTP 401") || !strings.Contains(err.Error(), "AF_USER/AF_PASS") || strings.Contains(err.Error(), afPass) {
				t.Errorf("refused credentials: %v", err)
			}
			f.mu.Lock()
			f.fail = 1
			f.mu.Unlock()
			_, _, err = ask(t, afClient(afPass), d, "2026-11-01", "2026-11-02")
			if err == nil || !strings.Contains(err.Error(), "HTTP 500") || strings.Contains(err.Error(), afPass) || strings.Contains(err.Error(), "eyJ") {
				t.Errorf("server error: %v", err)
			}
			if _, _, err := ask(t, afClient(afPass), d, "Nov 1", "2026-11-02"); !errors.Is(err, refill.ErrBadInput) {
				t.Errorf("bad partition: %v", err)
			}
		})
	}
}

// TestWatcherAsksAirflow: a scheduled airflow dataset with no table; the
// days whose DAG run failed or never ran are the gap, planned by the
// watcher, and — not auto — not run.
func TestWatcherAsksAirflow(t *testing.T) {
	t.Parallel()
	f := newFakeAF(t, "v1")
	// Due at now (2026-11-30 12:00, lag 2h, horizon 5): Nov 25..29.
	f.scheduled(day(25), 24*time.Hour, "success")
	f.scheduled(day(26), 24*time.Hour, "failed")
	// Nov 27: never ran.
	f.scheduled(day(28), 24*time.Hour, "success")
	f.scheduled(day(29), 24*time.Hour, "failed")
	f.triggered("refill__earlier__events__2026-11-29__r1", day(30).Add(9*time.Hour), day(29), day(30), "success")

	dir := t.TempDir()
	cfg := `version: 1
warehouse: sqlite:wh.db
users:
  alice: {roles: [engineer]}
datasets:
  events:
    schedule: {every: day, lag: 2h, horizon: 5}
    job:
      airflow: {url: "` + f.srv.URL + `", dag_id: ` + afDAG + `, api: v1, username_env: AF_USER, password_env: AF_PASS}
`
	if err := os.WriteFile(filepath.Join(dir, "refill.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "wh.db"), nil, 0o644); err != nil { // an empty SQLite database
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := project.Open(ctx, project.Options{Config: filepath.Join(dir, "refill.yaml"), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	applied := 0
	w := &watch.Watcher{Config: p.Config, Store: p.Store, Warehouse: p.Warehouse, Control: p.Control, Now: func() time.Time { return now },
		DAGRuns: watch.AirflowRuns(afClient(afPass), ""),
		Apply:   func(context.Context, string) error { applied++; return nil }}

	rep, err := w.Tick(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Gaps) != 1 {
		t.Fatalf("gaps %+v, want one", rep.Gaps)
	}
	g := rep.Gaps[0]
	if g.Dataset != "events" || g.From != "2026-11-26" || g.To != "2026-11-27" ||
		strings.Join(g.Failed, " ") != "2026-11-26" || strings.Join(g.Missing, " ") != "2026-11-27" {
		t.Errorf("gap %+v, want 2026-11-26 failed and 2026-11-27 missing", g)
	}
	d := one(t, rep)
	if d.PlanID == "" || d.Reason() != "1 partition missing, 1 partition failed: 2026-11-26..2026-11-27" {
		t.Errorf("decision %+v", d)
	}
	if d.Tier == refill.TierAuto {
		if d.Action != watch.Applied || applied != 1 {
			t.Errorf("an auto plan: %+v, applied %d times", d, applied)
		}
	} else if d.Action != watch.Planned || d.Status != refill.StatusPending || applied != 0 {
		t.Errorf("a %s plan: %+v, applied %d times; want planned, pending, not run", d.Tier, d, applied)
	}
	if _, others := f.requests(); len(others) != 0 {
		t.Errorf("the watcher sent Airflow %v; it may only list runs", others)
	}
	// The next tick waits on the same plan.
	if d2 := one(t, tick(t, w)); d2.PlanID != d.PlanID || (d.Tier != refill.TierAuto && d2.Action != watch.Waiting) {
		t.Errorf("second tick %+v", d2)
	}

	// Airflow failing is an error of the tick's, naming the dataset; the
	// other datasets are still looked at.
	f.mu.Lock()
	f.fail = 1
	f.mu.Unlock()
	rep, err = w.Tick(ctx)
	if err != nil || len(rep.Errors) != 1 || !strings.Contains(rep.Errors[0], "events: asking Airflow: ") || !strings.Contains(rep.Errors[0], "HTTP 500") {
		t.Errorf("tick while Airflow fails: %v %v", rep.Errors, err)
	}
}

func tick(t *testing.T, w *watch.Watcher) watch.Report {
	t.Helper()
	rep, err := w.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}
