package airflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refill-dev/refill"
)

const (
	testRunID = "refill__p7f3a__events_daily__2026-11-01"
	testStart = "2026-11-01T00:00:00Z"
	testEnd   = "2026-11-02T00:00:00Z"
)

var apis = []string{"v1", "v2"}

// newClient polls every few milliseconds so that the tests stay fast.
func newClient(getenv func(string) string) *Client {
	return &Client{HTTP: &http.Client{Timeout: 5 * time.Second}, PollInterval: 2 * time.Millisecond, Getenv: getenv}
}

func run(t *testing.T, c *Client, job *refill.AirflowJob, runID string) (Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Run(ctx, job, runID, testStart, testEnd)
}

// noSecrets fails the test if err's text carries the fake's password or
// any token it issued.
func noSecrets(t *testing.T, f *fakeAirflow, err error) {
	t.Helper()
	if err == nil {
		return
	}
	msg := err.Error()
	if strings.Contains(msg, f.pass) || strings.Contains(msg, "eyJ") {
		t.Errorf("error text leaks a credential: %s", msg)
	}
}

func TestRunSucceeds(t *testing.T) {
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			f := newFake(t, api)
			f.queuedFor, f.runningFor = 1, 2
			job, env := f.job()
			job.URL += "/" // a trailing slash must not double the path's
			res, err := run(t, newClient(env), job, testRunID)
			if err != nil {
				t.Fatal(err)
			}
			// One poll sees it queued, two running, the fourth success.
			want := Result{DagRunID: testRunID, State: "success", Created: true, Polls: 4}
			if res != want {
				t.Errorf("result %+v, want %+v", res, want)
			}
			if n := f.createdRuns(testRunID); n != 1 {
				t.Errorf("%d runs created, want 1", n)
			}
			f.mu.Lock()
			conf := f.runs[job.DagID+"\x00"+testRunID].conf
			f.mu.Unlock()
			if conf["start_date"] != testStart || conf["end_date"] != testEnd || len(conf) != 2 {
				t.Errorf("conf %v, want start_date %s and end_date %s", conf, testStart, testEnd)
			}
		})
	}
}

func TestV1SendsBasicAuth(t *testing.T) {
	f := newFake(t, "v1")
	var mu sync.Mutex
	var seen []string
	f.before = func(r *http.Request) {
		u, p, ok := r.BasicAuth()
		mu.Lock()
		seen = append(seen, fmt.Sprint(ok, u == f.user, p == f.pass))
		mu.Unlock()
	}
	job, env := f.job()
	if _, err := run(t, newClient(env), job, testRunID); err != nil {
		t.Fatal(err)
	}
	if len(seen) < 2 {
		t.Fatalf("%d requests, want a trigger and a poll at least", len(seen))
	}
	for i, s := range seen {
		if s != "true true true" {
			t.Errorf("request %d: basic auth present, user and password right = %s", i, s)
		}
	}

	t.Run("wrong password", func(t *testing.T) {
		f := newFake(t, "v1")
		job, _ := f.job()
		_, err := run(t, newClient(func(k string) string { return map[string]string{"AF_USER": f.user, "AF_PASS": "wrong-pass"}[k] }), job, testRunID)
		if !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "AF_USER/AF_PASS") {
			t.Errorf("err = %v, want bad input naming HTTP 401 and the variables", err)
		}
		if strings.Contains(err.Error(), "wrong-pass") {
			t.Errorf("error text leaks the password: %v", err)
		}
		if n := f.createdRuns(testRunID); n != 0 {
			t.Errorf("%d runs created by an unauthenticated client", n)
		}
	})
}

