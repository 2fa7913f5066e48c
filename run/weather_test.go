package run

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/internal/pgtest"
	"github.com/refill-dev/refill/store"
)

// TestTransientIsTheWeatherNotTheJob classifies real errors: what the
// drivers return when a server or a file is briefly away is waited out;
// a job's own failure, a refusal or a cancel never is.
func TestTransientIsTheWeatherNotTheJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A real refused connection: a port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, refused := net.Dial("tcp", addr)
	host, port, _ := net.SplitHostPort(addr)
	_, pgRefused := pgconn.Connect(ctx, fmt.Sprintf("postgres://x@%s:%s/x?connect_timeout=2", host, port))

	// A real SQLITE_BUSY: another connection holds the write lock.
	path := filepath.Join(t.TempDir(), "w.db")
	holder, err := sql.Open("sqlite", path+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	hc, err := holder.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	if _, err := hc.ExecContext(ctx, "CREATE TABLE t (x); BEGIN IMMEDIATE; INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	other, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, busy := other.ExecContext(ctx, "INSERT INTO t VALUES (2)")
	_, syntax := other.ExecContext(ctx, "INSERT INTO nowhere VALUES (2)")

	// A real PostgreSQL SQL error and a real serialization failure's code.
	pg, err := sql.Open("pgx", pgtest.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	_, pgSyntax := pg.ExecContext(ctx, "SELEC 1")
	_, pgDivide := pg.ExecContext(ctx, "SELECT 1/0")

	// A server that accepts and never answers: the connection times out.
	hole, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close()
	go func() {
		for {
			c, err := hole.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	hhost, hport, _ := net.SplitHostPort(hole.Addr().String())
	_, pgSilent := pgconn.Connect(ctx, fmt.Sprintf("postgres://x@%s:%s/x?connect_timeout=1", hhost, hport))

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"refused TCP", refused, true},
		{"refused PostgreSQL", pgRefused, true},
		{"PostgreSQL not answering", pgSilent, true},
		{"unknown host", fmt.Errorf("dial: %w", &net.DNSError{Err: "no such host", Name: "wh.invalid", IsNotFound: true}), false},
		{"the attempt's time limit", fmt.Errorf("query: %w", context.DeadlineExceeded), false},
		{"SQLite busy", busy, true},
		{"wrapped reset", fmt.Errorf("publish: %w", syscall.ECONNRESET), true},
		{"serialization failure", &pgconn.PgError{Code: "40001"}, true},
		{"read-only failover", fmt.Errorf("x: %w", &pgconn.PgError{Code: "25006"}), true},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"SQLite no such table", syntax, false},
		{"PostgreSQL syntax", pgSyntax, false},
		{"division by zero", pgDivide, false},
		{"job exit", errors.New("command exited with status 3"), false},
		{"refusal", refill.NotPermittedf("the plan is not approved"), false},
		{"bad input", refill.BadInputf("no such dataset"), false},
		{"cancelled", cancelled.Err(), false},
		{"cancelled while refused", errors.Join(context.Canceled, syscall.ECONNREFUSED), false},
		{"nil", nil, false},
	} {
		if tc.err == nil && tc.name != "nil" {
			t.Fatalf("%s: the test made no error", tc.name)
		}
		if got := Transient(tc.err); got != tc.want {
			t.Errorf("%s: Transient(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// TestSQLiteLockedIsWaitedOut: another process holds the SQLite
// warehouse's write lock for longer than its busy timeout; the run waits
// for it, says so, and finishes on its first apply, no partition spending
// a second attempt (run.attempts is 1).
func TestSQLiteLockedIsWaitedOut(t *testing.T) {
	t.Parallel()
	r, c, w, st, id := outage(t, "sqlite", 1, "2026-10-04")
	r.Config.Run.OutagePatience = refill.Duration(time.Minute)
	var log logBuf
	r.Log = &log
	ctx := context.Background()
	// Another connection, outside refill's turns as another process
	// would be, takes the write lock; it lets go six seconds after the
	// run first says it waits (past the 5 s busy timeout).
	lock, err := w.DB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	go func() {
		defer close(released)
		for !strings.Contains(log.String(), "waiting for the warehouse (since") {
			time.Sleep(10 * time.Millisecond)
		}
		// show says so, from the state store, while it waits.
		if s, err := c.Load(ctx, id); err != nil || len(s.Waits) == 0 || s.Waits[0].For != "warehouse" {
			t.Errorf("while waiting, show's waits = %+v, %v", s.Waits, err)
		}
		time.Sleep(6 * time.Second)
		_, _ = lock.ExecContext(ctx, "ROLLBACK")
	}()
	if err := c.Apply(ctx, id, "alice"); err != nil {
		t.Fatalf("apply over a warehouse locked for a while: %v\n%s", err, log.String())
	}
	<-released
	pubs, err := st.Published(ctx, id)
	if err != nil || len(pubs) != 4 {
		t.Fatalf("published %d (%v), want 4", len(pubs), err)
	}
	for _, p := range pubs {
		if p.Attempt != 1 {
			t.Errorf("%s used attempt %d: waiting out the lock spent an attempt", p.Partition, p.Attempt)
		}
	}
	if !strings.Contains(log.String(), "the warehouse answers again after") {
		t.Errorf("the log never said the warehouse was back:\n%s", log.String())
	}
	if waits, err := st.OutageWaits(ctx, id); err != nil || len(waits) != 0 {
		t.Errorf("waits left behind: %+v, %v", waits, err)
	}
}

// TestOutagePatienceRunsOut: past run.outage_patience the partition fails
// as any attempt would, cleanly, saying for how long what was away.
func TestOutagePatienceRunsOut(t *testing.T) {
	t.Parallel()
	r, c, w, st, id := outage(t, "sqlite", 1, "2026-10-01")
	r.Config.Run.OutagePatience = refill.Duration(2 * time.Second)
	ctx := context.Background()
	lock, err := w.DB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	err = c.Apply(ctx, id, "alice")
	if err == nil || !strings.Contains(err.Error(), "longer than run.outage_patience (2s)") {
		t.Fatalf("apply past its patience: %v", err)
	}
	if p, _ := st.Plan(ctx, id); p.Status != refill.StatusFailed {
		t.Errorf("status %s, want failed", p.Status)
	}
}

// logBuf is a log many goroutines write to, and a test reads.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// sideEffects makes mid a command job with side effects that appends
// each partition it runs, with its attempt key, to a file, and returns
// the file.
func sideEffects(t *testing.T, b *bundle, side bool) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "deliveries.log")
	b.r.Config.Datasets["mid"].Job = &refill.Job{Kind: refill.JobCommand, SideEffects: side,
		Command: []string{"sh", "-c", `echo "$REFILL_PARTITION $REFILL_ATTEMPT_KEY" >> "$0"`, out}}
	return out
}

func deliveries(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var parts []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			parts = append(parts, f[0])
		}
	}
	slices.Sort(parts)
	return parts
}

// TestSideEffectsOfUnknownOutcomeWaitForAPerson: an attempt at a
// side_effects partition that ended with its outcome unknown (its
// process vanished) is never run again on refill's own. The other
// partitions go on; the plan then needs review; refill resolve --not-ran
// lets it run again, --ran records it published without running it.
func TestSideEffectsOfUnknownOutcomeWaitForAPerson(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, b *bundle) {
		out := sideEffects(t, b, true)
		var log logBuf
		b.r.Log = &log
		pl := b.plan(t)
		ctx := context.Background()
		// Run 1's attempt at 11-02 began and its process vanished: no
		// outcome, no mark in the warehouse.
		if _, err := b.st.BeginAttempt(ctx, store.Attempt{PlanID: pl.ID, Dataset: "mid", Partition: "2026-11-02", Run: 1,
			Key: refill.AttemptKey(pl.ID, "mid", "2026-11-02", 1), Holder: "gone:1", Started: time.Now().Add(-time.Minute)}); err != nil {
			t.Fatal(err)
		}
		err := b.c.Apply(ctx, pl.ID, "alice")
		if !errors.Is(err, refill.ErrNotPermitted) || !strings.Contains(err.Error(), "needs review") {
			t.Fatalf("apply with a partition of unknown outcome: %v\n%s", err, log.String())
		}
		if got := deliveries(t, out); !slices.Equal(got, []string{"2026-11-01", "2026-11-03"}) {
			t.Fatalf("delivered %v, want 11-01 and 11-03 only: 11-02 may have gone out already", got)
		}
		s, err := b.c.Load(ctx, pl.ID)
		if err != nil {
			t.Fatal(err)
		}
		if s.Plan.Status != refill.StatusNeedsReview || len(s.Reviews) != 1 || s.Reviews[0].Partition != "2026-11-02" || !strings.Contains(s.Reviews[0].Why, "gone:1") {
			t.Fatalf("status %s, reviews %+v\n%s", s.Plan.Status, s.Reviews, log.String())
		}
		if s.Run != nil && !s.Run.Orphaned && s.Run.Holder != "" {
			t.Errorf("a plan waiting for review is still held by %s", s.Run.Holder)
		}
		// Applying again changes nothing while the review is open.
		if err := b.c.Apply(ctx, pl.ID, "alice"); !errors.Is(err, refill.ErrNotPermitted) {
			t.Fatalf("apply with the review still open: %v", err)
		}
		if got := deliveries(t, out); len(got) != 2 {
			t.Fatalf("apply with the review open delivered again: %v", got)
		}
		// While the plan runs (its other partitions), nobody's word is
		// taken: the run is still looking at the partition.
		if err := b.st.SetStatus(ctx, pl.ID, refill.StatusNeedsReview, refill.StatusRunning); err != nil {
			t.Fatal(err)
		}
		if _, err := b.c.Resolve(ctx, "alice", control.ResolveRequest{PlanID: pl.ID, Partition: "2026-11-02", Reason: "too early"}); !errors.Is(err, refill.ErrLocked) {
			t.Errorf("resolve while running: %v", err)
		}
		if err := b.st.SetStatus(ctx, pl.ID, refill.StatusRunning, refill.StatusNeedsReview); err != nil {
			t.Fatal(err)
		}
		// Bad words change nothing.
		for _, req := range []control.ResolveRequest{
			{PlanID: pl.ID, Partition: "2026-11-02", Ran: false},                         // no reason
			{PlanID: pl.ID, Partition: "2026-11-03", Ran: false, Reason: "not this one"}, // no review of it
		} {
			if _, err := b.c.Resolve(ctx, "alice", req); !errors.Is(err, refill.ErrBadInput) {
				t.Errorf("resolve %+v: %v", req, err)
			}
		}
		s, err = b.c.Resolve(ctx, "alice", control.ResolveRequest{PlanID: pl.ID, Partition: "2026-11-02", Ran: false, Reason: "the partner has no file for 11-02"})
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Reviews) != 0 || len(s.Unmet) != 0 {
			t.Fatalf("after resolve: reviews %+v, unmet %v", s.Reviews, s.Unmet)
		}
		if err := b.c.Apply(ctx, pl.ID, "alice"); err != nil {
			t.Fatalf("resume after resolve: %v\n%s", err, log.String())
		}
		if got := deliveries(t, out); !slices.Equal(got, []string{"2026-11-01", "2026-11-02", "2026-11-03"}) {
			t.Fatalf("delivered %v, want each partition once", got)
		}
		evs, err := b.st.Audit(ctx, store.AuditFilter{PlanID: pl.ID, Kind: refill.EventResolved})
		if err != nil || len(evs) != 1 || evs[0].Actor != "alice" || !strings.Contains(string(evs[0].Detail), "the partner has no file") {
			t.Errorf("the resolution's audit entry: %+v, %v", evs, err)
		}
	})
}

