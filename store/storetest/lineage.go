package storetest

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
)

// exerciseLineage covers OpenLineage edges: recorded once, repeats only
// widen their seen window (an identical repeat changes nothing), the
// producer follows the latest event, long names fit, and concurrent
// writers of the same edges neither fail nor double them.
func exerciseLineage(t *testing.T, setup func(t *testing.T) (*store.Store, string)) {
	t.Run("LineageEdgesWidenTheirWindow", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()

		day := func(d int) time.Time { return time.Date(2026, 11, d, 12, 0, 0, 0, time.UTC) }
		name := func(ns, n string) refill.OpenLineageName { return refill.OpenLineageName{Namespace: ns, Name: n} }
		job := name("metabase", "sync")
		edge := func(in, out string, at time.Time, producer string) store.LineageEdge {
			return store.LineageEdge{Input: name("pg", in), Output: name("bi", out), Job: job, Producer: producer, FirstSeen: at, LastSeen: at}
		}
		long := strings.Repeat("very_long_path/", 400) + "table"

		if got, err := s.LineageEdges(ctx); err != nil || len(got) != 0 {
			t.Fatalf("a new store has edges %v, %v", got, err)
		}
		n, err := s.RecordLineage(ctx, []store.LineageEdge{edge("events_daily", "dashboard", day(10), "p1"), edge("sessions", "dashboard", day(10), "p1"), edge("x", long, day(10), "p1")}, store.LineageReport{Actor: "ol"})
		if err != nil || n != 3 {
			t.Fatalf("first record: %d new, %v", n, err)
		}
		// The same event again: nothing new, nothing changed.
		before, _ := s.LineageEdges(ctx)
		if n, err := s.RecordLineage(ctx, []store.LineageEdge{edge("events_daily", "dashboard", day(10), "p1")}, store.LineageReport{Actor: "ol"}); err != nil || n != 0 {
			t.Fatalf("repeat: %d new, %v", n, err)
		}
		if after, _ := s.LineageEdges(ctx); !sameEdges(before, after) {
			t.Fatalf("a repeat changed the edges:\n%v\n%v", before, after)
		}
		// A later event moves last seen and the producer; an earlier
		// one moves first seen and leaves the producer be.
		if _, err := s.RecordLineage(ctx, []store.LineageEdge{edge("events_daily", "dashboard", day(20), "p2"), edge("events_daily", "dashboard", day(5), "p0")}, store.LineageReport{Actor: "ol"}); err != nil {
			t.Fatal(err)
		}
		got, err := s.LineageEdges(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 {
			t.Fatalf("%d edges, want 3: %v", len(got), got)
		}
		e := got[0]
		if e.Input.Name != "events_daily" || e.Output != name("bi", "dashboard") || e.Job != job ||
			!e.FirstSeen.Equal(day(5)) || !e.LastSeen.Equal(day(20)) || e.Producer != "p2" {
			t.Errorf("events_daily -> dashboard after three events: %+v", e)
		}
		if got[2].Input.Name != "x" || got[2].Output.Name != long {
			t.Errorf("the long name came back as %q", got[2].Output.Name)
		}
		// Another job writing the same edge is another row.
		other := edge("events_daily", "dashboard", day(21), "p3")
		other.Job = name("airflow", "export")
		if n, err := s.RecordLineage(ctx, []store.LineageEdge{other}, store.LineageReport{Actor: "ol"}); err != nil || n != 1 {
			t.Fatalf("another job: %d new, %v", n, err)
		}
		// A NUL cannot be kept: bad input, nothing recorded.
		if _, err := s.RecordLineage(ctx, []store.LineageEdge{edge("ok", "fine", day(1), "p"), edge("a\x00b", "c", day(1), "p")}, store.LineageReport{Actor: "ol"}); !errors.Is(err, refill.ErrBadInput) {
			t.Errorf("a NUL in a name: %v, want bad input", err)
		}
		// Writers racing on the same edges, in opposite orders.
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				batch := []store.LineageEdge{edge("r1", "o", day(1+i), "p"), edge("r2", "o", day(1+i), "p")}
				if i%2 == 1 {
					batch[0], batch[1] = batch[1], batch[0]
				}
				if _, err := s.RecordLineage(ctx, batch, store.LineageReport{Actor: "ol"}); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("concurrent record: %v", err)
		}
		got, _ = s.LineageEdges(ctx)
		if len(got) != 6 {
			t.Errorf("%d edges after the race, want 6 (no NUL edge, r1 and r2 once each)", len(got))
		}
		for _, e := range got {
			if strings.HasPrefix(e.Input.Name, "r") && (!e.FirstSeen.Equal(day(1)) || !e.LastSeen.Equal(day(8))) {
				t.Errorf("%s after the race: seen %s..%s, want %s..%s", e.Input.Name, e.FirstSeen, e.LastSeen, day(1), day(8))
			}
		}
	})
}

func sameEdges(a, b []store.LineageEdge) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Input != y.Input || x.Output != y.Output || x.Job != y.Job || x.Producer != y.Producer || !x.FirstSeen.Equal(y.FirstSeen) || !x.LastSeen.Equal(y.LastSeen) {
			return false
		}
	}
	return true
}