func TestV2TokenFlow(t *testing.T) {
	f := newFake(t, "v2")
	f.runningFor = 3
	var mu sync.Mutex
	var auths []string
	gets := 0
	f.before = func(r *http.Request) {
		if r.URL.Path == "/auth/token" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		auths = append(auths, r.Header.Get("Authorization"))
		if r.Method == http.MethodGet {
			gets++
			if gets == 2 {
				f.revokeTokens() // the token expires mid-run
			}
		}
	}
	job, env := f.job()
	c := newClient(env)
	res, err := run(t, c, job, testRunID)
	if err != nil {
		t.Fatal(err)
	}
	if res.State != "success" || !res.Created {
		t.Errorf("result %+v, want a created, successful run", res)
	}
	if n := f.count(opLogin); n != 2 {
		t.Errorf("%d logins, want 2: one at the start, one after the token expired", n)
	}
	for i, a := range auths {
		if !strings.HasPrefix(a, "Bearer eyJ") {
			t.Errorf("API request %d has Authorization %q, want a bearer token", i, a)
		}
	}

	// A second partition on the same client reuses the token.
	if _, err := run(t, c, job, testRunID+"x"); err != nil {
		t.Fatal(err)
	}
	if n := f.count(opLogin); n != 2 {
		t.Errorf("%d logins after a second run, want the cached token reused", n)
	}

	t.Run("wrong password", func(t *testing.T) {
		f := newFake(t, "v2")
		job, _ := f.job()
		_, err := run(t, newClient(func(k string) string { return map[string]string{"AF_USER": f.user, "AF_PASS": "wrong-pass"}[k] }), job, testRunID)
		if !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "AF_USER/AF_PASS") {
			t.Errorf("err = %v, want bad input naming HTTP 401 and the variables", err)
		}
		if strings.Contains(err.Error(), "wrong-pass") {
			t.Errorf("error text leaks the password: %v", err)
		}
		if f.count(opTrigger) != 0 {
			t.Error("the client triggered without a token")
		}
	})

	t.Run("no credentials configured", func(t *testing.T) {
		f := newFake(t, "v2")
		job, _ := f.job()
		job.UsernameEnv, job.PasswordEnv = "", ""
		_, err := run(t, newClient(nil), job, testRunID)
		if !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), "username_env") {
			t.Errorf("err = %v, want bad input asking for username_env", err)
		}
		f.allAdmins = true // simple_auth_manager_all_admins: anyone is admin
		if _, err := run(t, newClient(nil), job, testRunID); err != nil {
			t.Errorf("with all_admins on: %v", err)
		}
	})
}

func TestRunFailed(t *testing.T) {
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			f := newFake(t, api)
			f.runningFor, f.finalState = 1, "failed"
			job, env := f.job()
			res, err := run(t, newClient(env), job, testRunID)
			if !errors.Is(err, ErrRunFailed) {
				t.Fatalf("err = %v, want ErrRunFailed", err)
			}
			if !strings.Contains(err.Error(), job.DagID) || !strings.Contains(err.Error(), testRunID) {
				t.Errorf("error %q does not name the DAG and run", err)
			}
			if res.State != "failed" || res.Polls != 2 {
				t.Errorf("result %+v, want state failed after 2 polls", res)
			}
		})
	}
}

func TestConflictFollowsExistingRun(t *testing.T) {
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			f := newFake(t, api)
			f.runningFor = 1
			job, env := f.job()
			f.seed(job.DagID, testRunID, "running") // an attempt before a crash
			res, err := run(t, newClient(env), job, testRunID)
			if err != nil {
				t.Fatal(err)
			}
			want := Result{DagRunID: testRunID, State: "success", Created: false, Polls: 2}
			if res != want {
				t.Errorf("result %+v, want %+v", res, want)
			}
			if n := f.createdRuns(testRunID); n != 1 {
				t.Errorf("%d runs with the ID, want the seeded one alone", n)
			}
			if n := f.count(opTrigger); n != 1 {
				t.Errorf("%d triggers, want 1", n)
			}
		})
	}
}

// TestRetryAfterServerError is River's retry: the first attempt fails on a
// 500 after Airflow created the run, the second must follow that run.
func TestRetryAfterServerError(t *testing.T) {
	for _, api := range apis {
		for _, op := range []string{opTrigger, opGet} {
			t.Run(api+"/"+op, func(t *testing.T) {
				f := newFake(t, api)
				f.runningFor = 1
				f.failNext(op, 1)
				job, env := f.job()
				c := newClient(env)
				_, err := run(t, c, job, testRunID)
				if err == nil {
					t.Fatal("the first attempt succeeded through a 500")
				}
				if errors.Is(err, refill.ErrBadInput) || errors.Is(err, ErrRunFailed) {
					t.Errorf("err = %v: a 500 must stay retryable", err)
				}
				for _, s := range []string{"500", job.DagID, testRunID} {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %s", err, s)
					}
				}
				res, err := run(t, c, job, testRunID)
				if err != nil {
					t.Fatalf("retry: %v", err)
				}
				if res.Created || res.State != "success" {
					t.Errorf("retry result %+v, want the existing run followed to success", res)
				}
				if n := f.createdRuns(testRunID); n != 1 {
					t.Errorf("%d runs created, want 1", n)
				}
			})
		}
	}
}

