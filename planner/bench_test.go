package planner

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqlite"
)

// timedWarehouse adds up the wall time spent inside the warehouse, so the
// benchmark can report the planner's own time as a ratio to it.
type timedWarehouse struct {
	refill.Warehouse
	spent   atomic.Int64
	queries atomic.Int64
}

func (w *timedWarehouse) time(start time.Time) {
	w.spent.Add(int64(time.Since(start)))
	w.queries.Add(1)
}

func (w *timedWarehouse) Columns(ctx context.Context, table string) ([]refill.Column, error) {
	defer w.time(time.Now())
	return w.Warehouse.Columns(ctx, table)
}

func (w *timedWarehouse) PartitionCounts(ctx context.Context, t refill.TableRef, from, to string) (map[string]int64, error) {
	defer w.time(time.Now())
	return w.Warehouse.PartitionCounts(ctx, t, from, to)
}

func (w *timedWarehouse) QueryCounts(ctx context.Context, q string, parts []string) (map[string]int64, error) {
	defer w.time(time.Now())
	return w.Warehouse.QueryCounts(ctx, q, parts)
}

// Rehearse and Digest pass through, so the planner rehearses downstream
// expectations as it would on the real warehouse; the rehearsal's time is
// warehouse time.
func (w *timedWarehouse) Rehearse(ctx context.Context, fn func(tx refill.WarehouseTx) error) error {
	defer w.time(time.Now())
	return w.Warehouse.(refill.Rehearser).Rehearse(ctx, fn)
}

func (w *timedWarehouse) Digest(ctx context.Context, t refill.TableRef, partition string) (refill.Digest, error) {
	defer w.time(time.Now())
	return w.Warehouse.(refill.Rehearser).Digest(ctx, t, partition)
}

// lineageFixture writes n datasets into a fresh SQLite warehouse: a tenth
// are sources, the rest read one to three earlier datasets; two thirds are
// query jobs, the rest sql jobs. Each table holds 60 days of a few rows.
func lineageFixture(tb testing.TB, n int) (*refill.Config, refill.Warehouse) {
	tb.Helper()
	dir := tb.TempDir()
	path := filepath.Join(dir, "wh.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	tx, err := db.Begin()
	if err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	cfg := &refill.Config{Dir: dir, Policy: refill.DefaultPolicy(), Datasets: map[string]*refill.Dataset{}, MaxRangeDays: refill.DefaultMaxRangeDays}
	start := time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)
	sources := n / 10
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("t%04d", i)
		if _, err := tx.Exec(fmt.Sprintf(`CREATE TABLE %s (day TEXT NOT NULL, k INTEGER, v INTEGER)`, name)); err != nil {
			tb.Fatal(err)
		}
		if _, err := tx.Exec(fmt.Sprintf(`CREATE INDEX %s_day ON %s (day)`, name, name)); err != nil {
			tb.Fatal(err)
		}
		for d := 0; d < 60; d++ {
			day := start.AddDate(0, 0, d).Format("2006-01-02")
			for k := 0; k < 3+rng.IntN(3); k++ {
				if _, err := tx.Exec(fmt.Sprintf(`INSERT INTO %s VALUES (?, ?, ?)`, name), day, k, rng.IntN(1000)); err != nil {
					tb.Fatal(err)
				}
			}
		}
		ds := &refill.Dataset{Name: name, Table: name, Partition: refill.PartitionSpec{Column: "day", Grain: refill.GrainDay}}
		if i >= sources {
			up := fmt.Sprintf("t%04d", rng.IntN(i))
			ds.Upstream = []string{up}
			if extra := fmt.Sprintf("t%04d", rng.IntN(i)); extra != up && rng.IntN(2) == 0 {
				ds.Upstream = append(ds.Upstream, extra)
			}
			if i%3 == 0 {
				ds.Job = &refill.Job{Kind: refill.JobSQL, SQL: fmt.Sprintf("DELETE FROM %s WHERE day = :partition; INSERT INTO %s SELECT day, k, v FROM %s WHERE day = :partition", name, name, up)}
			} else {
				ds.Job = &refill.Job{Kind: refill.JobQuery, Query: fmt.Sprintf("SELECT day, k, sum(v) AS v FROM %s WHERE day = :partition GROUP BY day, k", up)}
			}
		}
		cfg.Datasets[name] = ds
	}
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
	wh, err := sqlite.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { wh.Close() })
	return cfg, wh
}

