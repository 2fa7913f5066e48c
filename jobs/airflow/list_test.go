package airflow

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
)

// opList is the fake's list operation, for counters and fault injection.
const opList = "list"

// listRun is a DAG run the list fake holds. A nil time is null in the
// answer.
type listRun struct {
	id, state, runType string
	logical            *time.Time
	start, end         *time.Time // data interval
	began              *time.Time // start_date
	runAfter           time.Time  // v2
	conf               map[string]any
}

// listFake is a fakeAirflow that also lists DAG runs: GET dagRuns with
// the filters DAGRuns uses, paginated as Airflow does, every request and
// answer checked against the spec by fakeAirflow.endpoint.
type listFake struct {
	*fakeAirflow
	list []listRun
	// pageCap is the server's [api] maximum_page_limit: a larger limit is
	// cut down to it (Airflow 2 and 3 both do so silently).
	pageCap int
	// queries are the query strings the fake was sent, in order.
	queries []url.Values
}

func newListFake(t testing.TB, api string) *listFake {
	t.Helper()
	f := &fakeAirflow{
		t: t, api: api, specs: loadSpecs(t), user: "airflow-user", pass: "s3cret-Pa55",
		runs: map[string]*fakeRun{}, created: map[string]int{}, calls: map[string]int{},
		fail: map[string]int{}, tokens: map[string]bool{},
	}
	lf := &listFake{fakeAirflow: f, pageCap: 100}
	mux := http.NewServeMux()
	if api == "v1" {
		mux.Handle("GET /api/v1/dags/{dag_id}/dagRuns", f.endpoint(f.specs.v1, "/dags/{dag_id}/dagRuns", opList, lf.serveList))
	} else {
		mux.Handle("GET /api/v2/dags/{dag_id}/dagRuns", f.endpoint(f.specs.v2, "/api/v2/dags/{dag_id}/dagRuns", opList, lf.serveList))
		mux.Handle("POST /auth/token", f.endpoint(f.specs.auth, "/auth/token", opLogin, f.login))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		f.problem("request to an endpoint a listing should not use: %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return lf
}

// add appends a run as the DAG's scheduler (or a trigger) would create it.
func (lf *listFake) add(r listRun) {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if r.runType == "" {
		r.runType = "scheduled"
	}
	if r.conf == nil {
		r.conf = map[string]any{}
	}
	if r.runAfter.IsZero() {
		switch {
		case r.end != nil:
			r.runAfter = *r.end
		case r.logical != nil:
			r.runAfter = *r.logical
		}
	}
	lf.list = append(lf.list, r)
}

// scheduled adds the scheduled run of the day (or hour) at start, of the
// given length, as an interval timetable makes it: logical date and data
// interval start at start.
func (lf *listFake) scheduled(start time.Time, length time.Duration, state string) {
	end := start.Add(length)
	began := end.Add(5 * time.Minute)
	lf.add(listRun{id: "scheduled__" + start.Format(time.RFC3339), state: state, logical: &start, start: &start, end: &end, began: &began})
}

// triggered adds a run as Run triggers it at at, for the partition
// [start, end): Airflow 2 gives it the trigger time as logical date and
// infers its data interval from that; Airflow 3 leaves both null.
func (lf *listFake) triggered(id string, at, start, end time.Time, state string) {
	r := listRun{id: id, state: state, runType: "manual", runAfter: at, began: &at,
		conf: map[string]any{"start_date": start.Format(time.RFC3339), "end_date": end.Format(time.RFC3339)}}
	if lf.api == "v1" {
		ds, de := at.Truncate(24*time.Hour).Add(-24*time.Hour), at.Truncate(24*time.Hour)
		r.logical, r.start, r.end = &at, &ds, &de
	}
	lf.add(r)
}

func (lf *listFake) serveList(r *http.Request, _ []byte) answer {
	q := r.URL.Query()
	lf.mu.Lock()
	defer lf.mu.Unlock()
	lf.queries = append(lf.queries, q)
	if dag := r.PathValue("dag_id"); dag != fakeDAG {
		if lf.api == "v1" {
			return answer{http.StatusOK, map[string]any{"dag_runs": []any{}, "total_entries": 0}}
		}
		return answer{http.StatusNotFound, lf.errorBody(http.StatusNotFound, fmt.Sprintf("The Dag with ID: `%s` was not found", dag))}
	}
	var match []listRun
	for _, run := range lf.list {
		if lf.matches(q, run) {
			match = append(match, run)
		}
	}
	limit, offset := 100, 0
	if lf.api == "v2" {
		limit = 50
	}
	if v := q.Get("limit"); v != "" {
		limit, _ = strconv.Atoi(v)
	}
	if v := q.Get("offset"); v != "" {
		offset, _ = strconv.Atoi(v)
	}
	limit = min(limit, lf.pageCap)
	page := []any{}
	for i := offset; i < len(match) && i < offset+limit; i++ {
		page = append(page, lf.render(match[i]))
	}
	return answer{http.StatusOK, map[string]any{"dag_runs": page, "total_entries": len(match)}}
}

// matches applies the date filters as Airflow's SQL does: a null column
// matches no comparison.
func (lf *listFake) matches(q url.Values, run listRun) bool {
	cols := map[string]*time.Time{"logical_date": run.logical, "run_after": &run.runAfter}
	if lf.api == "v1" {
		cols = map[string]*time.Time{"execution_date": run.logical}
	}
	for param, vals := range q {
		col, op, ok := strings.Cut(param, "_gte")
		if !ok || op != "" {
			col, op, ok = strings.Cut(param, "_lte")
			if !ok || op != "" {
				continue
			}
			op = "lte"
		} else {
			op = "gte"
		}
		v, known := cols[col]
		if !known {
			lf.problem("filter %s the fake does not know", param)
			continue
		}
		bound, err := time.Parse(time.RFC3339, vals[0])
		if err != nil {
			lf.problem("filter %s=%s: %v", param, vals[0], err)
			return false
		}
		if v == nil || (op == "gte" && v.Before(bound)) || (op == "lte" && v.After(bound)) {
			return false
		}
	}
	return true
}

// render is a run as DAGRun (v1) or DAGRunResponse (v2), with every field
// the real server fills.
func (lf *listFake) render(run listRun) map[string]any {
	ts := func(t *time.Time) any {
		if t == nil {
			return nil
		}
		return t.Format("2006-01-02T15:04:05.000000-07:00")
	}
	var end any
	if run.state == "success" || run.state == "failed" {
		if run.began != nil {
			end = ts(new(run.began.Add(10 * time.Minute)))
		}
	}
	if lf.api == "v1" {
		return map[string]any{
			"dag_id": fakeDAG, "dag_run_id": run.id, "conf": run.conf, "state": run.state,
			"logical_date": ts(run.logical), "execution_date": ts(run.logical), "start_date": ts(run.began), "end_date": end,
			"data_interval_start": ts(run.start), "data_interval_end": ts(run.end), "last_scheduling_decision": nil,
			"run_type": run.runType, "external_trigger": run.runType == "manual", "note": nil,
		}
	}
	triggeredBy := "timetable"
	if run.runType == "manual" {
		triggeredBy = "rest_api"
	}
	return map[string]any{
		"dag_id": fakeDAG, "dag_display_name": fakeDAG, "dag_run_id": run.id, "conf": run.conf, "state": run.state,
		"logical_date": ts(run.logical), "run_after": ts(&run.runAfter), "queued_at": ts(&run.runAfter), "start_date": ts(run.began),
		"end_date": end, "duration": nil, "data_interval_start": ts(run.start), "data_interval_end": ts(run.end),
		"last_scheduling_decision": nil, "run_type": run.runType, "triggered_by": triggeredBy, "triggering_user_name": nil,
		"note": nil, "bundle_version": nil, "partition_key": nil,
		"dag_versions": []any{map[string]any{
			"id": "0b9d6a3e-5f0e-4c1b-9a52-2d7d1c6a8f10", "version_number": 1, "dag_id": fakeDAG,
			"dag_display_name": fakeDAG, "created_at": "2026-10-01T00:00:00+00:00", "bundle_name": "dags-folder",
			"bundle_url": nil, "bundle_version": nil,
		}},
	}
}

func day(d int) time.Time { return time.Date(2026, 11, d, 0, 0, 0, 0, time.UTC) }

func listAll(t *testing.T, c *Client, job *refill.AirflowJob, from, to time.Time) ([]DAGRun, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.DAGRuns(ctx, job, from, to)
}

func runIDs(runs []DAGRun) string {
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.RunID
	}
	return strings.Join(ids, " ")
}

// TestDAGRunsListsTheRange: the scheduled runs whose logical date is in
// the range, and the runs refill triggered (whose logical date is their
// trigger time in v1, and null in v2), with every field decoded.
func TestDAGRunsListsTheRange(t *testing.T) {
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			lf := newListFake(t, api)
			for d := 1; d <= 6; d++ {
				lf.scheduled(day(d), 24*time.Hour, "success")
			}
			at := day(7).Add(9 * time.Hour)
			lf.triggered("refill__p1__events__2026-11-03__r1", at, day(3), day(4), "failed")
			job, env := lf.job()
			runs, err := listAll(t, newClient(env), job, day(2), day(7).Add(23*time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			want := "scheduled__2026-11-02T00:00:00Z scheduled__2026-11-03T00:00:00Z scheduled__2026-11-04T00:00:00Z " +
				"scheduled__2026-11-05T00:00:00Z scheduled__2026-11-06T00:00:00Z refill__p1__events__2026-11-03__r1"
			if got := runIDs(runs); got != want {
				t.Fatalf("runs\n %s\nwant\n %s", got, want)
			}
			s := runs[0]
			if s.State != "success" || !s.LogicalDate.Equal(day(2)) || !s.DataIntervalStart.Equal(day(2)) ||
				!s.DataIntervalEnd.Equal(day(3)) || !s.StartDate.Equal(day(3).Add(5*time.Minute)) ||
				!s.IntervalStart().Equal(day(2)) || s.LogicalDate.Location() != time.UTC {
				t.Errorf("scheduled run %+v", s)
			}
			r := runs[len(runs)-1]
			if r.State != "failed" || !r.ConfStart.Equal(day(3)) || !r.ConfEnd.Equal(day(4)) || !r.IntervalStart().Equal(day(3)) || !r.Began().Equal(at) {
				t.Errorf("refill's run %+v: interval start %s", r, r.IntervalStart())
			}
			if api == "v2" && (!r.LogicalDate.IsZero() || !r.RunAfter.Equal(at)) {
				t.Errorf("v2 refill run: logical date %s, run_after %s", r.LogicalDate, r.RunAfter)
			}
			// Open ends.
			runs, err = listAll(t, newClient(env), job, day(5), time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if got := runIDs(runs); got != "scheduled__2026-11-05T00:00:00Z scheduled__2026-11-06T00:00:00Z refill__p1__events__2026-11-03__r1" {
				t.Errorf("from day 5 on: %s", got)
			}
			lf.mu.Lock()
			q := lf.queries[len(lf.queries)-1]
			lf.mu.Unlock()
			for k := range q {
				if strings.HasSuffix(k, "_lte") {
					t.Errorf("an open end sent %s", k)
				}
			}
		})
	}
}

// TestDAGRunsFollowsPages: a server whose maximum page is 3 answers 8
// runs in three pages, and each v2 login serves them all.
func TestDAGRunsFollowsPages(t *testing.T) {
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			lf := newListFake(t, api)
			lf.pageCap = 3
			for h := 0; h < 8; h++ {
				lf.scheduled(day(1).Add(time.Duration(h)*time.Hour), time.Hour, "success")
			}
			job, env := lf.job()
			runs, err := listAll(t, newClient(env), job, day(1), day(2))
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) != 8 || runs[7].RunID != "scheduled__2026-11-01T07:00:00Z" {
				t.Fatalf("%d runs: %s", len(runs), runIDs(runs))
			}
			lf.mu.Lock()
			defer lf.mu.Unlock()
			var offsets []string
			for _, q := range lf.queries {
				offsets = append(offsets, q.Get("offset"))
				if q.Get("limit") != "100" {
					t.Errorf("limit %q", q.Get("limit"))
				}
			}
			want := "0 3 6"
			if api == "v2" {
				// and again by run_after, for runs without a logical date
				// (these have one, and are not listed twice)
				want = "0 3 6 0 3 6"
			}
			if got := strings.Join(offsets, " "); got != want {
				t.Errorf("offsets %s, want %s", got, want)
			}
			if api == "v2" && lf.calls[opLogin] != 1 {
				t.Errorf("%d logins for one listing", lf.calls[opLogin])
			}
		})
	}
}

