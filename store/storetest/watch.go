package storetest

import (
	"errors"
	"maps"
	"testing"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
)

// exerciseWatch covers what the watcher reads and keeps: how each
// partition's last attempt ended, by the audit log, and its last decision
// about each plan.
func exerciseWatch(t *testing.T, setup func(t *testing.T) (*store.Store, string)) {
	t.Run("LastOutcomesByTheLatestEntry", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		if got, err := s.LastOutcomes(ctx, "orders", "2026-11-01", "2026-11-30"); err != nil || len(got) != 0 {
			t.Fatalf("LastOutcomes of an empty log = %v, %v", got, err)
		}
		for _, e := range []struct {
			kind          refill.EventKind
			dataset, part string
		}{
			{refill.EventPartitionPublished, "orders", "2026-11-01"},
			{refill.EventRunFailed, "orders", "2026-11-02"},
			{refill.EventRunFailed, "orders", "2026-11-03"},
			{refill.EventPartitionPublished, "orders", "2026-11-03"}, // retried and published
			{refill.EventPartitionPublished, "orders", "2026-11-02"},
			{refill.EventRunFailed, "orders", "2026-11-02"},  // published once, failed since
			{refill.EventRunStarted, "orders", "2026-11-04"}, // neither outcome
			{refill.EventPartitionPublished, "orders", "2026-11-06"},
			{refill.EventRunFailed, "customers", "2026-11-01"},
			{refill.EventPartitionPublished, "orders_daily", "2026-11-01"},
		} {
			err := s.Update(ctx, func(tx *store.Tx) error {
				return tx.Append(ctx, &refill.Event{Kind: e.kind, Actor: "refill", PlanID: "p-1", Dataset: e.dataset, Partition: e.part})
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct {
			dataset, from, to string
			want              map[string]store.Outcome
		}{
			{"orders", "2026-11-01", "2026-11-05", map[string]store.Outcome{
				"2026-11-01": store.OutcomePublished, "2026-11-02": store.OutcomeFailed, "2026-11-03": store.OutcomePublished}},
			{"orders", "2026-11-02", "2026-11-02", map[string]store.Outcome{"2026-11-02": store.OutcomeFailed}},
			{"orders", "2026-11-04", "2026-11-06", map[string]store.Outcome{"2026-11-06": store.OutcomePublished}},
			{"customers", "2026-11-01", "2026-11-30", map[string]store.Outcome{"2026-11-01": store.OutcomeFailed}},
			{"orders", "2026-12-01", "2026-12-31", map[string]store.Outcome{}},
		} {
			got, err := s.LastOutcomes(ctx, c.dataset, c.from, c.to)
			if err != nil || !maps.Equal(got, c.want) {
				t.Errorf("LastOutcomes(%s, %s, %s) = %v, %v; want %v", c.dataset, c.from, c.to, got, err, c.want)
			}
		}
	})

	t.Run("WatchStateLastDecision", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		get := func(id string) (store.WatchState, bool) {
			t.Helper()
			w, ok, err := s.WatchState(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return w, ok
		}
		set := func(w store.WatchState, after error) error {
			return s.Update(ctx, func(tx *store.Tx) error {
				if err := tx.SetWatchState(ctx, w); err != nil {
					return err
				}
				return after
			})
		}
		same := func(a, b store.WatchState) bool {
			return a.PlanID == b.PlanID && a.Dataset == b.Dataset && a.Action == b.Action && a.Fingerprint == b.Fingerprint && a.At.Equal(b.At)
		}

		if w, ok := get("p-1"); ok || w.PlanID != "p-1" {
			t.Fatalf("WatchState before any decision = %+v, %v", w, ok)
		}
		planned := store.WatchState{PlanID: "p-1", Dataset: "orders", Action: "planned", Fingerprint: "sha256:aa", At: at(1)}
		blocked := store.WatchState{PlanID: "p-1", Dataset: "orders", Action: "blocked", Fingerprint: "sha256:bb", At: at(2)}
		other := store.WatchState{PlanID: "p-2", Dataset: "customers", Action: "skipped", Fingerprint: "sha256:cc", At: at(3)}
		for _, w := range []store.WatchState{planned, other} {
			if err := set(w, nil); err != nil {
				t.Fatal(err)
			}
		}
		if w, ok := get("p-1"); !ok || !same(w, planned) {
			t.Errorf("WatchState(p-1) = %+v, %v; want %+v", w, ok, planned)
		}
		if err := set(blocked, nil); err != nil {
			t.Fatal(err)
		}
		if w, _ := get("p-1"); !same(w, blocked) {
			t.Errorf("WatchState(p-1) after a second decision = %+v; want %+v", w, blocked)
		}
		boom := errors.New("its audit entry failed")
		if err := set(planned, boom); !errors.Is(err, boom) {
			t.Fatalf("Update = %v", err)
		}
		if w, _ := get("p-1"); !same(w, blocked) {
			t.Errorf("a decision whose transaction failed was kept: %+v", w)
		}
		if w, _ := get("p-2"); !same(w, other) {
			t.Errorf("WatchState(p-2) = %+v; want %+v", w, other)
		}
	})
}