// BenchmarkPlan1000Datasets plans a 30-day range over a 1,000-dataset
// lineage on SQLite (every source named, so all 900 derived datasets are
// rebuilt) and reports the planner's own time as a ratio to the time spent
// in the warehouse queries it issued.
//
//	go test ./planner -run '^$' -bench Plan1000 -benchtime 5x
//
// Under the default RehearsalBudget the 900 downstream datasets (27,000
// partitions) are too many to rehearse, so their expectations are marked as
// depending on the upstream; the Rehearsed variant lifts the budget to
// show what counting every one of them after the plan costs.
func BenchmarkPlan1000Datasets(b *testing.B) { benchPlan(b, 1000) }

// BenchmarkPlan1000DatasetsRehearsed rehearses all of them.
func BenchmarkPlan1000DatasetsRehearsed(b *testing.B) {
	defer func(old int) { RehearsalBudget = old }(RehearsalBudget)
	RehearsalBudget = 1 << 30
	benchPlan(b, 1000)
}

// BenchmarkPlan100DatasetsRehearsed is a plan well within the default budget
// (100 datasets, 90 downstream, 2,700 partitions): rehearsed.
func BenchmarkPlan100DatasetsRehearsed(b *testing.B) { benchPlan(b, 100) }

func benchPlan(b *testing.B, size int) {
	cfg, wh := lineageFixture(b, size)
	tw := &timedWarehouse{Warehouse: wh}
	p, err := New(cfg, tw, nil)
	if err != nil {
		b.Fatal(err)
	}
	req := benchRequest(cfg)
	ctx := context.Background()
	var total, inWarehouse time.Duration
	var queries int64
	var steps, parts, rehearsed int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tw.spent.Store(0)
		tw.queries.Store(0)
		start := time.Now()
		plan, err := p.Build(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		inWarehouse += time.Duration(tw.spent.Load())
		queries = tw.queries.Load()
		steps = len(plan.Steps)
		parts, rehearsed = 0, 0
		for _, s := range plan.Steps {
			parts += len(s.Partitions)
			for _, pp := range s.Partitions {
				if pp.ExpectedMethod == refill.ExpectedRehearsal {
					rehearsed++
				}
			}
		}
	}
	n := float64(b.N)
	own := total - inWarehouse
	b.ReportMetric(total.Seconds()/n, "s/plan")
	b.ReportMetric(inWarehouse.Seconds()/n, "warehouse-s/plan")
	b.ReportMetric(float64(own)/float64(inWarehouse), "planner/warehouse")
	b.ReportMetric(float64(queries), "queries/plan")
	b.ReportMetric(float64(steps), "steps")
	b.ReportMetric(float64(parts), "partitions")
	b.ReportMetric(float64(rehearsed), "rehearsed")
}

// BenchmarkPlanDiffs plans 30 days over the 100-dataset lineage twice per
// iteration, with content diffs (the default plan.diff_budget) and without
// (plan.diff_budget: 0, rehearsal alone), and reports the ratio of the two
// from the same run:
//
//	go test ./planner -run '^$' -bench PlanDiffs -benchtime 5x
func BenchmarkPlanDiffs(b *testing.B) {
	cfg, wh := lineageFixture(b, 100)
	p, err := New(cfg, wh, nil)
	if err != nil {
		b.Fatal(err)
	}
	req := benchRequest(cfg)
	ctx := context.Background()
	var with, without time.Duration
	var diffed, parts int
	for b.Loop() {
		for _, budget := range []int64{0, refill.DefaultDiffBudget} {
			cfg.Plan.DiffBudget = budget
			start := time.Now()
			plan, err := p.Build(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			took := time.Since(start)
			if budget == 0 {
				without += took
				continue
			}
			with += took
			diffed, parts = 0, 0
			for _, s := range plan.Steps {
				for _, pp := range s.Partitions {
					parts++
					if pp.Diff != nil && pp.Diff.Skipped == "" {
						diffed++
					}
				}
			}
		}
	}
	if diffed != parts {
		b.Fatalf("%d of %d partitions diffed, want all", diffed, parts)
	}
	n := float64(b.N)
	b.ReportMetric(without.Seconds()/n, "rehearsal-s/plan")
	b.ReportMetric(with.Seconds()/n, "with-diffs-s/plan")
	b.ReportMetric(float64(with)/float64(without), "with/without")
	b.ReportMetric(float64(parts), "partitions")
}

// benchRequest asks for 30 days from every source of the lineage, so that
// every derived dataset is rebuilt.
func benchRequest(cfg *refill.Config) Request {
	var targets []string
	for _, name := range cfg.DatasetNames() {
		if cfg.Datasets[name].IsSource() {
			targets = append(targets, name)
		}
	}
	return Request{Targets: targets, From: "2026-10-01", To: "2026-10-30", Reason: "bench", Actor: "bench"}
}
