package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
)

// exerciseRuns covers what a run records: published partitions (once
// each), the run's state, and the later runs a rollback would undo.
func exerciseRuns(t *testing.T, setup func(t *testing.T) (*store.Store, string)) {
	t.Run("PublishedOnce", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		p := planOver(t, s, "p-pub", at(0), "orders", "2026-11-01", "2026-11-02")
		rec := refill.Published{PlanID: p.ID, Dataset: "orders", Partition: "2026-11-01", Attempt: 2, Output: "ok", At: at(3),
			Before: &refill.Digest{Rows: 1, Checksum: "00000000000000aa"}, After: &refill.Digest{Rows: 5, Checksum: "00000000000000bb"}}
		record := func(r refill.Published) error {
			return s.Update(ctx, func(tx *store.Tx) error { return tx.RecordPublished(ctx, r) })
		}
		if err := record(rec); err != nil {
			t.Fatal(err)
		}
		if err := record(rec); !errors.Is(err, refill.ErrNotPermitted) {
			t.Errorf("a partition recorded twice: %v", err)
		}
		unknown := refill.Published{PlanID: p.ID, Dataset: "orders", Partition: "2026-11-02", Attempt: 1, At: at(4)} // a command job without a table
		if err := record(unknown); err != nil {
			t.Fatal(err)
		}
		got, err := s.Published(ctx, p.ID)
		if err != nil || len(got) != 2 {
			t.Fatalf("Published = %+v, %v", got, err)
		}
		if g := got[0]; *g.Before != *rec.Before || *g.After != *rec.After || g.Attempt != 2 || g.Output != "ok" || !g.At.Equal(rec.At) {
			t.Errorf("published record = %+v", g)
		}
		if g := got[1]; g.Before != nil || g.After != nil {
			t.Errorf("unknown rows came back as %+v / %+v", g.Before, g.After)
		}
		for part, want := range map[string]bool{"2026-11-01": true, "2026-11-03": false} {
			if ok, err := s.IsPublished(ctx, p.ID, "orders", part); err != nil || ok != want {
				t.Errorf("IsPublished(%s) = %v, %v", part, ok, err)
			}
		}
	})

	t.Run("RunStateCountsStarts", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		p := planOver(t, s, "p-rs", at(0), "orders", "2026-11-01")
		for i := 0; i < 2; i++ {
			if err := s.Update(ctx, func(tx *store.Tx) error {
				return tx.Append(ctx, &refill.Event{Kind: refill.EventRunStarted, Actor: "ana", PlanID: p.ID})
			}); err != nil {
				t.Fatal(err)
			}
		}
		status, runs, err := s.RunState(ctx, p.ID)
		if err != nil || status != refill.StatusPending || runs != 2 {
			t.Errorf("RunState = %s, %d, %v", status, runs, err)
		}
	})

	t.Run("HoldRunStateHoldsTheStatus", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		p := planOver(t, s, "p-hold", at(0), "orders", "2026-11-01")
		status, runs, release, err := s.HoldRunState(ctx, p.ID)
		if err != nil || status != refill.StatusPending || runs != 0 {
			t.Fatalf("HoldRunState = %s, %d, %v", status, runs, err)
		}
		changed := make(chan error, 1)
		go func() {
			changed <- s.Update(ctx, func(tx *store.Tx) error {
				return tx.SetStatus(ctx, p.ID, refill.StatusPending, refill.StatusApproved)
			})
		}()
		// The lock makes the change wait however long it is held; a moment
		// is enough to see it wait rather than slip past.
		select {
		case err := <-changed:
			release()
			t.Fatalf("the status changed (err %v) while the run state was held", err)
		case <-time.After(200 * time.Millisecond):
		}
		release()
		if err := <-changed; err != nil {
			t.Fatalf("after release: %v", err)
		}
		status, _, release, err = s.HoldRunState(ctx, p.ID)
		if err != nil || status != refill.StatusApproved {
			t.Errorf("HoldRunState after the change = %s, %v; want approved", status, err)
		}
		if release != nil {
			release()
		}
		if _, _, _, err := s.HoldRunState(ctx, "p-none"); err == nil {
			t.Error("HoldRunState of an unknown plan: no error")
		}
	})

	t.Run("PublishedSinceNamesLaterRuns", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		a := planOver(t, s, "p-a", at(0), "orders", "2026-11-01")
		b := planOver(t, s, "p-b", at(1), "orders", "2026-11-01")
		publish := func(plan string) {
			t.Helper()
			err := s.Update(ctx, func(tx *store.Tx) error {
				return tx.Append(ctx, &refill.Event{Kind: refill.EventPartitionPublished, Actor: "refill", PlanID: plan, Dataset: "orders", Partition: "2026-11-01"})
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		publish(a.ID)
		if later, err := s.PublishedSince(ctx, a.ID); err != nil || len(later) != 0 {
			t.Fatalf("PublishedSince before b ran = %+v, %v", later, err)
		}
		publish(b.ID)
		later, err := s.PublishedSince(ctx, a.ID)
		if err != nil || len(later) != 1 || later[0].PlanID != b.ID || later[0].Partition != "2026-11-01" {
			t.Fatalf("PublishedSince = %+v, %v", later, err)
		}
		advance(t, s, b.ID, refill.StatusPending, refill.StatusRolledBack)
		if later, _ := s.PublishedSince(ctx, a.ID); len(later) != 0 {
			t.Errorf("a rolled-back later run still counts: %+v", later)
		}
	})
}
