package run

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/gate"
	"github.com/refill-dev/refill/internal/whtest"
	"github.com/refill-dev/refill/planner"
	"github.com/refill-dev/refill/store"
	"github.com/refill-dev/refill/warehouse"
)

// outage builds a runner over a warehouse of the given driver whose agg
// job rebuilds 20 partitions, and an approved plan for them.
func outage(t *testing.T, driver string, attempts int, to string) (*Runner, *control.Control, *whtest.Warehouse, *store.Store, string) {
	t.Helper()
	w := whtest.Open(t, driver)
	w.Exec(t,
		"CREATE TABLE src (day TEXT, v INTEGER)",
		w.Pick(
			`WITH RECURSIVE d(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM d WHERE i < 19) INSERT INTO src SELECT date('2026-10-01', '+' || i || ' days'), i FROM d`,
			`INSERT INTO src SELECT to_char(date '2026-10-01' + i, 'YYYY-MM-DD'), i FROM generate_series(0, 19) i`),
		"CREATE TABLE agg (day TEXT, v INTEGER)",
	)
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "state.db"), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := &refill.Config{Policy: refill.DefaultPolicy(), Run: refill.RunConfig{MaxActive: 2, MaxActiveTotal: 4, Attempts: attempts},
		Datasets: map[string]*refill.Dataset{
			"src": {Name: "src", Table: "src", Partition: refill.PartitionSpec{Column: "day", Grain: refill.GrainDay}},
			"agg": {Name: "agg", Table: "agg", Partition: refill.PartitionSpec{Column: "day", Grain: refill.GrainDay}, Upstream: []string{"src"},
				Job: &refill.Job{Kind: refill.JobSQL, SQL: w.Pick(
					"DELETE FROM agg WHERE day = :partition; INSERT INTO agg SELECT day, v FROM src WHERE day = :partition; INSERT INTO agg SELECT day, v + 100 FROM src WHERE day = :partition",
					"DELETE FROM agg WHERE day = :partition; INSERT INTO agg SELECT day, v FROM src WHERE day = :partition; SELECT pg_sleep(0.05); INSERT INTO agg SELECT day, v + 100 FROM src WHERE day = :partition")}},
		}}
	p, err := planner.New(cfg, w.WH, st)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pl, err := p.Plan(ctx, planner.Request{Targets: []string{"src"}, From: "2026-10-01", To: to, Reason: "outage", Actor: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	c := &control.Control{Config: cfg, Store: st, Warehouse: w.WH}
	if _, err := c.Approve(ctx, pl.ID, "bob", ""); err != nil {
		t.Fatal(err)
	}
	r := &Runner{Config: cfg, Warehouse: w.WH, Store: st, Backoff: 20 * time.Millisecond,
		Gate: &gate.Gate{Config: cfg, Warehouse: w.WH, Store: st}}
	c.Executor = r
	return r, c, w, st, pl.ID
}

// partial counts partitions of agg that hold one of their two rows: a
// half-written partition, which must never be visible.
func partial(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM (SELECT day FROM agg GROUP BY day HAVING count(*) <> 2) x`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSQLiteWarehouseLockedStopsCleanlyAndResumes locks the SQLite
// warehouse for longer than the attempts can wait: the run fails cleanly,
// nothing half-written is visible, and a resume after the lock is released
// finishes the job.
func TestSQLiteWarehouseLockedStopsCleanlyAndResumes(t *testing.T) {
	t.Parallel()
	// Two partitions: each attempt waits out the warehouse's 5 s busy
	// timeout before it fails.
	_, c, w, st, id := outage(t, "sqlite", 2, "2026-10-02")
	ctx := context.Background()
	// Another process takes the database's write lock and keeps it.
	lock, err := w.DB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	err = c.Apply(ctx, id, "alice")
	if err == nil || !strings.Contains(err.Error(), "failed after its last attempt") {
		t.Fatalf("apply against a locked warehouse: %v", err)
	}
	if p, _ := st.Plan(ctx, id); p.Status != refill.StatusFailed {
		t.Errorf("status %s, want failed", p.Status)
	}
	if _, err := lock.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	lock.Close()
	if n := partial(t, w.DB); n != 0 {
		t.Errorf("%d half-written partitions visible", n)
	}
	if err := c.Apply(ctx, id, "alice"); err != nil {
		t.Fatalf("resume once the warehouse is back: %v", err)
	}
	var rows int
	if err := w.DB.QueryRow("SELECT count(*) FROM agg").Scan(&rows); err != nil || rows != 4 || partial(t, w.DB) != 0 {
		t.Errorf("after resume: %d rows (%v), want 4 in 2 whole partitions", rows, err)
	}
}

// TestPostgresConnectionsKilledMidRun terminates the warehouse's server
// connections again and again while a run is going: each partition waits
// the failures out (run.outage_patience) without spending an attempt —
// run.attempts is 1 — and the run finishes with every partition whole and
// published once.
func TestPostgresConnectionsKilledMidRun(t *testing.T) {
	t.Parallel()
	r, c, w, st, id := outage(t, "postgres", 1, "2026-10-20")
	r.Config.Run.OutagePatience = refill.Duration(time.Minute)
	var log logBuf
	r.Log = &log
	app := fmt.Sprintf("refill_outage_%d", time.Now().UnixNano())
	wh, err := warehouse.Open(context.Background(), w.DSN+"&application_name="+app, "")
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	r.Warehouse, r.Gate.Warehouse, c.Warehouse = wh, wh, wh
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin, err := sql.Open("pgx", strings.Split(w.DSN, "?")[0]+"?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var killed atomic.Int64
	go func() {
		// The source gate before the run fails closed on a broken
		// connection, as it should: start killing once the run is going
		// (the plan is running, past its gate).
		for ctx.Err() == nil {
			if p, err := st.Plan(ctx, id); err == nil && p.Status == refill.StatusRunning {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		// Kill until three connections died mid-statement; then let it
		// finish.
		for ctx.Err() == nil && killed.Load() < 3 {
			var n int64
			// Only this run's warehouse connections, named by their
			// application_name: other tests share the server.
			_ = admin.QueryRowContext(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE application_name = $1 AND state = 'active'`, app).Scan(&n)
			killed.Add(n)
			time.Sleep(25 * time.Millisecond)
		}
	}()
	if err := c.Apply(ctx, id, "alice"); err != nil {
		t.Fatalf("apply while connections are killed: %v", err)
	}
	cancel()
	t.Logf("%d warehouse connections killed during the run", killed.Load())
	if killed.Load() == 0 {
		t.Fatal("no connection was killed: the test did not test anything")
	}
	var rows int
	if err := w.DB.QueryRow("SELECT count(*) FROM agg").Scan(&rows); err != nil || rows != 40 || partial(t, w.DB) != 0 {
		t.Errorf("after the run: %d rows (%v), want 40 in 20 whole partitions", rows, err)
	}
	pubs, err := st.Published(context.Background(), id)
	if err != nil || len(pubs) != 20 {
		t.Errorf("published %d (%v), want 20", len(pubs), err)
	}
	for _, p := range pubs {
		if p.Attempt != 1 {
			t.Errorf("%s was published by attempt %d: a killed connection spent an attempt", p.Partition, p.Attempt)
		}
	}
	if waits := strings.Count(log.String(), "waiting for the warehouse (since"); waits == 0 {
		t.Errorf("no partition waited for the warehouse although %d connections were killed:\n%s", killed.Load(), log.String())
	} else {
		t.Logf("%d waits for the warehouse", waits)
	}
}
