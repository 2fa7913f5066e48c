package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/refill-dev/refill/internal/pgtest"
)

// proxy stands between refill and a PostgreSQL server, as a network
// would: cut drops every connection and refuses new ones (its port
// closed), restore opens it again on the same address.
type proxy struct {
	t      *testing.T
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]bool
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	p := &proxy{t: t, target: target, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
}

func (p *proxy) pipe(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // cut since it was accepted
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	go func() { _, _ = io.Copy(up, c); up.Close(); c.Close() }()
	_, _ = io.Copy(c, up)
	up.Close()
	c.Close()
}

// cut closes the port and every connection through it.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

// restore opens the port again.
func (p *proxy) restore() {
	p.t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // the port was just closed: it may linger a moment
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			p.serve(ln)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.t.Fatalf("reopening the proxy on %s: %v", p.addr, err)
}

// through returns dsn with its host replaced by the proxy's address.
func (p *proxy) through(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.addr
	return u.String()
}

// pgTarget is the host:port of the test PostgreSQL server.
func pgTarget(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(pgtest.DSN())
	if err != nil {
		t.Fatal(err)
	}
	if u.Port() == "" {
		return u.Hostname() + ":5432"
	}
	return u.Host
}

// outageFor is how long the outages of these tests last: what the issue
// that asked for riding them out measured (25 s for a warehouse, 30 s for
// the state store); REFILL_TEST_OUTAGE shortens them while working on it.
func outageFor(t *testing.T, d time.Duration) time.Duration {
	if s := os.Getenv("REFILL_TEST_OUTAGE"); s != "" {
		v, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("REFILL_TEST_OUTAGE: %v", err)
		}
		return v
	}
	return d
}

// background is a refill process the test watches: its output, and its
// end.
type background struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan error
}

func (b *background) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out.Write(p)
}

func (b *background) output() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out.String()
}

func startRefill(t *testing.T, dir string, args ...string) *background {
	t.Helper()
	b := &background{done: make(chan error, 1)}
	b.cmd = exec.Command(binary, args...)
	b.cmd.Dir = dir
	b.cmd.Env = append(os.Environ(), "REFILL_NOW="+demoNow, "REFILL_USER=", "REFILL_CONFIG=")
	b.cmd.Stdout, b.cmd.Stderr = b, b
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { b.done <- b.cmd.Wait() }()
	t.Cleanup(func() {
		_ = b.cmd.Process.Kill()
		<-b.done
	})
	return b
}

