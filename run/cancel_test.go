package run

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
)

// TestCancelStopsNewPartitionsAndEndsCancelled cancels a run once its
// first partition is published: no partition starts after the request,
// those in flight finish whole, and the plan ends cancelled with what it
// published kept.
func TestCancelStopsNewPartitionsAndEndsCancelled(t *testing.T) {
	t.Parallel()
	_, c, w, st, id := outage(t, "postgres", 3, "2026-10-20")
	ctx := context.Background()
	done := make(chan error, 1)
	go func() { done <- c.Apply(ctx, id, "alice") }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		pubs, err := st.Published(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(pubs) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("nothing was published")
		}
		time.Sleep(5 * time.Millisecond)
	}
	s, err := c.Cancel(ctx, id, "alice", "wrong range")
	if err != nil {
		t.Fatal(err)
	}
	if s.Cancel == nil || s.Plan.Status != refill.StatusRunning {
		t.Fatalf("after the request: status %s, cancel %v; want running with the request recorded", s.Plan.Status, s.Cancel)
	}
	asked := time.Now()
	err = <-done
	if !errors.Is(err, refill.ErrNotPermitted) {
		t.Fatalf("apply of a cancelled run returned %v, want not permitted (cancelled)", err)
	}
	p, _ := st.Plan(ctx, id)
	if p.Status != refill.StatusCancelled {
		t.Fatalf("status %s, want cancelled", p.Status)
	}
	pubs, err := st.Published(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(pubs) == 0 || len(pubs) >= 20 {
		t.Errorf("%d of 20 partitions published: want some, not all", len(pubs))
	}
	// Every partition is whole: published ones have both rows, the others
	// are as they were (empty).
	if n := partial(t, w.DB); n != 0 {
		t.Errorf("%d half-written partitions", n)
	}
	var rows int
	if err := w.DB.QueryRow("SELECT count(*) FROM agg").Scan(&rows); err != nil || rows != 2*len(pubs) {
		t.Errorf("agg holds %d rows (%v), want %d for %d published partitions", rows, err, 2*len(pubs), len(pubs))
	}
	// Nothing started after the request: a partition published after it
	// must have been in flight already, and at most max_active_total were.
	evs, err := st.Audit(ctx, store.AuditFilter{PlanID: id, Kind: refill.EventPartitionPublished})
	if err != nil {
		t.Fatal(err)
	}
	late := 0
	for _, e := range evs {
		if e.At.After(asked) {
			late++
		}
	}
	if late > 4 {
		t.Errorf("%d partitions published after the cancel request; at most the 4 in flight may finish", late)
	}
	// Nothing more happens: the queue's leftover jobs find a cancelled plan.
	time.Sleep(300 * time.Millisecond)
	if again, _ := st.Published(ctx, id); len(again) != len(pubs) {
		t.Errorf("published %d after the run ended, %d before", len(again), len(pubs))
	}
	if err := c.Apply(ctx, id, "alice"); !errors.Is(err, refill.ErrNotPermitted) {
		t.Errorf("apply of a cancelled plan: %v, want not permitted", err)
	}
	if _, err := c.Cancel(ctx, id, "alice", "again"); !errors.Is(err, refill.ErrNotPermitted) {
		t.Errorf("cancel of a cancelled plan: %v, want not permitted", err)
	}
}

// TestCancelBeforeRunning ends a plan that has not started at once.
func TestCancelBeforeRunning(t *testing.T) {
	t.Parallel()
	_, c, _, st, id := outage(t, "sqlite", 1, "2026-10-02")
	ctx := context.Background()
	if _, err := c.Cancel(ctx, id, "mallory", "not mine"); err != nil {
		// Without users: anyone may; the config here names none.
		t.Fatalf("cancel without users configured: %v", err)
	}
	if p, _ := st.Plan(ctx, id); p.Status != refill.StatusCancelled {
		t.Fatalf("status %s, want cancelled", p.Status)
	}
	if pubs, _ := st.Published(ctx, id); len(pubs) != 0 {
		t.Errorf("%d published", len(pubs))
	}
}
