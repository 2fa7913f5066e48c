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
	step(t, dir, 0, "status failed", "show", id)
}

// pausedDAG is an Airflow stand-in (API v1 by default, or v2) whose DAG
// is paused: every run it accepts stays queued, until refill marks it
// failed. A run whose ID contains failing ends failed instead, once another
// run has started beside it.
type pausedDAG struct {
	mu      sync.Mutex
	api     string
	failing string
	runs    map[string]map[string]any
	patched map[string]string
}

func (f *pausedDAG) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	api := f.api
	if api == "" {
		api = "v1"
	}
	if api == "v2" {
		// Airflow 3's simple auth manager with all_admins hands out a
		// token without credentials.
		if r.URL.Path == "/auth/token" {
			json.NewEncoder(w).Encode(map[string]string{"access_token": "token"})
			return
		}
		if r.Header.Get("Authorization") != "Bearer token" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/api/"+api+"/dags/paused/dagRuns"), "/")
	switch {
	case r.Method == http.MethodPost && parts[0] == "" && len(parts) == 1:
		var body struct {
			DagRunID string            `json:"dag_run_id"`
			Conf     map[string]string `json:"conf"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		if _, ok := f.runs[body.DagRunID]; ok {
			w.WriteHeader(http.StatusConflict)
			json.NewEncoder(w).Encode(map[string]any{"title": "Conflict", "status": 409, "type": "about:blank"})
			return
		}
		run := map[string]any{"dag_id": "paused", "dag_run_id": body.DagRunID, "state": "queued", "conf": body.Conf}
		f.runs[body.DagRunID] = run
		json.NewEncoder(w).Encode(run)
	case len(parts) == 2 && (r.Method == http.MethodGet || r.Method == http.MethodPatch):
		run, ok := f.runs[parts[1]]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		if r.Method == http.MethodPatch {
			var body struct {
				State string `json:"state"`
			}
			_ = json.NewDecoder(r.Body).Decode(&body)
			run["state"], f.patched[parts[1]] = body.State, body.State
		} else if f.failing != "" && strings.Contains(parts[1], f.failing) && len(f.runs) > 1 {
			run["state"] = "failed"
		}
		json.NewEncoder(w).Encode(run)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// TestPausedDAGEnds: a DAG run stuck in queued (a paused DAG) ends the run
// when its attempts run out, and refill marks it failed in Airflow so that
// it cannot start later and write unobserved.
func TestPausedDAGEnds(t *testing.T) {
	af := &pausedDAG{runs: map[string]map[string]any{}, patched: map[string]string{}}
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
			af := &pausedDAG{api: api, failing: "__2026-11-01__", runs: map[string]map[string]any{}, patched: map[string]string{}}
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
