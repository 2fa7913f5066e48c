package watch_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/store"
	"github.com/refill-dev/refill/warehouse"
	"github.com/refill-dev/refill/watch"
)

// countingWarehouse counts the grouped counts the watcher asks for.
type countingWarehouse struct {
	refill.Warehouse
	counts atomic.Int64
}

func (w *countingWarehouse) PartitionCounts(ctx context.Context, t refill.TableRef, from, to string) (map[string]int64, error) {
	w.counts.Add(1)
	return w.Warehouse.PartitionCounts(ctx, t, from, to)
}

// BenchmarkTick1000 is one watcher tick over 1,000 scheduled datasets with
// a 35-day horizon on a SQLite warehouse and state store: every table has
// 63 days of rows (the horizon and four weeks of history), one day of a
// tenth of them is missing, and a tenth have a failed partition in the
// audit log. It reports the warehouse queries per dataset.
//
//	go test ./watch -run '^$' -bench Tick1000 -benchtime 5x
func BenchmarkTick1000(b *testing.B) {
	const n = 1000
	dir := b.TempDir()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "wh.db")+"?_pragma=journal_mode(WAL)")
	if err != nil {
		b.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		b.Fatal(err)
	}
	cfg := &refill.Config{Dir: dir, Policy: refill.DefaultPolicy(), Datasets: map[string]*refill.Dataset{}, MaxRangeDays: refill.DefaultMaxRangeDays,
		Watch: refill.WatchConfig{Interval: refill.Duration(time.Minute)}}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("t%04d", i)
		if _, err := tx.Exec(fmt.Sprintf(`CREATE TABLE %s (day TEXT NOT NULL, v INTEGER)`, name)); err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(fmt.Sprintf(`CREATE INDEX %s_day ON %s (day)`, name, name)); err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(fmt.Sprintf(`WITH RECURSIVE d(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM d WHERE i < 63)
			INSERT INTO %s SELECT date('2026-11-29', '-' || (i - 1) || ' days'), i FROM d, (SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3)`, name)); err != nil {
			b.Fatal(err)
		}
		if i%10 == 0 {
			if _, err := tx.Exec(fmt.Sprintf(`DELETE FROM %s WHERE day = '2026-11-20'`, name)); err != nil {
				b.Fatal(err)
			}
		}
		cfg.Datasets[name] = &refill.Dataset{Name: name, Table: name, Partition: refill.PartitionSpec{Column: "day", Grain: refill.GrainDay},
			Schedule: &refill.Schedule{Every: refill.GrainDay, Lag: refill.Duration(2 * time.Hour), Horizon: 35},
			Job:      &refill.Job{Kind: refill.JobQuery, Query: fmt.Sprintf("SELECT day, v FROM %s WHERE day = :partition", name)}}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	db.Close()
	ctx := context.Background()
	wh, err := warehouse.Open(ctx, "sqlite:wh.db", dir)
	if err != nil {
		b.Fatal(err)
	}
	defer wh.Close()
	st, err := store.Open(ctx, "sqlite:"+filepath.Join(dir, "state.db"), "")
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	for i := 0; i < n; i += 10 {
		err := st.Update(ctx, func(tx *store.Tx) error {
			return tx.Append(ctx, &refill.Event{Kind: refill.EventRunFailed, Actor: "refill", PlanID: "old", Dataset: fmt.Sprintf("t%04d", i),
				Partition: "2026-11-10", At: now, Detail: refill.Detail(map[string]any{"error": "boom"})})
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	cw := &countingWarehouse{Warehouse: wh}
	w := &watch.Watcher{Config: cfg, Store: st, Warehouse: cw, Control: &control.Control{Config: cfg, Store: st, Warehouse: wh},
		Now: func() time.Time { return now }}
	b.ResetTimer()
	gaps := 0
	for i := 0; i < b.N; i++ {
		cw.counts.Store(0)
		got, datasets, err := w.Gaps(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if datasets != n {
			b.Fatalf("looked at %d datasets", datasets)
		}
		gaps = len(got)
	}
	b.StopTimer()
	if gaps != 2*n/10 {
		b.Fatalf("%d gaps, want %d (a missing day and a failed day in a tenth of the datasets)", gaps, 2*n/10)
	}
	b.ReportMetric(float64(cw.counts.Load())/n, "warehouse-queries/dataset")
}