// TestDAGRunsBoundsPages: a listing that would need more than
// MaxListPages pages stops, and says so.
func TestDAGRunsBoundsPages(t *testing.T) {
	lf := newListFake(t, "v1")
	lf.pageCap = 1
	for i := 0; i <= MaxListPages; i++ {
		lf.scheduled(day(1).Add(time.Duration(i)*time.Hour), time.Hour, "success")
	}
	job, env := lf.job()
	_, err := listAll(t, newClient(env), job, day(1), time.Time{})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d pages", MaxListPages)) || !strings.Contains(err.Error(), "narrow the range") {
		t.Fatalf("err = %v", err)
	}
	if n := lf.count(opList); n != MaxListPages {
		t.Errorf("%d pages read, want %d", n, MaxListPages)
	}
}

// TestDAGRunsErrors: refused credentials, a server error and an unknown DAG
// say what happened, which are permanent, and never carry a secret.
func TestDAGRunsErrors(t *testing.T) {
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			lf := newListFake(t, api)
			lf.scheduled(day(1), 24*time.Hour, "success")
			job, env := lf.job()

			wrong := func(k string) string {
				if k == "AF_PASS" {
					return "not-" + lf.pass
				}
				return env(k)
			}
			_, err := listAll(t, newClient(wrong), job, day(1), day(2))
			noSecrets(t, lf.fakeAirflow, err)
			if err == nil || !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), "HTTP 401") ||
				!strings.Contains(err.Error(), "AF_USER/AF_PASS") || strings.Contains(err.Error(), "not-") {
				t.Errorf("wrong password: %v", err)
			}

			lf.failNext(opList, 1)
			_, err = listAll(t, newClient(env), job, day(1), day(2))
			noSecrets(t, lf.fakeAirflow, err)
			if err == nil || errors.Is(err, refill.ErrBadInput) || err.Error() != fmt.Sprintf("airflow dag %q: list DAG runs: HTTP 500 Internal Server Error", fakeDAG) {
				t.Errorf("server error: %v", err)
			}

			other := *job
			other.DagID = "no_such_dag"
			runs, err := listAll(t, newClient(env), &other, day(1), day(2))
			switch api {
			case "v1": // Airflow 2 filters by the DAG: none of its runs
				if err != nil || len(runs) != 0 {
					t.Errorf("unknown DAG: %v %v", runs, err)
				}
			case "v2":
				if err == nil || !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), "HTTP 404 Not Found: The Dag with ID: `no_such_dag` was not found") {
					t.Errorf("unknown DAG: %v", err)
				}
			}
		})
	}
}