func TestSlowServer(t *testing.T) {
	for _, api := range apis {
		t.Run(api+"/context deadline", func(t *testing.T) {
			f := newFake(t, api)
			f.delay = 5 * time.Second
			job, env := f.job()
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			began := time.Now()
			_, err := newClient(env).Run(ctx, job, testRunID, testStart, testEnd)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v, want a deadline error", err)
			}
			if errors.Is(err, refill.ErrBadInput) {
				t.Errorf("err = %v: a timeout must stay retryable", err)
			}
			if d := time.Since(began); d > 2*time.Second {
				t.Errorf("Run took %v to notice its deadline", d)
			}
		})
		t.Run(api+"/http timeout", func(t *testing.T) {
			f := newFake(t, api)
			f.delay = 5 * time.Second
			job, env := f.job()
			c := newClient(env)
			c.HTTP = &http.Client{Timeout: 50 * time.Millisecond}
			_, err := c.Run(context.Background(), job, testRunID, testStart, testEnd)
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Errorf("err = %v, want a timeout", err)
			}
			if !strings.Contains(err.Error(), job.DagID) {
				t.Errorf("error %q does not name the DAG", err)
			}
		})
	}
}

func TestContextEndsWhilePolling(t *testing.T) {
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			f := newFake(t, api)
			f.runningFor = 1 << 30
			job, env := f.job()
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Millisecond)
			defer cancel()
			res, err := newClient(env).Run(ctx, job, testRunID, testStart, testEnd)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want a deadline error", err)
			}
			if res.State != "running" || res.Polls == 0 || !res.Created {
				t.Errorf("result %+v, want a created run seen running", res)
			}
		})
	}
}

func TestMissingCredentials(t *testing.T) {
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			f := newFake(t, api)
			job, _ := f.job()
			_, err := run(t, newClient(func(k string) string { return map[string]string{"AF_USER": f.user}[k] }), job, testRunID)
			if !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), "AF_PASS") || strings.Contains(err.Error(), "AF_USER and") {
				t.Errorf("err = %v, want bad input naming AF_PASS alone", err)
			}
			if n := f.count(opTrigger) + f.count(opLogin); n != 0 {
				t.Errorf("%d requests sent without credentials", n)
			}
		})
	}
}

func TestBadInputFailsBeforeAnyRequest(t *testing.T) {
	// No request may be sent, so any server will do: this one counts them
	// (and needs none of the outside specs the fake checks against).
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Error(w, "no request was expected", http.StatusTeapot)
	}))
	defer srv.Close()
	f := struct{ srv *httptest.Server }{srv}
	job := &refill.AirflowJob{URL: srv.URL, DagID: "d", API: "v1"}
	c := newClient(func(string) string { return "" })
	cases := []struct {
		name       string
		job        *refill.AirflowJob
		runID      string
		start, end string
	}{
		{"nil job", nil, testRunID, testStart, testEnd},
		{"run id with a slash", job, "refill__p__ds__2026/11/01", testStart, testEnd},
		{"run id too long", job, strings.Repeat("r", 251), testStart, testEnd},
		{"empty run id", job, "", testStart, testEnd},
		{"date, not a timestamp", job, testRunID, "2026-11-01", testEnd},
		{"unknown api", &refill.AirflowJob{URL: f.srv.URL, DagID: "d", API: "v3"}, testRunID, testStart, testEnd},
		{"no url", &refill.AirflowJob{DagID: "d", API: "v1"}, testRunID, testStart, testEnd},
		{"no dag", &refill.AirflowJob{URL: f.srv.URL, API: "v1"}, testRunID, testStart, testEnd},
		{"half the credentials", &refill.AirflowJob{URL: f.srv.URL, DagID: "d", UsernameEnv: "AF_USER"}, testRunID, testStart, testEnd},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Run(context.Background(), tc.job, tc.runID, tc.start, tc.end)
			if !errors.Is(err, refill.ErrBadInput) {
				t.Errorf("err = %v, want bad input", err)
			}
		})
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests sent for bad input", n)
	}
}