// TestResolvedRanIsPublishedWithoutRunning: --ran records the partition
// published (by the person's word) and the resumed run never starts it.
func TestResolvedRanIsPublishedWithoutRunning(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, b *bundle) {
		out := sideEffects(t, b, true)
		pl := b.plan(t)
		ctx := context.Background()
		if _, err := b.st.BeginAttempt(ctx, store.Attempt{PlanID: pl.ID, Dataset: "mid", Partition: "2026-11-01", Run: 1,
			Key: refill.AttemptKey(pl.ID, "mid", "2026-11-01", 1), Holder: "gone:1", Started: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if err := b.c.Apply(ctx, pl.ID, "alice"); !errors.Is(err, refill.ErrNotPermitted) {
			t.Fatalf("apply: %v", err)
		}
		if _, err := b.c.Resolve(ctx, "bob", control.ResolveRequest{PlanID: pl.ID, Dataset: "mid", Partition: "2026-11-01", Ran: true, Reason: "the partner's receipt 8812"}); err != nil {
			t.Fatal(err)
		}
		if err := b.c.Apply(ctx, pl.ID, "alice"); err != nil {
			t.Fatal(err)
		}
		if got := deliveries(t, out); !slices.Equal(got, []string{"2026-11-02", "2026-11-03"}) {
			t.Fatalf("delivered %v: 11-01 was said to have run and must not run again", got)
		}
		pubs, err := b.st.Published(ctx, pl.ID)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, p := range pubs {
			if p.Dataset == "mid" && p.Partition == "2026-11-01" {
				found = strings.Contains(p.Output, "resolved by bob")
			}
		}
		if !found {
			t.Errorf("mid 11-01 is not recorded published by bob's word: %+v", pubs)
		}
		if p, _ := b.st.Plan(ctx, pl.ID); p.Status != refill.StatusApplied {
			t.Errorf("status %s, want applied", p.Status)
		}
	})
}

