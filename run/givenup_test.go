package run

import (
	"bytes"
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/queue"
	"github.com/refill-dev/refill/store"
)

// TestRiverGaveUpEndsTheRun: a job River discarded without refill having
// recorded a failure (its rescuer's doing, after a worker died on its last
// attempt) ends the run, failed, with River's word for it; the run does not
// wait for a partition nothing will ever publish.
func TestRiverGaveUpEndsTheRun(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, b *bundle) {
		// mid's partitions take as long as the test lets them.
		b.r.Config.Datasets["mid"].Job = &refill.Job{Kind: refill.JobCommand, Command: []string{"sleep", "300"}}
		var log bytes.Buffer
		b.r.Log = &log
		pl := b.plan(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if err := queue.Migrate(ctx, b.st); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- b.c.Apply(ctx, pl.ID, "alice") }()

		// River discards one of the jobs while it runs, as its rescuer
		// would: no attempt of it ever ends on refill's side.
		discard := `UPDATE river_job SET state = 'discarded', finalized_at = attempted_at
			WHERE id = (SELECT min(id) FROM river_job WHERE kind = 'refill_partition' AND state = 'running')`
		deadline := time.Now().Add(30 * time.Second)
		for b.riverExec(t, discard) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("no partition job started")
			}
			time.Sleep(20 * time.Millisecond)
		}

		var err error
		select {
		case err = <-done:
		case <-time.After(60 * time.Second):
			cancel()
			<-done
			t.Fatalf("apply still waiting a minute after River discarded a job:\n%s", log.String())
		}
		if err == nil || !strings.Contains(err.Error(), "River discarded its job after 1 attempt(s) without publishing it") {
			t.Fatalf("apply after River discarded a job: %v", err)
		}
		got, _ := b.st.Plan(context.Background(), pl.ID)
		if got.Status != refill.StatusFailed {
			t.Errorf("status %s, want failed", got.Status)
		}
		// The safety net was what ended the run: no partition recorded a
		// failure of its own.
		evs, _ := b.st.Audit(context.Background(), store.AuditFilter{PlanID: pl.ID, Kind: refill.EventRunFailed})
		for _, e := range evs {
			if e.Partition != "" {
				t.Errorf("%s %s recorded a failure: %s", e.Dataset, e.Partition, e.Detail)
			}
		}
		if pubs, _ := b.st.Published(context.Background(), pl.ID); len(pubs) != 0 {
			t.Errorf("%d partitions published", len(pubs))
		}
		if strings.Contains(log.String(), "could not list") {
			t.Errorf("the failed run could not read River's jobs:\n%s", log.String())
		}
	})
}

// riverExec runs statement q on the state store's database, where River
// keeps its jobs, and returns the rows it changed.
func (b *bundle) riverExec(t *testing.T, q string) int64 {
	t.Helper()
	if path := b.st.SQLitePath(); path != "" {
		db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		res, err := db.Exec(q)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := res.RowsAffected()
		return n
	}
	tag, err := b.st.Pool().Exec(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return tag.RowsAffected()
}
