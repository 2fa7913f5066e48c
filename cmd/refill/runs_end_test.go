package main

import (
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestEveryRunEnds: an attempt cut off by River's time limit is a failure
// like any other; when the attempts run out the run fails with the reason,
// apply exits non-zero, and the plan is not left running.
func TestEveryRunEnds(t *testing.T) {
	t.Parallel()
	dir := smallProject(t, `version: 1
warehouse: sqlite:wh.db
run: {attempts: 2, rescue_after: 3s, backoff: 100ms}
datasets:
  stuck:
    job:
      command: ["sleep", "30"]
`)
	id := approvedPlan(t, dir, "stuck")

	cmd := exec.Command(binary, "apply", id, "--as", "alice")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "REFILL_NOW="+demoNow, "REFILL_CONFIG=")
	done := make(chan struct{})
	var out []byte
	go func() { out, _ = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("apply still waiting after 90 s:\n%s", out)
	}
	if cmd.ProcessState.ExitCode() == 0 {
		t.Fatalf("apply of a job that always times out exited 0:\n%s", out)
	}
	for _, want := range []string{"attempt 1 of 2 failed, will retry", "ran past its time limit", "attempt 2 of 2 failed"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("apply's log lacks %q:\n%s", want, out)
		}
	}
	// The attempt cut off is over, not in flight: the retry does not
	// wait for it to lapse.
	if strings.Contains(string(out), "still in flight") {
		t.Errorf("the retry waited for the attempt its time limit had cut off:\n%s", out)
	}
	step(t, dir, 0, "status failed", "show", id)
}

// fakeDAG is an Airflow stand-in (API v1 or v2) for one DAG, dag. A run
// it accepts is queued; polled, it stays queued while mode is "paused" (a
// paused DAG), runs while mode is "running", and ends success once mode is
// "ok". A run whose ID contains failing ends failed instead, once another
// run has started beside it. A PATCH sets a run's state (kept in patched),
// and every request is logged in order, the token logins included.
type fakeDAG struct {
	mu       sync.Mutex
	api, dag string
	mode     string
	failing  string
	runs     map[string]map[string]any
	patched  map[string]string
	requests []string // "METHOD dag-run-id", or "LOGIN"
}

func newFakeDAG(api, dag, mode, failing string) *fakeDAG {
	return &fakeDAG{api: api, dag: dag, mode: mode, failing: failing, runs: map[string]map[string]any{}, patched: map[string]string{}}
}

