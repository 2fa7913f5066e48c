package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// crashKinds are the job kinds the crash test runs, each rebuilding agg
// from src for 30 days.
var crashKinds = map[string]string{
	"query": `    job:
      query: |
        SELECT day, k, sum(v) AS v, count(*) AS n FROM src WHERE day = :partition GROUP BY day, k`,
	"sql": `    job:
      sql: |
        DELETE FROM agg WHERE day = :partition;
        INSERT INTO agg (day, k, v, n) SELECT day, k, sum(v), count(*) FROM src WHERE day = :partition GROUP BY day, k;
        WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 20000) SELECT count(*) FROM c`,
	"command": `    job:
      command: ["./build.sh", "{{partition}}"]
      timeout: 30s`,
	"airflow": `    job:
      airflow: {url: "AIRFLOW_URL", dag_id: agg, api: v1, username_env: AF_USER, password_env: AF_PASS, poll: 20ms}`,
}

// crashEnv is the environment every apply of the crash test runs with.
var crashEnv = []string{"AF_USER=refill", "AF_PASS=s3cret"}

// dagServer is an Airflow 2 stand-in for the crash test (the client's
// bodies are checked against the real spec in jobs/airflow's tests): a DAG
// run, once polled, rebuilds its partition of agg in the current round's
// warehouse and succeeds. It counts the runs created for each run id.
type dagServer struct {
	mu      sync.Mutex
	dir     string
	runs    map[string]map[string]any
	created map[string]int
}

func (f *dagServer) round(dir string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dir, f.runs, f.created = dir, map[string]map[string]any{}, map[string]int{}
}

func (f *dagServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if u, p, ok := r.BasicAuth(); !ok || u != "refill" || p != "s3cret" {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/api/v1/dags/agg/dagRuns"), "/")
	switch {
	case r.Method == http.MethodPost:
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
		run := map[string]any{"dag_id": "agg", "dag_run_id": body.DagRunID, "state": "queued", "conf": body.Conf}
		f.runs[body.DagRunID], f.created[body.DagRunID] = run, f.created[body.DagRunID]+1
		json.NewEncoder(w).Encode(run)
	case r.Method == http.MethodGet && len(parts) == 2:
		run, ok := f.runs[parts[1]]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		if run["state"] == "queued" {
			day := run["conf"].(map[string]string)["start_date"][:10]
			db, err := sql.Open("sqlite", "file:"+filepath.Join(f.dir, "warehouse.db")+"?_pragma=busy_timeout(10000)")
			if err == nil {
				_, err = db.Exec(`DELETE FROM agg WHERE day = ?1; INSERT INTO agg (day, k, v, n) SELECT day, k, sum(v), count(*) FROM src WHERE day = ?1 GROUP BY day, k`, day)
				db.Close()
			}
			if err != nil {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
			run["state"] = "success"
		}
		json.NewEncoder(w).Encode(run)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

const buildScript = `#!/bin/sh
# A command job: replaces one partition of agg through the sqlite3 CLI.
set -eu
sqlite3 -cmd ".timeout 10000" "${REFILL_WAREHOUSE#sqlite:}" "BEGIN IMMEDIATE; DELETE FROM agg WHERE day = '$1'; INSERT INTO agg (day, k, v, n) SELECT day, k, sum(v), count(*) FROM src WHERE day = '$1' GROUP BY day, k; COMMIT;"
`

// crashTemplate builds a directory with a warehouse, a config and an
// approved plan over 30 partitions, ready to apply.
func crashTemplate(t *testing.T, kind, airflowURL string) (dir, planID string) {
	t.Helper()
	dir = t.TempDir()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "warehouse.db"))

	if err != nil {
		t.Fatal(err)
	}
	stmts := []string{
		"CREATE TABLE src (day TEXT, k INTEGER, v INTEGER)",
		"CREATE TABLE agg (day TEXT, k INTEGER, v INTEGER, n INTEGER)",
		`WITH RECURSIVE d(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM d WHERE i < 29),
		      r(j) AS (SELECT 0 UNION ALL SELECT j + 1 FROM r WHERE j < 199)
		 INSERT INTO src SELECT date('2026-10-01', '+' || i || ' days'), j % 7, (i * 31 + j * 17) % 101 FROM d, r`,
		"INSERT INTO agg VALUES ('2026-10-03', 1, 999, 1)", // a stale row to be replaced
	}
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	db.Close()
	cfg := `version: 1
warehouse: sqlite:warehouse.db
run: {max_active: 2, max_active_total: 4, attempts: 10, backoff: 50ms, rescue_after: 2s}
datasets:
  src:
    table: src
    partition: {column: day}
  agg:
    table: agg
    partition: {column: day}
    upstream: [src]
` + strings.Replace(crashKinds[kind], "AIRFLOW_URL", airflowURL, 1) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "refill.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "build.sh"), []byte(buildScript), 0o755); err != nil {
		t.Fatal(err)
	}
	r := run(t, dir, nil, "plan", "src", "--from", "2026-10-01", "--to", "2026-10-30", "--reason", "crash test", "--as", "alice", "-o", "json")
	if r.code != 0 {
		t.Fatalf("plan: %s", r.stderr)
	}
	planID = decode[planJSON](t, r.stdout).ID
	if r := run(t, dir, nil, "approve", planID, "--as", "bob"); r.code != 0 {
		t.Fatalf("approve: %s", r.stderr)
	}
	return dir, planID
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.Walk(from, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		dst := filepath.Join(to, rel)
		if info.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode())
		if err != nil {
			return err
		}
		defer out.Close()
		_, err = io.Copy(out, in)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// content is agg's rows in a fixed order: what a clean run must produce.
func content(t *testing.T, dir string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "warehouse.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT day, k, v, n FROM agg ORDER BY day, k, v, n")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var d string
		var k, v, n int
		if err := rows.Scan(&d, &k, &v, &n); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s,%d,%d,%d;", d, k, v, n)
	}
	return b.String()
}

