package warehousetest

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/refill-dev/refill"
)

var diffRows = flag.Int("diff-rows", 100_000, "rows in the partition the diff benchmark compares")

// RunDiffBench measures the content diff's compare step against the
// partition's checksum (Digest), both inside one rehearsal over the same
// partition of *diff-rows rows, one in a hundred of which the build
// changes. exec runs a fixture statement. The build's own time is left
// out: keep is what the diff does before the build (keeping the old rows
// aside), compare what it does after (comparing them with the new, in the
// warehouse, and the sample); diff/digest is both against the checksum.
//
//	go test ./warehouse/sqlite ./warehouse/postgres -run '^$' -bench Diff -benchtime 5x
func RunDiffBench(b *testing.B, w refill.Warehouse, exec func(ctx context.Context, sql string) error) {
	ctx := b.Context()
	n := *diffRows
	gen := fmt.Sprintf("WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < %d) ", n)
	for _, s := range []string{
		"CREATE TABLE diffbench (day TEXT NOT NULL, id INTEGER NOT NULL, qty INTEGER, amount NUMERIC(14,2), note TEXT)",
		"CREATE TABLE diffsrc (day TEXT NOT NULL, id INTEGER NOT NULL, qty INTEGER, amount NUMERIC(14,2), note TEXT)",
		"INSERT INTO diffbench " + gen + "SELECT '2026-11-02', i, i % 7, (i % 1000) * 1.25, 'row ' || i FROM s",
		"INSERT INTO diffbench " + gen + "SELECT '2026-11-03', i, i % 7, (i % 1000) * 1.25, 'row ' || i FROM s",
		"INSERT INTO diffsrc " + gen + "SELECT '2026-11-02', i, i % 7, (i % 1000) * 1.25 + CASE WHEN i % 100 = 0 THEN 1 ELSE 0 END, 'row ' || i FROM s",
		"CREATE INDEX diffbench_day ON diffbench (day)",
		"CREATE INDEX diffsrc_day ON diffsrc (day)",
	} {
		if err := exec(ctx, s); err != nil {
			b.Fatalf("%s: %v", s, err)
		}
	}
	ref := refill.TableRef{Table: "diffbench", Column: "day", Grain: refill.GrainDay}
	const part = "2026-11-02"
	build := "DELETE FROM diffbench WHERE day = :partition; INSERT INTO diffbench SELECT day, id, qty, amount, note FROM diffsrc WHERE day = :partition"
	for _, mode := range []struct {
		name string
		spec refill.DiffSpec
	}{
		{"keyed", refill.DiffSpec{Key: []string{"id"}}},
		{"rowhash", refill.DiffSpec{}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			var digest, keep, compare time.Duration
			var changed int64
			for b.Loop() {
				err := w.Rehearse(ctx, func(tx refill.WarehouseTx) error {
					start := time.Now()
					if _, err := tx.Digest(ctx, ref, part); err != nil {
						return err
					}
					digest += time.Since(start)
					var built time.Time
					start = time.Now()
					d, err := tx.Diff(ctx, ref, part, mode.spec, func() error {
						keep += time.Since(start)
						defer func() { built = time.Now() }()
						return tx.ExecSQL(ctx, ref, build, part)
					})
					if err != nil {
						return err
					}
					compare += time.Since(built)
					changed = d.OnlyNew
					if d.Changed != nil {
						changed = *d.Changed
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			if want := int64(n / 100); changed != want {
				b.Fatalf("the diff found %d changed rows, want %d", changed, want)
			}
			iters := float64(b.N)
			b.ReportMetric(digest.Seconds()/iters, "digest-s")
			b.ReportMetric(keep.Seconds()/iters, "keep-s")
			b.ReportMetric(compare.Seconds()/iters, "compare-s")
			b.ReportMetric(float64(compare)/float64(digest), "compare/digest")
			b.ReportMetric(float64(keep+compare)/float64(digest), "diff/digest")
			b.ReportMetric(float64(n), "rows")
		})
	}
}