// TestDAGRunsBadInput: configuration mistakes fail before any request, and
// name the DAG, not a run.
func TestDAGRunsBadInput(t *testing.T) {
	lf := newListFake(t, "v1")
	job, env := lf.job()
	c := newClient(func(string) string { return "" })
	_, err := listAll(t, c, job, day(1), day(2))
	if err == nil || !errors.Is(err, refill.ErrBadInput) || err.Error() != `airflow dag "events_daily_dag": the Airflow credentials are missing: environment variables AF_USER and AF_PASS are not set` {
		t.Errorf("no credentials: %v", err)
	}
	bad := *job
	bad.URL = "ftp://user:hunter2@af"
	if _, err := listAll(t, newClient(env), &bad, day(1), day(2)); err == nil || !errors.Is(err, refill.ErrBadInput) || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), " run ") {
		t.Errorf("bad URL: %v", err)
	}
	if _, err := listAll(t, newClient(env), job, day(2), day(1)); err == nil || !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), "ends (2026-11-01T00:00:00Z) before it starts") {
		t.Errorf("reversed range: %v", err)
	}
	if n := lf.count(opList); n != 0 {
		t.Errorf("%d requests for bad input", n)
	}
}

// TestDAGRunsRefusesBadAnswers: an answer that is not what Airflow sends
// (from a proxy, or a server that is not Airflow) is an error naming what
// is missing, not an empty listing.
func TestDAGRunsRefusesBadAnswers(t *testing.T) {
	const good = `"dag_run_id": "r1", "state": "success", "logical_date": "2026-11-01T00:00:00+00:00", "run_after": "2026-11-02T00:00:00+00:00"`
	for _, tc := range []struct{ name, api, body, want string }{
		{"not JSON", "v1", `<html>oops</html>`, "decoding the DAG runs"},
		{"no dag_runs", "v1", `{"total_entries": 1}`, "the answer has no dag_runs"},
		{"null dag_runs", "v2", `{"dag_runs": null, "total_entries": 0}`, "the answer has no dag_runs"},
		{"no total_entries", "v1", `{"dag_runs": []}`, "the answer has no total_entries"},
		{"no run ID", "v1", `{"dag_runs": [{"state": "success", "logical_date": "2026-11-01T00:00:00+00:00"}], "total_entries": 1}`, "dag_runs[0]: a DAG run has no dag_run_id"},
		{"no state", "v2", `{"dag_runs": [{"dag_run_id": "r1", "run_after": "2026-11-01T00:00:00Z"}], "total_entries": 1}`, `dag_runs[0]: DAG run "r1" has no state`},
		{"v1 no logical date", "v1", `{"dag_runs": [{"dag_run_id": "r1", "state": "failed", "logical_date": null}], "total_entries": 1}`, `DAG run "r1" has no logical_date`},
		{"v2 no run_after", "v2", `{"dag_runs": [{"dag_run_id": "r1", "state": "failed", "logical_date": null}], "total_entries": 1}`, `DAG run "r1" has no run_after`},
		{"bad time", "v1", `{"dag_runs": [{"dag_run_id": "r1", "state": "failed", "logical_date": "2026-11-01T00:00:00+00:00", "start_date": "yesterday"}], "total_entries": 1}`, `DAG run "r1": start_date "yesterday" is not an RFC 3339 timestamp`},
		{"second page bad", "v1", ``, `(offset 1) answered HTTP 200: dag_runs[0]: DAG run "r2" has no state`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/auth/token" {
					w.WriteHeader(http.StatusCreated)
					fmt.Fprint(w, `{"access_token": "tok"}`)
					return
				}
				body := tc.body
				if body == "" {
					body = `{"dag_runs": [{` + good + `}], "total_entries": 2}`
					if r.URL.Query().Get("offset") != "0" {
						body = `{"dag_runs": [{"dag_run_id": "r2", "logical_date": "2026-11-02T00:00:00Z"}], "total_entries": 2}`
					}
				}
				fmt.Fprint(w, body)
			}))
			defer srv.Close()
			job := &refill.AirflowJob{URL: srv.URL, DagID: fakeDAG, API: tc.api}
			_, err := listAll(t, newClient(nil), job, day(1), day(2))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), `airflow dag "events_daily_dag": list DAG runs`) {
				t.Errorf("err = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// TestDAGRunsTokenExpires: a v2 token refused midway is renewed once, and
// the listing goes on.
func TestDAGRunsTokenExpires(t *testing.T) {
	lf := newListFake(t, "v2")
	lf.pageCap = 1
	for d := 1; d <= 3; d++ {
		lf.scheduled(day(d), 24*time.Hour, "success")
	}
	job, env := lf.job()
	pages := 0
	lf.before = func(r *http.Request) {
		if r.Method == http.MethodGet {
			if pages++; pages == 2 {
				lf.revokeTokens()
			}
		}
	}
	runs, err := listAll(t, newClient(env), job, day(1), day(3))
	if err != nil || len(runs) != 3 {
		t.Fatalf("%d runs, %v", len(runs), err)
	}
	if n := lf.count(opLogin); n != 2 {
		t.Errorf("%d logins, want 2", n)
	}
}

func TestConfBounds(t *testing.T) {
	for _, tc := range []struct {
		conf       string
		start, end time.Time
	}{
		{`{"start_date": "2026-11-01T00:00:00Z", "end_date": "2026-11-02T00:00:00Z"}`, day(1), day(2)},
		{`{"start_date": "2026-11-01T01:00:00+01:00"}`, day(1), time.Time{}},
		{`{"start_date": "2026-11-03"}`, day(3), time.Time{}},
		{`{"start_date": 20261101}`, time.Time{}, time.Time{}},
		{`{"start_date": "last tuesday"}`, time.Time{}, time.Time{}},
		{`null`, time.Time{}, time.Time{}},
		{`[1]`, time.Time{}, time.Time{}},
		{``, time.Time{}, time.Time{}},
	} {
		s, e := confBounds([]byte(tc.conf))
		if !s.Equal(tc.start) || !e.Equal(tc.end) {
			t.Errorf("%s: %s %s, want %s %s", tc.conf, s, e, tc.start, tc.end)
		}
	}
}
