package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
)

// exerciseAttempts covers how runs weather the world: partitions waiting
// out an outage, attempts of jobs that write outside refill's
// transactions, and the partitions that wait for a person's word.
func exerciseAttempts(t *testing.T, setup func(t *testing.T) (*store.Store, string)) {
	t.Run("OutageWaitsSetAndCleared", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		p := planOver(t, s, "p-wait", at(0), "orders", "2026-11-01", "2026-11-02")
		set := func(part, what string, since time.Time) {
			t.Helper()
			if err := s.SetOutageWait(ctx, store.OutageWait{PlanID: p.ID, Dataset: "orders", Partition: part, For: what, Since: since}); err != nil {
				t.Fatal(err)
			}
		}
		set("2026-11-02", "warehouse", at(5))
		set("2026-11-01", "warehouse", at(3))
		set("2026-11-01", "warehouse", at(4)) // a later wait of the same partition replaces the first
		got, err := s.OutageWaits(ctx, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].Partition != "2026-11-01" || !got[0].Since.Equal(at(4)) || got[0].For != "warehouse" || got[1].Partition != "2026-11-02" {
			t.Fatalf("OutageWaits = %+v, want 11-01 since at(4), then 11-02", got)
		}
		set("2026-11-01", "", time.Time{})
		if got, err := s.OutageWaits(ctx, p.ID); err != nil || len(got) != 1 || got[0].Partition != "2026-11-02" {
			t.Fatalf("after 11-01's wait ended: %+v, %v", got, err)
		}
		if got, err := s.OutageWaits(ctx, "another"); err != nil || len(got) != 0 {
			t.Errorf("another plan's waits = %+v, %v", got, err)
		}
		set("2026-11-01", "warehouse", at(6))
		if err := s.Update(ctx, func(tx *store.Tx) error { return tx.ClearOutageWaits(ctx, p.ID) }); err != nil {
			t.Fatal(err)
		}
		if got, err := s.OutageWaits(ctx, p.ID); err != nil || len(got) != 0 {
			t.Errorf("after the run ended: %+v, %v", got, err)
		}
	})

	t.Run("AttemptsOfUnknownOutcome", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		p := planOver(t, s, "p-att", at(0), "uploads", "2026-11-01", "2026-11-02")
		begin := func(part string, run int) *store.Attempt {
			t.Helper()
			u, err := s.BeginAttempt(ctx, store.Attempt{PlanID: p.ID, Dataset: "uploads", Partition: part, Run: run,
				Key: refill.AttemptKey(p.ID, "uploads", part, run), Holder: "host:1", Started: at(run), AliveUntil: at(run).Add(time.Minute)})
			if err != nil {
				t.Fatal(err)
			}
			return u
		}
		end := func(part, outcome string) {
			t.Helper()
			if err := s.Update(ctx, func(tx *store.Tx) error { return tx.EndAttempt(ctx, p.ID, "uploads", part, outcome) }); err != nil {
				t.Fatal(err)
			}
		}
		if u := begin("2026-11-01", 1); u != nil {
			t.Fatalf("a first attempt found an earlier one: %+v", u)
		}
		// Run 1's attempt never ended (its record did not commit): run 2
		// is told of it, and records nothing of its own.
		u := begin("2026-11-01", 2)
		if u == nil || u.Run != 1 || u.Key != refill.AttemptKey(p.ID, "uploads", "2026-11-01", 1) || u.Holder != "host:1" || !u.Started.Equal(at(1)) {
			t.Fatalf("the unknown attempt = %+v, want run 1's", u)
		}
		// In flight while its holder renews it; lost once it stops.
		if !u.InFlight(at(1).Add(30*time.Second)) || u.InFlight(at(1).Add(2*time.Minute)) {
			t.Errorf("alive until %s: in flight at +30s %v, at +2m %v", u.AliveUntil, u.InFlight(at(1).Add(30*time.Second)), u.InFlight(at(1).Add(2*time.Minute)))
		}
		if err := s.RenewAttempt(ctx, store.Attempt{PlanID: p.ID, Dataset: "uploads", Partition: "2026-11-01", Run: 1, Holder: "host:1"}, at(1).Add(5*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := s.RenewAttempt(ctx, store.Attempt{PlanID: p.ID, Dataset: "uploads", Partition: "2026-11-01", Run: 1, Holder: "other:2"}, at(1).Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if u := begin("2026-11-01", 2); u == nil || !u.InFlight(at(1).Add(4*time.Minute)) || u.InFlight(at(1).Add(6*time.Minute)) {
			t.Fatalf("after its holder renewed it (and another holder could not): %+v", u)
		}
		if u := begin("2026-11-02", 2); u != nil {
			t.Errorf("another partition's attempt was taken for unknown: %+v", u)
		}
		// A person's word ends it; the next attempt starts clean.
		end("2026-11-01", store.AttemptNotRan)
		if u := begin("2026-11-01", 3); u != nil {
			t.Fatalf("after it was resolved not_ran: %+v", u)
		}
		// A known failure is no unknown; retrying the same run re-begins it.
		end("2026-11-01", store.AttemptFailed)
		if u := begin("2026-11-01", 3); u != nil {
			t.Fatalf("a failed attempt counted as unknown: %+v", u)
		}
		end("2026-11-01", store.AttemptPublished)
		if u := begin("2026-11-01", 4); u != nil {
			t.Errorf("a published attempt counted as unknown: %+v", u)
		}
	})

	t.Run("ReviewsUntilResolved", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		p := planOver(t, s, "p-rev", at(0), "uploads", "2026-11-01", "2026-11-02")
		appendEv := func(kind refill.EventKind, part string, min int, detail map[string]any) {
			t.Helper()
			if err := s.Update(ctx, func(tx *store.Tx) error {
				return tx.Append(ctx, &refill.Event{Kind: kind, Actor: "refill", PlanID: p.ID, Dataset: "uploads", Partition: part, At: at(min), Detail: refill.Detail(detail)})
			}); err != nil {
				t.Fatal(err)
			}
		}
		appendEv(refill.EventNeedsReview, "2026-11-02", 1, map[string]any{"why": "record lost"})
		appendEv(refill.EventNeedsReview, "2026-11-01", 2, map[string]any{"why": "process vanished"})
		appendEv(refill.EventNeedsReview, "2026-11-02", 3, map[string]any{"why": "record lost again"})
		got, err := s.Reviews(ctx, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].Partition != "2026-11-02" || got[0].Why != "record lost again" || got[0].At.IsZero() || got[1].Partition != "2026-11-01" {
			t.Fatalf("Reviews = %+v, want 11-02 (its latest why) then 11-01, each once", got)
		}
		appendEv(refill.EventResolved, "2026-11-02", 4, map[string]any{"ran": true})
		if got, err := s.Reviews(ctx, p.ID); err != nil || len(got) != 1 || got[0].Partition != "2026-11-01" {
			t.Fatalf("after 11-02 was resolved: %+v, %v", got, err)
		}
		// A review raised again after its resolution is open again.
		appendEv(refill.EventNeedsReview, "2026-11-02", 5, map[string]any{"why": "a second run lost it too"})
		if got, err := s.Reviews(ctx, p.ID); err != nil || len(got) != 2 {
			t.Fatalf("a review raised again: %+v, %v", got, err)
		}
	})

	t.Run("StatusOnlyAlongTheMachine", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		p := planOver(t, s, "p-sm", at(0), "orders", "2026-11-01")
		// A move the state machine does not have is refused, and changes
		// nothing, even when the plan is in the status it names.
		if err := s.SetStatus(ctx, p.ID, refill.StatusPending, refill.StatusApplied); !errors.Is(err, refill.ErrNotPermitted) {
			t.Fatalf("pending -> applied: %v", err)
		}
		if got, err := s.Plan(ctx, p.ID); err != nil || got.Status != refill.StatusPending {
			t.Fatalf("after a refused move: %v, %v", got.Status, err)
		}
		advance(t, s, p.ID, refill.StatusPending, refill.StatusNeedsReview)
		if err := s.SetStatus(ctx, p.ID, refill.StatusNeedsReview, refill.StatusApplied); !errors.Is(err, refill.ErrNotPermitted) {
			t.Errorf("needs_review -> applied: %v", err)
		}
		advance(t, s, p.ID, refill.StatusNeedsReview, refill.StatusApplied)
		if got, err := s.Plan(ctx, p.ID); err != nil || got.Status != refill.StatusApplied {
			t.Errorf("after running on: %v, %v", got.Status, err)
		}
	})
}