func (f *fakeDAG) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if f.api == "v2" {
		// Airflow 3's simple auth manager with all_admins hands out a
		// token without credentials.
		if r.URL.Path == "/auth/token" {
			f.requests = append(f.requests, "LOGIN")
			json.NewEncoder(w).Encode(map[string]string{"access_token": "token"})
			return
		}
		if r.Header.Get("Authorization") != "Bearer token" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/api/"+f.api+"/dags/"+f.dag+"/dagRuns")
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	id := strings.TrimPrefix(rest, "/")
	switch {
	case r.Method == http.MethodPost && id == "":
		var body struct {
			DagRunID string            `json:"dag_run_id"`
			Conf     map[string]string `json:"conf"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.requests = append(f.requests, "POST "+body.DagRunID)
		if _, ok := f.runs[body.DagRunID]; ok {
			w.WriteHeader(http.StatusConflict)
			json.NewEncoder(w).Encode(map[string]any{"title": "Conflict", "status": 409, "type": "about:blank"})
			return
		}
		run := map[string]any{"dag_id": f.dag, "dag_run_id": body.DagRunID, "state": "queued", "conf": body.Conf}
		f.runs[body.DagRunID] = run
		json.NewEncoder(w).Encode(run)
	case id != "" && (r.Method == http.MethodGet || r.Method == http.MethodPatch):
		f.requests = append(f.requests, r.Method+" "+id)
		run, ok := f.runs[id]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		switch state := run["state"]; {
		case r.Method == http.MethodPatch:
			var body struct {
				State string `json:"state"`
			}
			_ = json.NewDecoder(r.Body).Decode(&body)
			run["state"], f.patched[id] = body.State, body.State
		case state == "failed" || state == "success":
		case f.failing != "" && strings.Contains(id, f.failing) && len(f.runs) > 1:
			run["state"] = "failed"
		case f.mode == "ok":
			run["state"] = "success"
		case f.mode == "running":
			run["state"] = "running"
		}
		json.NewEncoder(w).Encode(run)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// phase sets the DAG's mode and failing runs, and returns the requests
// made since the last phase.
func (f *fakeDAG) phase(mode, failing string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	got := f.requests
	f.mode, f.failing, f.requests = mode, failing, nil
	return got
}

// TestPausedDAGEnds: a DAG run stuck in queued (a paused DAG) ends the run
// when its attempts run out, and refill marks it failed in Airflow so that
// it cannot start later and write unobserved.
func TestPausedDAGEnds(t *testing.T) {
	t.Parallel()
	af := newFakeDAG("v1", "paused", "paused", "")
	srv := httptest.NewServer(af)
	defer srv.Close()
	dir := smallProject(t, `version: 1
warehouse: sqlite:wh.db
run: {attempts: 2, rescue_after: 2s, backoff: 100ms}
datasets:
  export:
    job:
      airflow: {url: "`+srv.URL+`", dag_id: paused, api: v1, poll: 50ms}
`)
	id := approvedPlan(t, dir, "export")
	r := run(t, dir, nil, "apply", id, "--as", "alice")
	if r.code == 0 || !strings.Contains(r.stderr, "time limit") {
		t.Fatalf("apply of a paused DAG: exit %d\n%s", r.code, r.stderr)
	}
	af.mu.Lock()
	defer af.mu.Unlock()
	if got := af.patched["refill__"+id+"__export__2026-11-01__r1"]; got != "failed" {
		t.Errorf("the abandoned DAG run was not marked failed in Airflow: %v", af.patched)
	}
}

// TestFailedPartitionEndsOtherDAGRuns: when one partition's DAG run fails
// and with it the run, the DAG runs the run started for other partitions,
// still queued in Airflow, are marked failed too (API v1 and v2), so that
// none of them starts later and writes unobserved.
func TestFailedPartitionEndsOtherDAGRuns(t *testing.T) {
	for _, api := range []string{"v1", "v2"} {
		t.Run(api, func(t *testing.T) {
			t.Parallel()
			af := newFakeDAG(api, "paused", "paused", "__2026-11-01__")
			srv := httptest.NewServer(af)
			defer srv.Close()
			dir := smallProject(t, `version: 1
warehouse: sqlite:wh.db
run: {max_active: 2, attempts: 3, rescue_after: 60s, backoff: 100ms}
datasets:
  export:
    job:
      airflow: {url: "`+srv.URL+`", dag_id: paused, api: `+api+`, poll: 50ms}
`)
			id := decode[planJSON](t, step(t, dir, 0, "", "plan", "export", "--from", "2026-11-01", "--to", "2026-11-02", "--reason", "r", "--as", "alice", "-o", "json").stdout).ID
			step(t, dir, 0, "", "approve", id, "--as", "bob")
			r := run(t, dir, nil, "apply", id, "--as", "alice")
			if r.code == 0 || !strings.Contains(r.stderr, "export 2026-11-01 failed") {
				t.Fatalf("apply with a failed DAG run: exit %d\n%s", r.code, r.stderr)
			}
			af.mu.Lock()
			defer af.mu.Unlock()
			other := "refill__" + id + "__export__2026-11-02__r1"
			if _, ok := af.runs[other]; !ok {
				t.Fatalf("the second partition's DAG run never started, so this test proved nothing: %v\n%s", af.runs, r.stderr)
			}
			if got := af.patched[other]; got != "failed" {
				t.Errorf("the DAG run of the partition still queued when the run failed was left %v in Airflow (PATCHed: %v)\n%s", af.runs[other]["state"], af.patched, r.stderr)
			}
			step(t, dir, 0, "status failed", "show", id)
		})
	}
}

// smallProject writes refill.yaml (cfg) beside a SQLite warehouse wh.db
// holding the tables stmts make (one unused table when none are given), and
// returns the directory.
func smallProject(t *testing.T, cfg string, stmts ...string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "refill.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", filepath.Join(dir, "wh.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if len(stmts) == 0 {
		stmts = []string{`CREATE TABLE unused (a INTEGER)`}
	}
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	return dir
}

// approvedPlan plans dataset for one day as alice and has bob approve it.
func approvedPlan(t *testing.T, dir, dataset string) string {
	t.Helper()
	id := decode[planJSON](t, step(t, dir, 0, "", "plan", dataset, "--from", "2026-11-01", "--to", "2026-11-01", "--reason", "r", "--as", "alice", "-o", "json").stdout).ID
	step(t, dir, 0, "", "approve", id, "--as", "bob")
	return id
}
