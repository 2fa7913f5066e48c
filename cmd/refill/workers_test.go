package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestWorkersShareARun starts two `refill worker` processes beside `refill
// apply` on a PostgreSQL state store, kills one worker mid-run with
// SIGKILL, and checks the run finishes with every partition published once,
// by more than one process, and the warehouse right.
func TestWorkersShareARun(t *testing.T) {
	t.Parallel()
	whDSN, stateDSN := pgSchema(t), pgSchema(t)
	wh, err := sql.Open("pgx", whDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	for _, q := range []string{
		`CREATE TABLE src (day date, k int, v int)`,
		`INSERT INTO src SELECT date '2026-09-01' + (g % 40), g % 7, g % 101 FROM generate_series(1, 8000) g`,
		`CREATE TABLE agg (day date, k int, v bigint)`,
	} {
		if _, err := wh.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	cfg := `version: 1
warehouse: "` + whDSN + `"
state: "` + stateDSN + `"
run: {max_active: 2, max_active_total: 4, attempts: 5, backoff: 50ms}
policy: {manual_over_days: 100}
datasets:
  src: {table: src, partition: {column: day}}
  agg:
    table: agg
    partition: {column: day}
    upstream: [src]
    job:
      sql: |
        DELETE FROM agg WHERE day = :partition;
        INSERT INTO agg SELECT day, k, sum(v) FROM src WHERE day = :partition GROUP BY day, k;
        SELECT pg_sleep(0.1)
`
	if err := os.WriteFile(filepath.Join(dir, "refill.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, dir, nil, "plan", "src", "--from", "2026-09-01", "--to", "2026-10-10", "--reason", "workers", "--as", "alice", "-o", "json")
	if r.code != 0 {
		t.Fatalf("plan: %s", r.stderr)
	}
	id := decode[planJSON](t, r.stdout).ID
	if r := run(t, dir, nil, "approve", id, "--as", "bob"); r.code != 0 {
		t.Fatalf("approve: %s", r.stderr)
	}
	w1 := startRefill(t, dir, "worker")
	w2 := startRefill(t, dir, "worker")
	apply := startRefill(t, dir, "apply", id, "--as", "alice")
	// Worker 1 dies with SIGKILL once it has published a partition of
	// its own, whatever it is in the middle of.
	host, _ := os.Hostname()
	w1ID := fmt.Sprintf("%s:%d", host, w1.cmd.Process.Pid)
	apply.until(t, "worker 1 publishing a partition", time.Minute, func() bool {
		return publishedBy(t, stateDSN, id, w1ID) > 0
	})
	_ = w1.cmd.Process.Kill()
	w1.wait(t, time.Minute)
	if code := apply.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("apply exited %d:\n%s\nworker 2:\n%s", code, apply.output(), w2.output())
	}

	state, err := sql.Open("pgx", stateDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()
	rows, err := state.Query(`SELECT partition, detail FROM audit_log WHERE plan_id = $1 AND event = 'partition_published'`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen, workers := map[string]int{}, map[string]bool{}
	for rows.Next() {
		var p, detail string
		if err := rows.Scan(&p, &detail); err != nil {
			t.Fatal(err)
		}
		seen[p]++
		var d struct {
			Worker string `json:"worker"`
		}
		_ = json.Unmarshal([]byte(detail), &d)
		workers[d.Worker] = true
	}
	if len(seen) != 40 {
		t.Errorf("%d partitions published, want 40", len(seen))
	}
	for p, n := range seen {
		if n != 1 {
			t.Errorf("%s published %d times", p, n)
		}
	}
	if !workers[w1ID] || len(workers) < 2 {
		t.Errorf("published by %v: want worker 1 (%s) and whoever finished after it died", workers, w1ID)
	}
	var bad int
	if err := wh.QueryRow(`SELECT count(*) FROM (SELECT day, k, sum(v) AS v FROM src GROUP BY day, k) want
		FULL JOIN agg USING (day, k) WHERE want.v IS DISTINCT FROM agg.v`).Scan(&bad); err != nil || bad != 0 {
		t.Errorf("agg differs from a clean build in %d rows (%v)", bad, err)
	}
	if !strings.Contains(apply.output(), "40 of 40 partitions published") {
		t.Errorf("apply's report:\n%s", apply.output())
	}
	if r := run(t, dir, nil, "audit", "verify"); r.code != 0 {
		t.Errorf("audit verify: %s", r.stderr)
	}
}

// TestWorkerRunsTheSealedJob: a worker started with another definition of
// a dataset's job (here, its query multiplied by 100) builds the approved
// plan's partitions with the job the plan sealed, never its own.
func TestWorkerRunsTheSealedJob(t *testing.T) {
	t.Parallel()
	whDSN, stateDSN := pgSchema(t), pgSchema(t)
	wh := aggWarehouse(t, whDSN)
	w := strayWorker(t, aggConfig(whDSN, stateDSN, "sum(v)"), aggConfig(whDSN, stateDSN, "sum(v) * 100"))
	if r := run(t, w.dir, nil, "apply", w.id, "--as", "alice"); r.code != 0 {
		t.Fatalf("apply: %s\nworker:\n%s", r.stderr, w.worker.output())
	}
	if bad := aggDiffers(t, wh); bad != 0 {
		t.Errorf("agg differs from the sealed job's build in %d rows: a worker ran its own config", bad)
	}
	if n := w.published(t, stateDSN); n == 0 {
		t.Errorf("the rogue worker published nothing, so this test proved nothing:\n%s", w.worker.output())
	}
}

// TestWorkerWritesOnlyThePlansWarehouse: a worker whose refill.yaml names
// another warehouse than the one an approved plan sealed writes nothing
// there. The partition it took fails the run, naming both warehouses; the
// plan's warehouse holds only what was published to it, and apply resumed
// without the stray worker finishes the plan there.
func TestWorkerWritesOnlyThePlansWarehouse(t *testing.T) {
	t.Parallel()
	whDSN, rogueDSN, stateDSN := pgSchema(t), pgSchema(t), pgSchema(t)
	// Both warehouses hold the same tables, so a worker writing the wrong
	// one would succeed.
	wh, rogueWH := aggWarehouse(t, whDSN), aggWarehouse(t, rogueDSN)
	w := strayWorker(t, aggConfig(whDSN, stateDSN, "sum(v)"), aggConfig(rogueDSN, stateDSN, "sum(v)"))

	r := run(t, w.dir, nil, "apply", w.id, "--as", "alice")
	schema := func(dsn string) string {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		return u.Query().Get("search_path")
	}
	var strays int
	if err := rogueWH.QueryRow(`SELECT count(*) FROM agg`).Scan(&strays); err != nil || strays != 0 {
		t.Errorf("the stray worker wrote %d rows into its own warehouse (%v):\n%s", strays, err, w.worker.output())
	}
	if r.code == 0 {
		t.Fatalf("apply exited 0 although a worker with another warehouse served the run (if it took no job, this test proved nothing)\nworker:\n%s", w.worker.output())
	}
	for _, want := range []string{"this worker's warehouse", schema(rogueDSN), schema(whDSN), "start the worker with the plan's refill.yaml"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("apply's failure does not say %q:\n%s", want, r.stderr)
		}
	}
	if !strings.Contains(w.worker.output(), "ALERT") || !strings.Contains(w.worker.output(), "this worker's warehouse") {
		t.Errorf("the stray worker did not log why it refused:\n%s", w.worker.output())
	}
	w.stop()
	if n := w.published(t, stateDSN); n != 0 {
		t.Errorf("the stray worker recorded %d partitions published", n)
	}

	// What the plan's warehouse holds is exactly what was published to it:
	// its publish marks, which commit with the rows. (The state store's
	// record of a publish comes after that commit; a partition in flight
	// when apply gave up may be marked and not yet recorded, and the
	// resumed run adopts it. What is recorded is never more than what is
	// marked.)
	state, err := sql.Open("pgx", stateDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()
	var published, recorded, built string
	// The marks table exists once anything was published there: when the
	// stray worker took the first partition and failed the run, nothing was.
	var marks *string
	if err := wh.QueryRow(`SELECT to_regclass('refill_published')::text`).Scan(&marks); err != nil {
		t.Fatal(err)
	}
	if marks != nil {
		if err := wh.QueryRow(`SELECT coalesce(string_agg(partition, ' ' ORDER BY partition), '') FROM refill_published WHERE plan_id = $1`,
			w.id).Scan(&published); err != nil {
			t.Fatal(err)
		}
	}
	if err := state.QueryRow(`SELECT coalesce(string_agg(partition, ' ' ORDER BY partition), '') FROM run_partitions WHERE plan_id = $1`,
		w.id).Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	for _, p := range strings.Fields(recorded) {
		if !slices.Contains(strings.Fields(published), p) {
			t.Errorf("%s is recorded published but has no publish mark in the plan's warehouse (marks %q)", p, published)
		}
	}
	if err := wh.QueryRow(`SELECT coalesce(string_agg(DISTINCT to_char(day, 'YYYY-MM-DD'), ' ' ORDER BY to_char(day, 'YYYY-MM-DD')), '') FROM agg`).Scan(&built); err != nil {
		t.Fatal(err)
	}
	if built != published {
		t.Errorf("the plan's warehouse holds partitions %q, but %q were published to it", built, published)
	}

	if r := run(t, w.dir, nil, "apply", w.id, "--as", "alice"); r.code != 0 {
		t.Fatalf("apply resumed without the stray worker: %s", r.stderr)
	}
	if bad := aggDiffers(t, wh); bad != 0 {
		t.Errorf("agg in the plan's warehouse differs from a clean build in %d rows", bad)
	}
}

// aggConfig is the refill.yaml of the stray-worker tests: agg built from
// src by expr, on warehouse, with a PostgreSQL state store.
func aggConfig(warehouse, stateDSN, expr string) string {
	return `version: 1
warehouse: "` + warehouse + `"
state: "` + stateDSN + `"
run: {max_active: 4, max_active_total: 4, attempts: 3, backoff: 50ms}
policy: {manual_over_days: 100}
datasets:
  src: {table: src, partition: {column: day}}
  agg:
    table: agg
    partition: {column: day}
    upstream: [src]
    job:
      sql: |
        DELETE FROM agg WHERE day = :partition;
        INSERT INTO agg SELECT day, k, ` + expr + ` FROM src WHERE day = :partition GROUP BY day, k;
        SELECT pg_sleep(0.15)
`
}

// aggWarehouse opens the warehouse at dsn with src (20 days of rows) and
// an empty agg.
func aggWarehouse(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, q := range []string{
		`CREATE TABLE src (day date, k int, v int)`,
		`INSERT INTO src SELECT date '2026-09-01' + (g % 20), g % 7, g % 101 FROM generate_series(1, 4000) g`,
		`CREATE TABLE agg (day date, k int, v bigint)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// aggDiffers counts the rows where agg differs from a clean build.
func aggDiffers(t *testing.T, wh *sql.DB) int {
	t.Helper()
	var bad int
	if err := wh.QueryRow(`SELECT count(*) FROM (SELECT day, k, sum(v) AS v FROM src GROUP BY day, k) want
		FULL JOIN agg USING (day, k) WHERE want.v IS DISTINCT FROM agg.v`).Scan(&bad); err != nil {
		t.Fatal(err)
	}
	return bad
}

// stray is an approved plan of planned (a refill.yaml) over 20 days, with
// a worker serving it from another refill.yaml, stray.
type stray struct {
	dir, id string
	worker  *background
	stop    func()
}

func strayWorker(t *testing.T, planned, strayYAML string) stray {
	t.Helper()
	dir, rogue := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "refill.yaml"), []byte(planned), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rogue, "refill.yaml"), []byte(strayYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, dir, nil, "plan", "src", "--from", "2026-09-01", "--to", "2026-09-20", "--reason", "a stray worker", "--as", "alice", "-o", "json")
	if r.code != 0 {
		t.Fatalf("plan: %s", r.stderr)
	}
	id := decode[planJSON](t, r.stdout).ID
	if r := run(t, dir, nil, "approve", id, "--as", "bob"); r.code != 0 {
		t.Fatalf("approve: %s", r.stderr)
	}
	w := stray{dir: dir, id: id, worker: startRefill(t, rogue, "worker")}
	// It serves once it says so; the apply that follows finds it there.
	w.worker.until(t, "the stray worker serving", time.Minute, func() bool {
		return strings.Contains(w.worker.output(), "worker: serving partition jobs")
	})
	w.stop = sync.OnceFunc(func() {
		_ = w.worker.cmd.Process.Signal(syscall.SIGTERM)
		w.worker.wait(t, time.Minute)
	})
	t.Cleanup(w.stop)
	return w
}

// published counts the partitions the stray worker recorded published.
func (w stray) published(t *testing.T, stateDSN string) int {
	t.Helper()
	state, err := sql.Open("pgx", stateDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()
	var n int
	if err := state.QueryRow(`SELECT count(*) FROM audit_log WHERE plan_id = $1 AND event = 'partition_published' AND detail LIKE $2`,
		w.id, `%:`+itoa(w.worker.cmd.Process.Pid)+`"%`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// publishedBy counts a plan's partitions published by worker (host:pid)
// in a PostgreSQL state store.
func publishedBy(t *testing.T, stateDSN, id, worker string) int {
	t.Helper()
	db, err := sql.Open("pgx", stateDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	_ = db.QueryRow(`SELECT count(*) FROM audit_log WHERE plan_id = $1 AND event = 'partition_published' AND detail::jsonb->>'worker' = $2`, id, worker).Scan(&n)
	return n
}