// until waits for cond, checking whenever the process writes or every
// 20 ms, failing after limit or when the process ends first.
func (b *background) until(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		select {
		case err := <-b.done:
			b.done <- err
			t.Fatalf("the process ended (%v) before %s:\n%s", err, what, b.output())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %s:\n%s", what, limit, b.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wait waits for the process to end and returns its exit code.
func (b *background) wait(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case err := <-b.done:
		b.done <- err
		if err == nil {
			return 0
		}
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		t.Fatalf("waiting for refill: %v", err)
	case <-time.After(limit):
		t.Fatalf("refill still running after %s:\n%s", limit, b.output())
	}
	return -1
}

// published counts a plan's published partitions in a state store.
func publishedIn(t *testing.T, driver, dsn, id string) int {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q := `SELECT count(*) FROM run_partitions WHERE plan_id = ?`
	if driver == "pgx" {
		q = strings.Replace(q, "?", "$1", 1)
	}
	var n int
	if err := db.QueryRow(q, id).Scan(&n); err != nil {
		return -1 // the store may be away
	}
	return n
}

// TestWarehouseOutageIsRiddenOut: the PostgreSQL warehouse goes away for
// 25 s in the middle of a run (every connection dropped, new ones
// refused); the run waits, says so in its log and in refill show, and
// finishes on its first apply, every partition published once by its
// first attempt (run.attempts is 1: waiting spends none).
func TestWarehouseOutageIsRiddenOut(t *testing.T) {
	t.Parallel()
	whDSN := pgSchema(t)
	wh, err := sql.Open("pgx", whDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	for _, q := range []string{
		`CREATE TABLE src (day date, v int)`,
		`INSERT INTO src SELECT date '2026-09-01' + (g % 12), g FROM generate_series(1, 1200) g`,
		`CREATE TABLE agg (day date, v bigint)`,
	} {
		if _, err := wh.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	px := newProxy(t, pgTarget(t))
	dir := smallProject(t, `version: 1
warehouse: "`+px.through(t, whDSN)+`"
run: {max_active: 2, attempts: 1}
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
        INSERT INTO agg SELECT day, sum(v) FROM src WHERE day = :partition GROUP BY day;
        SELECT pg_sleep(0.3)
`)
	id := decode[planJSON](t, step(t, dir, 0, "", "plan", "src", "--from", "2026-09-01", "--to", "2026-09-12", "--reason", "weather", "--as", "alice", "-o", "json").stdout).ID
	step(t, dir, 0, "", "approve", id, "--as", "bob")
	state := filepath.Join(dir, ".refill", "state.db")
	apply := startRefill(t, dir, "apply", id, "--as", "alice")
	apply.until(t, "first partition published", time.Minute, func() bool { return publishedIn(t, "sqlite", state, id) >= 1 })
	px.cut()
	cutAt := time.Now()
	apply.until(t, "wait for the warehouse", time.Minute, func() bool { return strings.Contains(apply.output(), "waiting for the warehouse (since") })
	if out := step(t, dir, 0, "", "show", id).stdout; !strings.Contains(out, "waiting for the warehouse (since") {
		t.Errorf("show during the outage does not say the run waits:\n%s", out)
	}
	time.Sleep(time.Until(cutAt.Add(outageFor(t, 25*time.Second))))
	px.restore()
	if code := apply.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("apply across a %s warehouse outage exited %d:\n%s", outageFor(t, 25*time.Second), code, apply.output())
	}
	if n := publishedIn(t, "sqlite", state, id); n != 12 {
		t.Errorf("%d of 12 partitions published", n)
	}
	var rows, wrong int
	if err := wh.QueryRow(`SELECT count(*), count(*) FILTER (WHERE v <> (SELECT sum(s.v) FROM src s WHERE s.day = agg.day)) FROM agg`).Scan(&rows, &wrong); err != nil || rows != 12 || wrong != 0 {
		t.Errorf("agg after the run: %d rows, %d wrong (%v)", rows, wrong, err)
	}
	if !strings.Contains(apply.output(), "the warehouse answers again after") {
		t.Errorf("the log never said the warehouse was back:\n%s", apply.output())
	}
}

// TestStateStoreOutageIsRiddenOut: the PostgreSQL state store goes away
// for 30 s in the middle of a run; refill apply waits instead of exiting
// and finishes the plan, and no plan is left running.
func TestStateStoreOutageIsRiddenOut(t *testing.T) {
	t.Parallel()
	stateDSN := pgSchema(t)
	px := newProxy(t, pgTarget(t))
	dir, id := sleepyAggPlan(t, `state: "`+px.through(t, stateDSN)+`"`, "0.3")
	apply := startRefill(t, dir, "apply", id, "--as", "alice")
	apply.until(t, "first partition published", time.Minute, func() bool { return publishedIn(t, "pgx", stateDSN, id) >= 1 })
	px.cut()
	cutAt := time.Now()
	apply.until(t, "wait for the state store", time.Minute, func() bool { return strings.Contains(apply.output(), "waiting for the state store (since") })
	time.Sleep(time.Until(cutAt.Add(outageFor(t, 30*time.Second))))
	px.restore()
	if code := apply.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("apply across a %s state-store outage exited %d:\n%s", outageFor(t, 30*time.Second), code, apply.output())
	}
	if n := publishedIn(t, "pgx", stateDSN, id); n != 12 {
		t.Errorf("%d of 12 partitions published", n)
	}
	db, err := sql.Open("pgx", stateDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var status string
	var running int
	if err := db.QueryRow(`SELECT status, (SELECT count(*) FROM plans WHERE status = 'running') FROM plans WHERE id = $1`, id).Scan(&status, &running); err != nil || status != "applied" || running != 0 {
		t.Errorf("after the run: plan %s, %d plan(s) still running (%v)", status, running, err)
	}
}

// TestSQLiteLockedByAnotherProcessIsRiddenOut: another process holds the
// SQLite warehouse's write lock for 25 s mid-run; the run waits it out
// and finishes on its first apply.
func TestSQLiteLockedByAnotherProcessIsRiddenOut(t *testing.T) {
	t.Parallel()
	dir, id := sleepyAggPlan(t, "", "0.5")
	state := filepath.Join(dir, ".refill", "state.db")
	apply := startRefill(t, dir, "apply", id, "--as", "alice")
	apply.until(t, "first partition published", time.Minute, func() bool { return publishedIn(t, "sqlite", state, id) >= 1 })
	// The other process: this test binary again, holding the lock.
	locker := exec.Command(os.Args[0])
	locker.Env = append(os.Environ(), lockEnv+"="+filepath.Join(dir, "wh.db"))
	locker.Stderr = apply // a panic shows with the apply's output
	stdin, err := locker.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := locker.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := locker.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = locker.Process.Kill(); _ = locker.Wait() }()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || strings.TrimSpace(line) != "locked" {
		t.Fatalf("the locking process said %q, %v", line, err)
	}
	lockedAt := time.Now()
	apply.until(t, "wait for the warehouse", time.Minute, func() bool { return strings.Contains(apply.output(), "waiting for the warehouse (since") })
	time.Sleep(time.Until(lockedAt.Add(outageFor(t, 25*time.Second))))
	stdin.Close() // the locker rolls back and exits
	if err := locker.Wait(); err != nil {
		t.Fatalf("the locking process: %v", err)
	}
	if code := apply.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("apply across a %s lock exited %d:\n%s", outageFor(t, 25*time.Second), code, apply.output())
	}
	if n := publishedIn(t, "sqlite", state, id); n != 12 {
		t.Errorf("%d of 12 partitions published", n)
	}
}

