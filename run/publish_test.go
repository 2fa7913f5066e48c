package run

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/queue"
	"github.com/refill-dev/refill/store"
)

// TestPublishCommitsBeforeAFailureOrNotAtAll interleaves a run's failure
// with a partition's publish: the failure is recorded while the publish's
// warehouse transaction has taken its last look at the run (running) and
// not yet committed. The failure must wait for the commit, so that when it
// is recorded the partition is already there; were it recorded first, the
// job would publish into a run already failed.
func TestPublishCommitsBeforeAFailureOrNotAtAll(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		pl := b.plan(t)
		p, err := b.st.Plan(ctx, pl.ID)
		if err != nil {
			t.Fatal(err)
		}
		const holder = "test-holder"
		err = b.st.Update(ctx, func(tx *store.Tx) error {
			if err := tx.TakeLease(ctx, p.ID, holder, time.Now().Add(time.Minute), store.Lease.HolderAlive); err != nil {
				return err
			}
			if err := tx.SetStatus(ctx, p.ID, p.Status, refill.StatusRunning); err != nil {
				return err
			}
			return tx.Append(ctx, &refill.Event{Kind: refill.EventRunStarted, Actor: "alice", PlanID: p.ID, At: b.r.Now.Now()})
		})
		if err != nil {
			t.Fatal(err)
		}
		rows := func() int {
			var n int
			if err := b.w.DB.QueryRow("SELECT count(*) FROM mid WHERE day = '2026-11-01'").Scan(&n); err != nil {
				t.Error(err)
			}
			return n
		}
		done := make(chan recorded, 1)
		cause := errors.New("another partition failed")
		b.r.beforeCommit = func(jr refill.JobRun) {
			go func() {
				err := b.r.fail(ctx, p, "alice", holder, cause)
				done <- recorded{err: err, rows: rows()}
			}()
			waitFail(t, b, done)
		}
		err = b.r.build(ctx, queue.PartitionArgs{PlanID: p.ID, Dataset: "mid", Partition: "2026-11-01", Run: 1}, 1)
		if err != nil {
			t.Fatalf("build: %v", err)
		}
		f := <-done
		if !errors.Is(f.err, cause) || strings.Contains(f.err.Error(), "state store") {
			t.Fatalf("fail: %v", f.err)
		}
		if f.rows != 2 {
			t.Errorf("when the failure was recorded the partition had %d committed rows, want 2: the publish committed after the run failed", f.rows)
		}
		if status, _, err := b.st.RunState(ctx, p.ID); err != nil || status != refill.StatusFailed {
			t.Errorf("run state = %s, %v; want failed", status, err)
		}
	})
}

// recorded is what a run's failure returned, and the partition's committed
// rows once it was recorded.
type recorded struct {
	err  error
	rows int
}

// waitFail returns once the failure started in the publish's last moment
// has been recorded or is waiting for the publish. On PostgreSQL the wait
// is seen in pg_locks: the failing update holds the tuple lock of the
// plan's row while it waits for the publish's lock. SQLite shows no such
// thing, so there a failure not recorded within half a second is taken to
// be waiting.
func waitFail(t *testing.T, b *bundle, done chan recorded) {
	t.Helper()
	var db *sql.DB
	if b.st.SQLitePath() == "" {
		var err error
		if db, err = sql.Open("pgx", b.state); err != nil {
			t.Fatal(err)
		}
		defer db.Close()
	}
	deadline := time.Now().Add(500 * time.Millisecond)
	for {
		select {
		case f := <-done:
			done <- f // for the test to read
			return
		case <-time.After(10 * time.Millisecond):
		}
		if db == nil {
			if time.Now().After(deadline) {
				return
			}
			continue
		}
		var waiting int
		err := db.QueryRow(`SELECT count(*) FROM pg_locks l
			JOIN pg_class c ON c.oid = l.relation
			JOIN pg_namespace n ON n.oid = c.relnamespace
			JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE l.locktype = 'tuple' AND c.relname = 'plans' AND n.nspname = current_schema() AND a.wait_event_type = 'Lock'`).Scan(&waiting)
		if err != nil {
			t.Error(err)
			return
		}
		if waiting > 0 {
			return
		}
	}
}