// TestNoSideEffectsRunAgain: a job without side effects whose earlier
// attempt's outcome is unknown simply runs again, as before; its key is
// the same across retries of the same run and differs between runs.
func TestNoSideEffectsRunAgain(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, b *bundle) {
		out := sideEffects(t, b, false)
		pl := b.plan(t)
		ctx := context.Background()
		if _, err := b.st.BeginAttempt(ctx, store.Attempt{PlanID: pl.ID, Dataset: "mid", Partition: "2026-11-01", Run: 1,
			Key: refill.AttemptKey(pl.ID, "mid", "2026-11-01", 1), Holder: "gone:1", Started: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if err := b.c.Apply(ctx, pl.ID, "alice"); err != nil {
			t.Fatal(err)
		}
		if got := deliveries(t, out); !slices.Equal(got, []string{"2026-11-01", "2026-11-02", "2026-11-03"}) {
			t.Fatalf("ran %v", got)
		}
		raw, _ := os.ReadFile(out)
		if want := refill.AttemptKey(pl.ID, "mid", "2026-11-01", 1); !bytes.Contains(raw, []byte("2026-11-01 "+want)) {
			t.Errorf("REFILL_ATTEMPT_KEY of 11-01 is not %s:\n%s", want, raw)
		}
	})
}