// lockEnv, set, makes the test binary the other process of
// TestSQLiteLockedByAnotherProcessIsRiddenOut: it takes the SQLite file's
// write lock, says "locked", and holds it until its stdin closes.
const lockEnv = "REFILL_TEST_LOCK_SQLITE"

func lockSQLite(path string) {
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(20000)")
	if err != nil {
		panic(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		panic(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN EXCLUSIVE"); err != nil {
		panic(err)
	}
	os.Stdout.WriteString("locked\n")
	_, _ = io.Copy(io.Discard, os.Stdin)
	_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
	conn.Close()
	db.Close()
}

// TestSlowSQLitePartitionsTakeTurns: four partitions of a SQLite
// warehouse, each holding the write lock for over two seconds, run four
// at a time, with no patience for outages and one attempt each: refill's
// writers take turns, so none fails on SQLite's 5 s busy timeout.
func TestSlowSQLitePartitionsTakeTurns(t *testing.T) {
	t.Parallel()
	dir := smallProject(t, `version: 1
warehouse: sqlite:wh.db
run: {max_active: 4, max_active_total: 4, attempts: 1, outage_patience: 0s}
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
        INSERT INTO agg SELECT day, v FROM src WHERE day = :partition
          AND (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 4500000) SELECT count(*) FROM c) > 0
`, `CREATE TABLE src (day TEXT, v INTEGER)`,
		`INSERT INTO src VALUES ('2026-09-01', 1), ('2026-09-02', 2), ('2026-09-03', 3), ('2026-09-04', 4)`,
		`CREATE TABLE agg (day TEXT, v INTEGER)`)
	id := decode[planJSON](t, step(t, dir, 0, "", "plan", "src", "--from", "2026-09-01", "--to", "2026-09-04", "--reason", "slow", "--as", "alice", "-o", "json").stdout).ID
	step(t, dir, 0, "", "approve", id, "--as", "bob")
	r := step(t, dir, 0, "", "apply", id, "--as", "alice")
	if strings.Contains(r.stderr, "locked") {
		t.Errorf("a partition met the lock:\n%s", r.stderr)
	}
	if n := countPublished(t, dir, id); n != 4 {
		t.Errorf("%d of 4 partitions published", n)
	}
}

// TestSideEffectsNeverRunTwice: refill apply is killed while a
// side_effects job is delivering a partition (the delivery went out; its
// record never did). Applying again does not deliver it again: the
// partition needs review and apply exits 4 saying so; after refill
// resolve --ran it counts as published and the run finishes, each
// partition delivered once.
func TestSideEffectsNeverRunTwice(t *testing.T) {
	t.Parallel()
	dir := smallProject(t, `version: 1
warehouse: sqlite:wh.db
run: {max_active: 1, max_active_total: 1}
datasets:
  feed:
    job:
      side_effects: true
      command: ["sh", "-c", "echo $REFILL_PARTITION $REFILL_ATTEMPT_KEY >> delivered.log; sleep 2"]
`)
	id := decode[planJSON](t, step(t, dir, 0, "", "plan", "feed", "--from", "2026-11-01", "--to", "2026-11-03", "--reason", "resend", "--as", "alice", "-o", "json").stdout).ID
	step(t, dir, 0, "", "approve", id, "--as", "bob")
	delivered := func() []string {
		b, _ := os.ReadFile(filepath.Join(dir, "delivered.log"))
		var parts []string
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if f := strings.Fields(l); len(f) > 0 {
				parts = append(parts, f[0])
			}
		}
		return parts
	}
	apply := startRefill(t, dir, "apply", id, "--as", "alice")
	apply.until(t, "a delivery", time.Minute, func() bool { return len(delivered()) >= 1 })
	// The delivery went out; kill refill (and the job) before it records it.
	_ = syscall.Kill(-apply.cmd.Process.Pid, syscall.SIGKILL)
	_ = apply.cmd.Process.Kill()
	apply.wait(t, time.Minute)
	first := delivered()
	if len(first) != 1 {
		t.Fatalf("delivered before the kill: %v", first)
	}
	r := step(t, dir, 4, "needs review", "apply", id, "--as", "alice")
	if got := delivered(); len(got) != 3 || got[1] == first[0] || got[2] == first[0] {
		t.Fatalf("after the second apply: delivered %v — %s must not go out twice\n%s", got, first[0], r.stderr)
	}
	show := step(t, dir, 0, "", "show", id).stdout
	if !strings.Contains(show, "Needs review") || !strings.Contains(show, first[0]) || !strings.Contains(show, "refill resolve "+id) {
		t.Errorf("show does not say what needs review:\n%s", show)
	}
	if s := decode[struct {
		Status string `json:"status"`
	}](t, step(t, dir, 0, "", "show", id, "-o", "json").stdout); s.Status != "needs_review" {
		t.Errorf("status %s, want needs_review", s.Status)
	}
	step(t, dir, 2, "--ran", "resolve", id, "--partition", first[0], "--reason", "receipt 8812")
	step(t, dir, 2, "reason", "resolve", id, "--partition", first[0], "--ran", "--as", "alice")
	step(t, dir, 0, "", "resolve", id, "--partition", first[0], "--ran", "--reason", "the partner's receipt 8812", "--as", "alice")
	step(t, dir, 0, "", "apply", id, "--as", "alice")
	if got := delivered(); len(got) != 3 {
		t.Errorf("after resolve and apply: delivered %v, want each of 3 once", got)
	}
}

// TestWorkerFinishesARunWhoseApplyDied: refill apply is killed with
// SIGKILL mid-run; a refill worker sharing the PostgreSQL state store
// finds the run nobody holds and finishes the plan, every partition
// published once, without anyone running apply again.
func TestWorkerFinishesARunWhoseApplyDied(t *testing.T) {
	t.Parallel()
	stateDSN := pgSchema(t)
	dir := smallProject(t, `version: 1
warehouse: sqlite:wh.db
state: "`+stateDSN+`"
run: {max_active: 2, attempts: 2}
policy: {manual_over_days: 100}
datasets:
  feed:
    job:
      command: ["sh", "-c", "sleep 0.3"]
`)
	id := decode[planJSON](t, step(t, dir, 0, "", "plan", "feed", "--from", "2026-09-01", "--to", "2026-09-12", "--reason", "orphan", "--as", "alice", "-o", "json").stdout).ID
	step(t, dir, 0, "", "approve", id, "--as", "bob")
	worker := startRefill(t, dir, "worker")
	apply := startRefill(t, dir, "apply", id, "--as", "alice")
	apply.until(t, "first partition published", time.Minute, func() bool { return publishedIn(t, "pgx", stateDSN, id) >= 1 })
	_ = apply.cmd.Process.Kill()
	apply.wait(t, time.Minute)
	db, err := sql.Open("pgx", stateDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	status := func() string {
		var s string
		_ = db.QueryRow(`SELECT status FROM plans WHERE id = $1`, id).Scan(&s)
		return s
	}
	worker.until(t, "the worker finishing the plan", 2*time.Minute, func() bool { return status() == "applied" })
	var parts, dup int
	if err := db.QueryRow(`SELECT count(DISTINCT partition), count(*) - count(DISTINCT partition) FROM audit_log WHERE plan_id = $1 AND event = 'partition_published'`, id).Scan(&parts, &dup); err != nil || parts != 12 || dup != 0 {
		t.Errorf("published %d partitions, %d twice (%v)", parts, dup, err)
	}
	if !strings.Contains(worker.output(), "nobody was running it; resumed here") {
		t.Errorf("the worker never said it resumed the plan:\n%s", worker.output())
	}
}

// TestKilledWorkersPartitionGoesOn: a refill worker killed with SIGKILL
// while it builds a partition does not stall that partition for
// run.rescue_after (10 minutes here): the apply waiting on the run sees
// that the job's slot is dead and queues the partition again, and the plan
// ends applied, every partition published once. run.max_active holds
// across the two processes: no two of the dataset's jobs ever overlap.
func TestKilledWorkersPartitionGoesOn(t *testing.T) {
	t.Parallel()
	stateDSN, dir, id := pidPlan(t, "2026-09-10", "killed worker")
	worker := startRefill(t, dir, "worker")
	apply := startRefill(t, dir, "apply", id, "--as", "alice")
	// The worker is killed in the middle of a partition of its own.
	victim := midPartition(t, dir, worker, apply)
	_ = worker.cmd.Process.Kill()
	worker.wait(t, time.Minute)
	if code := apply.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("apply exited %d after the worker died:\n%s", code, apply.output())
	}
	if !strings.Contains(apply.output(), "feed "+victim+": the process working it is gone; queued again") {
		t.Errorf("apply never said it queued %s again:\n%s", victim, apply.output())
	}
	db, err := sql.Open("pgx", stateDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var status string
	var parts, dup int
	if err := db.QueryRow(`SELECT status FROM plans WHERE id = $1`, id).Scan(&status); err != nil || status != "applied" {
		t.Errorf("plan %s is %s (%v), want applied", id, status, err)
	}
	if err := db.QueryRow(`SELECT count(DISTINCT partition), count(*) - count(DISTINCT partition) FROM audit_log WHERE plan_id = $1 AND event = 'partition_published'`, id).Scan(&parts, &dup); err != nil || parts != 10 || dup != 0 {
		t.Errorf("published %d partitions, %d twice (%v)", parts, dup, err)
	}
	// Each lost job is queued again once (the dead worker may have held
	// another besides the one it was building), and said once.
	for _, line := range strings.Split(apply.output(), "\n") {
		if i := strings.Index(line, "feed 2026-"); i >= 0 && strings.Contains(line, "queued again") {
			if n := strings.Count(apply.output(), line[i:]); n != 1 {
				t.Errorf("apply said %d times %q, want once:\n%s", n, line[i:], apply.output())
			}
		}
	}
	// max_active 1 across both processes: each job's start comes after
	// the previous job's end, whichever process ran them (the killed
	// job has no end, and its partition ran again later).
	atMostOneAtATime(t, dir)
}

// atMostOneAtATime fails when two pidJob jobs that ended overlapped.
func atMostOneAtATime(t *testing.T, dir string) {
	t.Helper()
	type span struct{ start, end time.Time }
	var spans []span
	ends, _ := filepath.Glob(filepath.Join(dir, "pids", "*.end"))
	for _, f := range ends {
		s, err1 := os.Stat(strings.TrimSuffix(f, ".end") + ".start")
		e, err2 := os.Stat(f)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		spans = append(spans, span{s.ModTime(), e.ModTime()})
	}
	if len(spans) == 0 {
		t.Fatal("no job ended")
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
	for i := 1; i < len(spans); i++ {
		if spans[i].start.Before(spans[i-1].end) {
			t.Errorf("two jobs of one dataset overlapped with max_active 1: %v–%v and %v–%v", spans[i-1].start, spans[i-1].end, spans[i].start, spans[i].end)
		}
	}
}

// TestMaxActiveIsTheRuns: a worker started while refill.yaml said
// max_active 3 holds a run queued under max_active 1 to one partition at a
// time: the limit travels with the run, not with each process's config.
func TestMaxActiveIsTheRuns(t *testing.T) {
	t.Parallel()
	stateDSN := pgSchema(t)
	cfg := func(n int) string {
		return fmt.Sprintf(`version: 1
warehouse: sqlite:wh.db
state: "%s"
run: {max_active: %d, attempts: 2}
policy: {manual_over_days: 100}
datasets:
  feed:
    job:
      command: %s
`, stateDSN, n, pidJob)
	}
	dir := smallProject(t, cfg(3))
	if err := os.Mkdir(filepath.Join(dir, "pids"), 0o755); err != nil {
		t.Fatal(err)
	}
	worker := startRefill(t, dir, "worker")
	worker.until(t, "the worker serving", time.Minute, func() bool { return strings.Contains(worker.output(), "serving partition jobs") })
	if err := os.WriteFile(filepath.Join(dir, "refill.yaml"), []byte(cfg(1)), 0o644); err != nil {
		t.Fatal(err)
	}
	id := decode[planJSON](t, step(t, dir, 0, "", "plan", "feed", "--from", "2026-09-01", "--to", "2026-09-06", "--reason", "limits", "--as", "alice", "-o", "json").stdout).ID
	step(t, dir, 0, "", "approve", id, "--as", "bob")
	step(t, dir, 0, "6 of 6 partitions published", "apply", id, "--as", "alice")
	atMostOneAtATime(t, dir)
}

// pidPlan writes a project of one dataset of pidJob, one partition at a
// time, on a PostgreSQL state store, and plans and approves it from
// 2026-09-01 to last: its state DSN, directory and plan.
func pidPlan(t *testing.T, last, reason string) (stateDSN, dir, id string) {
	t.Helper()
	stateDSN = pgSchema(t)
	dir = smallProject(t, `version: 1
warehouse: sqlite:wh.db
state: "`+stateDSN+`"
run: {max_active: 1, max_active_total: 1, attempts: 2}
policy: {manual_over_days: 100}
datasets:
  feed:
    job:
      command: `+pidJob+`
`)
	if err := os.Mkdir(filepath.Join(dir, "pids"), 0o755); err != nil {
		t.Fatal(err)
	}
	id = decode[planJSON](t, step(t, dir, 0, "", "plan", "feed", "--from", "2026-09-01", "--to", last, "--reason", reason, "--as", "alice", "-o", "json").stdout).ID
	step(t, dir, 0, "", "approve", id, "--as", "bob")
	return stateDSN, dir, id
}

// pidJob is a command job that leaves, in pids/, the process id of the
// refill that ran it when it starts (PARTITION.start) and when it ends
// (PARTITION.end), a second later.
const pidJob = `["sh", "-c", "echo $PPID > pids/{{partition}}.start; sleep 1; echo $PPID > pids/{{partition}}.end"]`

// midPartition waits until worker is building a partition (of pidJob) and
// returns it.
func midPartition(t *testing.T, dir string, worker, apply *background) string {
	t.Helper()
	wpid := strconv.Itoa(worker.cmd.Process.Pid)
	var mid string
	apply.until(t, "the worker building a partition", time.Minute, func() bool {
		starts, _ := filepath.Glob(filepath.Join(dir, "pids", "*.start"))
		for _, f := range starts {
			if b, _ := os.ReadFile(f); strings.TrimSpace(string(b)) == wpid {
				if _, err := os.Stat(strings.TrimSuffix(f, ".start") + ".end"); err != nil {
					mid = strings.TrimSuffix(filepath.Base(f), ".start")
					return true
				}
			}
		}
		return false
	})
	return mid
}

// TestWorkerDrainsOnSIGTERM: a refill worker told to stop (SIGTERM, as
// every deploy does) lets the partition it is building finish within
// --grace instead of killing its job, then exits 0; the apply carries the
// plan to its end.
func TestWorkerDrainsOnSIGTERM(t *testing.T) {
	t.Parallel()
	stateDSN, dir, id := pidPlan(t, "2026-09-06", "deploy")
	worker := startRefill(t, dir, "worker", "--grace", "1m")
	apply := startRefill(t, dir, "apply", id, "--as", "alice")
	mid := midPartition(t, dir, worker, apply)
	_ = worker.cmd.Process.Signal(syscall.SIGTERM)
	if code := worker.wait(t, time.Minute); code != 0 {
		t.Errorf("worker exited %d on SIGTERM:\n%s", code, worker.output())
	}
	end, err := os.ReadFile(filepath.Join(dir, "pids", mid+".end"))
	if err != nil || strings.TrimSpace(string(end)) != strconv.Itoa(worker.cmd.Process.Pid) {
		t.Errorf("partition %s the worker was building when told to stop: ended by %q (%v), want by the worker:\n%s", mid, end, err, worker.output())
	}
	if code := apply.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("apply exited %d:\n%s", code, apply.output())
	}
	if n := publishedIn(t, "pgx", stateDSN, id); n != 6 {
		t.Errorf("%d partitions published, want 6", n)
	}
}

// sleepyAggPlan writes a project whose agg, over 12 days of src, is a
// command job sleeping sleep seconds a partition (stateLine, when not "",
// names the state store), and plans and approves agg's rebuild.
func sleepyAggPlan(t *testing.T, stateLine, sleep string) (dir, id string) {
	t.Helper()
	dir = smallProject(t, `version: 1
warehouse: sqlite:wh.db
`+stateLine+`
run: {max_active: 2, attempts: 1}
policy: {manual_over_days: 100}
datasets:
  src: {table: src, partition: {column: day}}
  agg:
    table: agg
    partition: {column: day}
    upstream: [src]
    job:
      command: ["sh", "-c", "sleep `+sleep+`"]
`, `CREATE TABLE src (day TEXT, v INTEGER)`,
		`WITH RECURSIVE d(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM d WHERE i < 11) INSERT INTO src SELECT date('2026-09-01', '+' || i || ' days'), i FROM d`,
		`CREATE TABLE agg (day TEXT, v INTEGER)`)
	id = decode[planJSON](t, step(t, dir, 0, "", "plan", "src", "--from", "2026-09-01", "--to", "2026-09-12", "--reason", "weather", "--as", "alice", "-o", "json").stdout).ID
	step(t, dir, 0, "", "approve", id, "--as", "bob")
	return dir, id
}
