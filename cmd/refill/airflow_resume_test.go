package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// resumableDAG is an Airflow stand-in (API v1 or v2) whose DAG behaves as
// mode says when a run of it is polled: "fail" ends the runs of partition
// 2026-11-01 failed, once a run of another partition has started, and
// leaves the others running; "hang" leaves every run running; "ok" ends it
// success. It logs every request, the token logins included, in order.
type resumableDAG struct {
	mu       sync.Mutex
	api      string
	mode     string
	runs     map[string]map[string]any
	requests []string // "METHOD path-after-dagRuns", or "LOGIN"
}

func (f *resumableDAG) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
	rest, ok := strings.CutPrefix(r.URL.Path, "/api/"+f.api+"/dags/export/dagRuns")
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
		run := map[string]any{"dag_id": "export", "dag_run_id": body.DagRunID, "state": "queued", "conf": body.Conf}
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
			run["state"] = body.State
		case state == "failed" || state == "success":
		case f.mode == "ok":
			run["state"] = "success"
		case f.mode == "fail" && strings.Contains(id, "__2026-11-01__") && len(f.runs) > 1:
			run["state"] = "failed"
		default:
			run["state"] = "running"
		}
		json.NewEncoder(w).Encode(run)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// phase sets the DAG's mode and returns the requests of the phase before.
func (f *resumableDAG) phase(mode string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	got := f.requests
	f.mode, f.requests = mode, nil
	return got
}

// TestAirflowResumeStartsAFreshDAGRun: a plan whose Airflow partition
// fails is resumed by refill apply, which starts a fresh DAG run per
// partition, its ID carrying the run, instead of reading back the failed
// one; a DAG run an earlier run left going (its apply was killed) is
// marked failed in Airflow before its successor is triggered; the log
// counts the attempts there were; and on API v2 one token serves every
// partition.
func TestAirflowResumeStartsAFreshDAGRun(t *testing.T) {
	for _, api := range []string{"v1", "v2"} {
		t.Run(api, func(t *testing.T) {
			t.Parallel()
			af := &resumableDAG{api: api, mode: "fail", runs: map[string]map[string]any{}}
			srv := httptest.NewServer(af)
			defer srv.Close()
			dir := smallProject(t, `version: 1
warehouse: sqlite:wh.db
run: {max_active: 2, attempts: 3, rescue_after: 60s, backoff: 100ms}
datasets:
  export:
    job:
      airflow: {url: "`+srv.URL+`", dag_id: export, api: `+api+`, poll: 50ms}
`)
			id := decode[planJSON](t, step(t, dir, 0, "", "plan", "export", "--from", "2026-11-01", "--to", "2026-11-02", "--reason", "r", "--as", "alice", "-o", "json").stdout).ID
			step(t, dir, 0, "", "approve", id, "--as", "bob")
			dagRun := func(part string, n int) string {
				return "refill__" + id + "__export__" + part + "__r" + itoa(n)
			}
			days := []string{"2026-11-01", "2026-11-02"}

			// Run 1: the first partition's DAG run fails, which no retry
			// can mend, so it fails at its first attempt and says so.
			r := run(t, dir, nil, "apply", id, "--as", "alice")
			log := r.stdout + r.stderr
			if r.code == 0 || !strings.Contains(log, "export 2026-11-01: attempt 1 of 3 failed, and retrying cannot mend it") {
				t.Fatalf("apply with a failing DAG run: exit %d\n%s", r.code, log)
			}
			for _, lie := range []string{"2026-11-01: attempt 2 of 3", "2026-11-01: attempt 3 of 3"} {
				if strings.Contains(log, lie) {
					t.Errorf("the log says %q after one attempt:\n%s", lie, log)
				}
			}
			reqs := af.phase("hang")
			if reqs[0] != "LOGIN" && api == "v2" || slices.Contains(reqs, "POST "+dagRun(days[0], 2)) {
				t.Errorf("run 1's requests: %q", reqs)
			}

			// Run 2 starts a fresh DAG run for each partition, after
			// making sure the old one is over (both are failed: one by
			// Airflow, one by refill when the run failed), and is killed
			// while they are running.
			cmd := exec.Command(binary, "apply", id, "--as", "alice")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "REFILL_NOW="+demoNow, "REFILL_USER=", "REFILL_CONFIG=")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			started := func() bool {
				af.mu.Lock()
				defer af.mu.Unlock()
				return af.runs[dagRun(days[0], 2)] != nil && af.runs[dagRun(days[1], 2)] != nil
			}
			for deadline := time.Now().Add(60 * time.Second); !started() && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond)
			}
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			reqs = af.phase("ok")
			if !started() {
				t.Fatalf("run 2 did not start a DAG run per partition: %q", reqs)
			}
			for _, day := range days {
				ordered(t, reqs, "GET "+dagRun(day, 1), "POST "+dagRun(day, 2))
				if slices.Contains(reqs, "POST "+dagRun(day, 1)) {
					t.Errorf("run 2 asked for the DAG run of run 1 again: %q", reqs)
				}
			}

			// Run 3 finds run 2's DAG runs still running, abandoned by the
			// killed apply: it marks each failed before it triggers its
			// own, and the plan is applied.
			r = run(t, dir, nil, "apply", id, "--as", "alice")
			reqs = af.phase("ok")
			if r.code != 0 {
				t.Fatalf("apply after the DAG was mended: exit %d\n%s%s\nrequests: %q", r.code, r.stdout, r.stderr, reqs)
			}
			for _, day := range days {
				ordered(t, reqs, "GET "+dagRun(day, 2), "PATCH "+dagRun(day, 2), "POST "+dagRun(day, 3))
				if af.runs[dagRun(day, 2)]["state"] != "failed" || af.runs[dagRun(day, 3)]["state"] != "success" {
					t.Errorf("%s: run 2's DAG run is %v, run 3's %v; want failed and success", day, af.runs[dagRun(day, 2)]["state"], af.runs[dagRun(day, 3)]["state"])
				}
			}
			if logins := strings.Count(strings.Join(reqs, "\n"), "LOGIN"); api == "v2" && logins != 1 {
				t.Errorf("run 3 logged in %d times for 2 partitions, want once (one token shared): %q", logins, reqs)
			}
			step(t, dir, 0, "status applied", "show", id)
		})
	}
}

// ordered checks that reqs holds each of want, in that order.
func ordered(t *testing.T, reqs []string, want ...string) {
	t.Helper()
	at := -1
	for _, w := range want {
		i := slices.Index(reqs, w)
		if i < 0 || i < at {
			t.Errorf("requests lack %q in the order %q:\n%s", w, want, strings.Join(reqs, "\n"))
			return
		}
		at = i
	}
}