func TestUnknownDAGIsBadInput(t *testing.T) {
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			f := newFake(t, api)
			job, env := f.job()
			job.DagID = "no_such_dag"
			_, err := run(t, newClient(env), job, testRunID)
			if !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), "HTTP 404") || !strings.Contains(err.Error(), "DAG with dag_id: 'no_such_dag' not found") {
				t.Errorf("err = %v, want bad input with the 404 and Airflow's detail", err)
			}
		})
	}
}

// TestRunVanishes covers a run deleted while refill polls it (or, on
// Airflow 2, a 409 about the logical date rather than the run ID). The 404
// is retryable: a later attempt triggers the run afresh.
func TestRunVanishes(t *testing.T) {
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			f := newFake(t, api)
			job, env := f.job()
			f.before = func(r *http.Request) {
				if r.Method == http.MethodGet && r.URL.Path != "/auth/token" {
					f.mu.Lock()
					clear(f.runs)
					f.mu.Unlock()
				}
			}
			_, err := run(t, newClient(env), job, testRunID)
			if err == nil || errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), "HTTP 404") || !strings.Contains(err.Error(), "not found") {
				t.Errorf("err = %v, want a retryable error with the 404 and Airflow's detail", err)
			}
		})
	}
}

// TestSecretsAreRedacted covers a server that echoes the password back in
// an error: the detail is quoted, the password is not.
func TestSecretsAreRedacted(t *testing.T) {
	const pass = "hunter2-very-secret"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, p, _ := r.BasicAuth()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"type":"about:blank","title":"Bad Request","status":400,"detail":"password %s is weak"}`, p)
	}))
	defer srv.Close()
	job := &refill.AirflowJob{URL: srv.URL, DagID: "d", API: "v1", UsernameEnv: "U", PasswordEnv: "P"}
	c := newClient(func(k string) string { return map[string]string{"U": "u", "P": pass}[k] })
	_, err := c.Run(context.Background(), job, testRunID, testStart, testEnd)
	if err == nil || strings.Contains(err.Error(), pass) || !strings.Contains(err.Error(), "password *** is weak") {
		t.Errorf("err = %v, want the detail with the password blanked", err)
	}
	if !errors.Is(err, refill.ErrBadInput) {
		t.Errorf("err = %v: a 400 will not heal by retrying", err)
	}
}

// TestSpecsCatchBadBodies proves that the fakes' checks have teeth: each
// body here is one the real API refuses (or never sends), and the check
// must say so. Without this, a validator that accepts anything would let
// every other test pass.
func TestSpecsCatchBadBodies(t *testing.T) {
	v1, v2 := newFake(t, "v1"), newFake(t, "v2")
	s := loadSpecs(t)
	reqs := []struct {
		name string
		f    *fakeAirflow
		path string
		url  string
		body string
		ok   bool
	}{
		{"v1 client body", v1, "/dags/{dag_id}/dagRuns", "/api/v1/dags/d/dagRuns",
			`{"dag_run_id":"r","conf":{"start_date":"2026-11-01T00:00:00Z","end_date":"2026-11-02T00:00:00Z"}}`, true},
		{"v1 readOnly state", v1, "/dags/{dag_id}/dagRuns", "/api/v1/dags/d/dagRuns", `{"dag_run_id":"r","state":"queued"}`, false},
		{"v1 conf not an object", v1, "/dags/{dag_id}/dagRuns", "/api/v1/dags/d/dagRuns", `{"dag_run_id":"r","conf":"x"}`, false},
		{"v1 bad logical_date", v1, "/dags/{dag_id}/dagRuns", "/api/v1/dags/d/dagRuns", `{"dag_run_id":"r","logical_date":"yesterday"}`, false},
		{"v2 client body", v2, "/api/v2/dags/{dag_id}/dagRuns", "/api/v2/dags/d/dagRuns",
			`{"dag_run_id":"r","logical_date":null,"conf":{"start_date":"2026-11-01T00:00:00Z"}}`, true},
		{"v2 without logical_date", v2, "/api/v2/dags/{dag_id}/dagRuns", "/api/v2/dags/d/dagRuns", `{"dag_run_id":"r","conf":{}}`, false},
		{"v2 removed execution_date", v2, "/api/v2/dags/{dag_id}/dagRuns", "/api/v2/dags/d/dagRuns", `{"dag_run_id":"r","logical_date":null,"execution_date":null}`, false},
		{"login without password", v2, "/auth/token", "/auth/token", `{"username":"u"}`, false},
		{"login with extra field", v2, "/auth/token", "/auth/token", `{"username":"u","password":"p","scope":"x"}`, false},
	}
	for _, tc := range reqs {
		t.Run(tc.name, func(t *testing.T) {
			doc := s.v1
			if tc.f.api == "v2" {
				doc = s.v2
				if tc.path == "/auth/token" {
					doc = s.auth
				}
			}
			r := httptest.NewRequest(http.MethodPost, tc.url, strings.NewReader(tc.body))
			r.Header.Set("Content-Type", "application/json")
			r.SetPathValue("dag_id", "d")
			input, err := tc.f.route(doc, tc.path, r, []byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			err = validateRequest(input, []byte(tc.body))
			if (err == nil) != tc.ok {
				t.Errorf("accepted = %v, want %v (err: %v)", err == nil, tc.ok, err)
			}
		})
	}

	run := &fakeRun{dag: "d", id: "r", state: "running", conf: map[string]any{}}
	resps := []struct {
		name   string
		f      *fakeAirflow
		mutate func(map[string]any)
		ok     bool
	}{
		{"v1 as served", v1, func(map[string]any) {}, true},
		{"v1 unknown state", v1, func(m map[string]any) { m["state"] = "up_for_retry" }, false},
		{"v2 as served", v2, func(map[string]any) {}, true},
		{"v2 without dag_versions", v2, func(m map[string]any) { delete(m, "dag_versions") }, false},
		{"v2 v1-style run_type", v2, func(m map[string]any) { m["run_type"] = "dataset_triggered" }, false},
	}
	for _, tc := range resps {
		t.Run(tc.name, func(t *testing.T) {
			doc, path := s.v1, "/dags/{dag_id}/dagRuns/{dag_run_id}"
			if tc.f.api == "v2" {
				doc, path = s.v2, "/api/v2/dags/{dag_id}/dagRuns/{dag_run_id}"
			}
			r := httptest.NewRequest(http.MethodGet, "/x", nil)
			input, err := tc.f.route(doc, path, r, nil)
			if err != nil {
				t.Fatal(err)
			}
			m := tc.f.dagRun(run)
			tc.mutate(m)
			body, _ := json.Marshal(m)
			err = validateResponse(input, http.StatusOK, body)
			if (err == nil) != tc.ok {
				t.Errorf("accepted = %v, want %v (err: %v)", err == nil, tc.ok, err)
			}
		})
	}
}

func TestErrorDetail(t *testing.T) {
	cases := []struct{ body, want string }{
		{``, ``},
		{`{"type":"x","title":"Conflict","status":409,"detail":"DAGRun with DAG ID: 'd' already exists"}`, `Conflict: DAGRun with DAG ID: 'd' already exists`},
		{`{"detail":"Not Found"}`, `Not Found`},
		{`{"detail":{"reason":"paused"}}`, `{"reason":"paused"}`},
		{`{"detail":[{"loc":["body","logical_date"],"msg":"Field required","type":"missing"}]}`, `body.logical_date: Field required`},
		{"<html>\n<body>502 Bad   Gateway</body>\n</html>", `<html> <body>502 Bad Gateway</body> </html>`},
		{`{"other":1}`, `{"other":1}`},
	}
	for _, tc := range cases {
		if got := errorDetail([]byte(tc.body)); got != tc.want {
			t.Errorf("errorDetail(%q) = %q, want %q", tc.body, got, tc.want)
		}
	}
	if got := errorDetail([]byte(strings.Repeat("é", 1000))); len([]rune(got)) != maxDetail+1 {
		t.Errorf("a long detail is %d runes, want it clipped to %d and an ellipsis", len([]rune(got)), maxDetail)
	}
}

// TestFailMarksTheRunFailed: refill tells Airflow when it gives up on a DAG
// run (API v1 and v2, each request checked against its spec); a run that
// does not exist is nothing to fail.
func TestFailMarksTheRunFailed(t *testing.T) {
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			f := newFake(t, api)
			f.queuedFor = 1 << 30 // a paused DAG: queued for ever
			job, env := f.job()
			c := newClient(env)
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			_, err := c.Run(ctx, job, testRunID, testStart, testEnd)
			cancel()
			if err == nil || f.state(testRunID) != "queued" {
				t.Fatalf("a queued run that outlived its caller: err %v, state %q", err, f.state(testRunID))
			}
			if err := c.Fail(context.Background(), job, testRunID, "refill gave up after 2 attempts"); err != nil {
				t.Fatal(err)
			}
			if got := f.state(testRunID); got != "failed" {
				t.Errorf("after Fail the run is %q, want failed", got)
			}
			if err := c.Fail(context.Background(), job, "refill__no_such_run", "x"); err != nil {
				t.Errorf("failing a run that does not exist: %v", err)
			}
		})
	}
}

// TestOneTokenForEveryPoll: a job's own poll interval uses the shared
// client and its token; no partition logs in again.
func TestOneTokenForEveryPoll(t *testing.T) {
	f := newFake(t, "v2")
	f.queuedFor = 2
	job, env := f.job()
	job.Poll = refill.Duration(time.Millisecond)
	c := &Client{HTTP: &http.Client{Timeout: 5 * time.Second}, Getenv: env}
	for i := 0; i < 4; i++ {
		if _, err := run(t, c, job, fmt.Sprintf("%s_%d", testRunID, i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.count(opLogin); n != 1 {
		t.Errorf("%d logins for four partitions, want 1", n)
	}
}

// TestOneLoginForPartitionsStartingTogether: partitions that start at the
// same moment wait for the first one's login rather than each logging in.
func TestOneLoginForPartitionsStartingTogether(t *testing.T) {
	f := newFake(t, "v2")
	job, env := f.job()
	job.Poll = refill.Duration(time.Millisecond)
	c := &Client{HTTP: &http.Client{Timeout: 5 * time.Second}, Getenv: env}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Go(func() {
			_, err := run(t, c, job, fmt.Sprintf("%s_%d", testRunID, i))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := f.count(opLogin); n != 1 {
		t.Errorf("%d logins for eight partitions started together, want 1", n)
	}
}

// TestCredentialsFromFiles: an Airflow job's credentials may be kept in
// files (username_file, password_file), relative to the config's
// directory, which the runner is given; a file that is gone is bad input
// naming it.
func TestCredentialsFromFiles(t *testing.T) {
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			f := newFake(t, api)
			dir := t.TempDir()
			for name, v := range map[string]string{"user": f.user + "\n", "pass": f.pass + "\n"} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			job, _ := f.job()
			job.UsernameEnv, job.PasswordEnv, job.UsernameFile, job.PasswordFile = "", "", "user", "pass"
			d := &refill.Dataset{Name: "events_daily", Job: &refill.Job{Kind: refill.JobAirflow, Airflow: job}}
			r := Runner{Client: newClient(func(string) string { return "" }), Dir: dir}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := r.Build(ctx, nil, d, refill.JobRun{PlanID: "p7f3a", Run: 1, Partition: "2026-11-01"}); err != nil {
				t.Fatalf("with the credentials in files: %v", err)
			}
			os.Remove(filepath.Join(dir, "pass"))
			_, err := r.Build(ctx, nil, d, refill.JobRun{PlanID: "p7f3a", Run: 1, Partition: "2026-11-02"})
			if !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), "the Airflow credentials: password_file: cannot read "+filepath.Join(dir, "pass")) {
				t.Errorf("a password file gone: %v", err)
			}
			noSecrets(t, f, err)
		})
	}
}
