package main

import (
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

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
			af := newFakeDAG(api, "export", "running", "__2026-11-01__")
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
			reqs := af.phase("running", "")
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
			reqs = af.phase("ok", "")
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
			reqs = af.phase("ok", "")
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
