package run

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/gate"
	"github.com/refill-dev/refill/internal/pgtest"
	"github.com/refill-dev/refill/internal/whtest"
	"github.com/refill-dev/refill/planner"
	"github.com/refill-dev/refill/store"
)

// BenchmarkControlOverhead applies a plan of 1,000 partitions whose job does
// nothing (an sql job running SELECT 1 against an empty table), so what is
// measured is refill's own cost per partition: River's queueing, the
// publish transaction with its two checksums, the state store's publish
// record and audit entry. It reports partitions per second and the median
// time from a partition's job starting to its publish being recorded.
//
// It runs with the default max_active of 3 and with 8.
//
//	go test ./run -run '^$' -bench ControlOverhead -benchtime 1x
func BenchmarkControlOverhead(b *testing.B) {
	for _, tc := range []struct {
		store  string
		active int
	}{{"sqlite", 3}, {"postgres", 3}, {"sqlite", 8}, {"postgres", 8}} {
		b.Run(fmt.Sprintf("%s/max_active=%d", tc.store, tc.active), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				r, c, id := overheadFixture(b, tc.store, tc.active)
				var mu sync.Mutex
				var took []time.Duration
				r.OnPublished = func(_, _ string, _ *int64, d time.Duration) {
					mu.Lock()
					took = append(took, d)
					mu.Unlock()
				}
				b.StartTimer()
				start := time.Now()
				if err := c.Apply(context.Background(), id, "bench"); err != nil {
					b.Fatal(err)
				}
				wall := time.Since(start)
				b.StopTimer()
				slices.Sort(took)
				b.ReportMetric(float64(len(took))/wall.Seconds(), "partitions/s")
				b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "ms/partition-median")
				b.ReportMetric(float64(wall.Milliseconds())/float64(len(took)), "ms/partition-wall")
			}
		})
	}
}

func overheadFixture(b *testing.B, kind string, active int) (*Runner, *control.Control, string) {
	w := whtest.Open(b, "sqlite")
	w.Exec(b, "CREATE TABLE src (day TEXT)", "CREATE TABLE noop (day TEXT)")
	dsn := "sqlite:" + filepath.Join(b.TempDir(), "state.db")
	if kind == "postgres" {
		dsn = pgtest.Schema(b)
	}
	st, err := store.Open(context.Background(), dsn, "")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	pol := refill.DefaultPolicy()
	pol.ManualOverDays = 4000
	cfg := &refill.Config{Policy: pol, Run: refill.RunConfig{MaxActive: active, MaxActiveTotal: 8, Attempts: 3},
		Datasets: map[string]*refill.Dataset{
			"src": {Name: "src", Table: "src", Partition: refill.PartitionSpec{Column: "day", Grain: refill.GrainDay}},
			"noop": {Name: "noop", Table: "noop", Partition: refill.PartitionSpec{Column: "day", Grain: refill.GrainDay}, Upstream: []string{"src"},
				Job: &refill.Job{Kind: refill.JobSQL, SQL: "SELECT 1 WHERE :partition IS NOT NULL"}},
		}}
	p, err := planner.New(cfg, w.WH, st)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	pl, err := p.Plan(ctx, planner.Request{Targets: []string{"noop"}, From: "2024-01-01", To: "2026-09-26", Reason: "bench", Actor: "alice"})
	if err != nil {
		b.Fatal(err)
	}
	if n := len(pl.Steps[0].Partitions); n != 1000 {
		b.Fatalf("%d partitions, want 1000", n)
	}
	c := &control.Control{Config: cfg, Store: st, Warehouse: w.WH}
	if _, err := c.Approve(ctx, pl.ID, "bob", ""); err != nil {
		b.Fatal(err)
	}
	r := &Runner{Config: cfg, Warehouse: w.WH, Store: st, Gate: &gate.Gate{Config: cfg, Warehouse: w.WH, Store: st}}
	c.Executor = r
	return r, c, pl.ID
}
