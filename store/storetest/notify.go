package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
)

// exerciseNotify covers what notifiers keep: the outbox that hears each
// audit entry inside its transaction (writing beside it through Tx.SQL, as
// River does), the message posted about a plan, and which entries were
// delivered where.
func exerciseNotify(t *testing.T, setup func(t *testing.T) (*store.Store, string)) {
	t.Run("OutboxCommitsWithTheEntry", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		// A component's own table beside refill's, as River keeps its jobs.
		if _, err := s.DB().ExecContext(ctx, `CREATE TABLE outbox_jobs (seq bigint NOT NULL, kind text NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		refuse := errors.New("the queue is full")
		s.SetOutbox(func(ctx context.Context, tx *store.Tx, e *refill.Event) error {
			if e.Kind == refill.EventRejection {
				return refuse
			}
			_, err := tx.SQL().ExecContext(ctx, fmt.Sprintf(`INSERT INTO outbox_jobs (seq, kind) VALUES (%d, '%s')`, e.Seq, e.Kind))
			return err
		})
		appendEvent := func(kind refill.EventKind, after error) error {
			return s.Update(ctx, func(tx *store.Tx) error {
				if err := tx.Append(ctx, &refill.Event{Kind: kind, Actor: "carol", PlanID: "p-1"}); err != nil {
					return err
				}
				return after
			})
		}
		jobs := func() []string {
			t.Helper()
			rows, err := s.DB().QueryContext(ctx, `SELECT seq, kind FROM outbox_jobs ORDER BY seq`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			out := []string{}
			for rows.Next() {
				var seq int64
				var kind string
				if err := rows.Scan(&seq, &kind); err != nil {
					t.Fatal(err)
				}
				out = append(out, fmt.Sprintf("%d %s", seq, kind))
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			return out
		}

		if err := appendEvent(refill.EventApproval, nil); err != nil {
			t.Fatal(err)
		}
		if err := appendEvent(refill.EventRunStarted, nil); err != nil {
			t.Fatal(err)
		}
		// The change fails after its entry: the job goes with it.
		boom := errors.New("the change failed")
		if err := appendEvent(refill.EventRunFinished, boom); !errors.Is(err, boom) {
			t.Fatalf("Update = %v", err)
		}
		// The outbox fails: so does the change, entry and all.
		if err := appendEvent(refill.EventRejection, nil); !errors.Is(err, refuse) {
			t.Fatalf("Update with a failing outbox = %v, want its error", err)
		}
		if got, want := jobs(), []string{"1 approval", "2 run_started"}; !slices.Equal(got, want) {
			t.Errorf("outbox jobs = %q, want %q", got, want)
		}
		if head, _ := s.AuditHead(ctx); head.Seq != 2 {
			t.Errorf("audit head is entry %d, want 2: failed changes left entries", head.Seq)
		}

		s.SetOutbox(nil)
		if err := appendEvent(refill.EventRejection, nil); err != nil {
			t.Fatalf("Append with the outbox removed: %v", err)
		}
		if got := jobs(); len(got) != 2 {
			t.Errorf("a removed outbox still heard an entry: %q", got)
		}
	})

	t.Run("NoticePerPlanAndTarget", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		notice := func(plan, target string) (refill.Notice, bool) {
			t.Helper()
			n, ok, err := s.Notice(ctx, plan, target)
			if err != nil {
				t.Fatal(err)
			}
			return n, ok
		}
		if n, ok := notice("p-1", "slack"); ok || n.PlanID != "p-1" || n.Target != "slack" {
			t.Fatalf("Notice before any = %+v, %v", n, ok)
		}
		for _, n := range []refill.Notice{
			{PlanID: "p-1", Target: "slack", Channel: "C1", TS: "1.000100"},
			{PlanID: "p-1", Target: "slack", Channel: "C2", TS: "2.000200"}, // reposted: the later one wins
			{PlanID: "p-1", Target: "ops-slack", Channel: "C9", TS: "9.000900"},
			{PlanID: "p-2", Target: "slack", Channel: "C1", TS: "3.000300"},
		} {
			if err := s.SaveNotice(ctx, n); err != nil {
				t.Fatalf("SaveNotice(%+v): %v", n, err)
			}
		}
		for _, want := range []refill.Notice{
			{PlanID: "p-1", Target: "slack", Channel: "C2", TS: "2.000200"},
			{PlanID: "p-1", Target: "ops-slack", Channel: "C9", TS: "9.000900"},
			{PlanID: "p-2", Target: "slack", Channel: "C1", TS: "3.000300"},
		} {
			if got, ok := notice(want.PlanID, want.Target); !ok || got != want {
				t.Errorf("Notice(%s, %s) = %+v, %v; want %+v", want.PlanID, want.Target, got, ok, want)
			}
		}
		if _, ok := notice("p-2", "ops-slack"); ok {
			t.Error("a notice to one target found under another")
		}
	})

	t.Run("SentOncePerEntryAndTarget", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		sent := func(seq int64, target string) bool {
			t.Helper()
			ok, err := s.Sent(ctx, seq, target)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if sent(1, "slack") {
			t.Fatal("Sent before any delivery")
		}
		if first, err := s.MarkSent(ctx, 1, "slack"); err != nil || !first {
			t.Fatalf("MarkSent = %v, %v; want the first", first, err)
		}
		if first, err := s.MarkSent(ctx, 1, "slack"); err != nil || first {
			t.Errorf("MarkSent again = %v, %v; want not the first", first, err)
		}
		if !sent(1, "slack") || sent(1, "email") || sent(2, "slack") {
			t.Errorf("Sent: 1 slack %v, 1 email %v, 2 slack %v; want only the first", sent(1, "slack"), sent(1, "email"), sent(2, "slack"))
		}

		// A job run twice at once sends once.
		const n = 8
		firsts := make([]bool, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { firsts[i], errs[i] = s.MarkSent(ctx, 7, "slack") })
		}
		wg.Wait()
		won := 0
		for i := range n {
			if errs[i] != nil {
				t.Errorf("concurrent MarkSent: %v", errs[i])
			}
			if firsts[i] {
				won++
			}
		}
		if won != 1 {
			t.Errorf("%d of %d concurrent MarkSent calls were first, want exactly 1", won, n)
		}
	})
}