// publishCounts counts partition_published audit entries per partition.
func publishCounts(t *testing.T, dir, planID string) map[string]int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, ".refill", "state.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT partition, count(*) FROM audit_log WHERE plan_id = ? AND event = 'partition_published' GROUP BY partition`, planID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var p string
		var n int
		if err := rows.Scan(&p, &n); err != nil {
			t.Fatal(err)
		}
		out[p] = n
	}
	return out
}

// TestKillAndResume kills `refill apply` with SIGKILL at random points, 8
// times per job kind, resumes it, and checks the warehouse equals a clean
// run's, no partition was published twice, and the audit chain verifies.
// REFILL_CRASH_ROUNDS raises the count for a longer soak by hand.
func TestKillAndResume(t *testing.T) {
	t.Parallel()
	rounds := 8
	if s := os.Getenv("REFILL_CRASH_ROUNDS"); s != "" {
		fmt.Sscan(s, &rounds)
	}
	for kind := range crashKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			dags := &dagServer{}
			srv := httptest.NewServer(dags)
			defer srv.Close()
			tmpl, planID := crashTemplate(t, kind, srv.URL)
			clean := t.TempDir()
			copyDir(t, tmpl, clean)
			dags.round(clean)
			start := time.Now()
			if r := run(t, clean, crashEnv, "apply", planID, "--as", "alice"); r.code != 0 {
				t.Fatalf("clean run: exit %d: %s", r.code, r.stderr)
			}
			// Kills land anywhere from before River starts to just after
			// the run would have finished.
			span := time.Since(start) * 11 / 10
			t.Logf("a clean run takes %s", span*10/11)
			want := content(t, clean)
			if !strings.Contains(want, "2026-10-30,") || strings.Contains(want, ",999,") {
				t.Fatalf("the clean run did not rebuild agg: %.200s", want)
			}
			seed := uint64(time.Now().UnixNano())
			rng := rand.New(rand.NewPCG(seed, 7))
			t.Logf("seed %d", seed)
			midRun := 0
			defer func() { t.Logf("%d of %d kills landed before the run's clean duration", midRun, rounds) }()
			for i := 0; i < rounds; i++ {
				dir := t.TempDir()
				copyDir(t, tmpl, dir)
				dags.round(dir)
				cmd := exec.Command(binary, "apply", planID, "--as", "alice")
				cmd.Dir = dir
				cmd.Env = append(append(os.Environ(), "REFILL_NOW="+demoNow), crashEnv...)
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				delay := time.Duration(rng.Int64N(int64(span)))
				time.Sleep(delay)
				_ = cmd.Process.Signal(syscall.SIGKILL)
				_ = cmd.Wait()
				done := false
				for try := 0; try < 6 && !done; try++ {
					r := run(t, dir, crashEnv, "apply", planID, "--as", "alice")
					switch {
					case r.code == 0:
						done = true
					case r.code == 4 && strings.Contains(r.stderr, "already been applied"):
						done = true // the killed run had finished
					default:
						t.Logf("round %d (killed after %s): resume %d: exit %d: %s", i, delay, try, r.code, r.stderr)
					}
				}
				if delay < span*10/11 {
					midRun++
				}
				if !done {
					t.Fatalf("round %d (killed after %s): the run never finished", i, delay)
				}
				if got := content(t, dir); got != want {
					t.Fatalf("round %d (killed after %s): agg differs from a clean run", i, delay)
				}
				counts := publishCounts(t, dir, planID)
				if len(counts) != 30 {
					t.Fatalf("round %d: %d partitions published, want 30", i, len(counts))
				}
				for p, n := range counts {
					if n != 1 {
						t.Fatalf("round %d (killed after %s): %s published %d times", i, delay, p, n)
					}
				}
				if r := run(t, dir, nil, "audit", "verify"); r.code != 0 {
					t.Fatalf("round %d: audit verify: %s", i, r.stderr)
				}
				if kind == "airflow" {
					dags.mu.Lock()
					for id, n := range dags.created {
						if n != 1 {
							t.Errorf("round %d (killed after %s): DAG run %s created %d times", i, delay, id, n)
						}
					}
					dags.mu.Unlock()
				}
			}
		})
	}
}
