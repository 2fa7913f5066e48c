package warehousetest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/refill-dev/refill"
)

// The benchmark source: a table of Rows events over 30 daily partitions,
// 2026-10-01 to 2026-10-30, appended in day order like a real event table,
// with an index on the partition column as a table whose partitions get
// deleted and rebuilt needs. Each driver creates it in its own dialect
// (the SQLite driver's benchSource describes the data) and caches it
// between runs.
const (
	BenchTable     = "events"
	BenchColumn    = "day"
	BenchFrom      = "2026-10-01"
	BenchTo        = "2026-10-30"
	BenchPartition = "2026-10-15"
	BenchDays      = 30
)

// BenchNow is the clock the benchmark's no_future checks use: some rows
// are stamped in 2027.
var BenchNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

var benchRows = flag.Int("rows", 0, "rows in the benchmark source table (default $REFILL_BENCH_ROWS, else 10,000,000)")

// BenchRows is how many rows the benchmark source has: the -rows flag, else
// REFILL_BENCH_ROWS, else ten million.
func BenchRows(b *testing.B) int {
	if *benchRows > 0 {
		return *benchRows
	}
	if s := os.Getenv("REFILL_BENCH_ROWS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < BenchDays {
			b.Fatalf("REFILL_BENCH_ROWS=%q: want a whole number of at least %d", s, BenchDays)
		}
		return n
	}
	return 10_000_000
}

// BenchSpec is the gate's spec for the benchmark source with notNull of its
// ten nullable columns checked, one time_order pair and two no_future
// columns.
func BenchSpec(notNull int) refill.ProfileSpec {
	spec := refill.ProfileSpec{
		TimeOrder: []refill.TimeOrderCheck{{Earlier: "created_at", Later: "updated_at"}},
		NoFuture:  []string{"created_at", "updated_at"},
		Now:       BenchNow,
	}
	for i := range notNull {
		spec.NotNull = append(spec.NotNull, fmt.Sprintf("c%d", i+1))
	}
	return spec
}

// BenchBaselines are the bare queries the gate and the digest are compared
// with, in the driver's own SQL over the same predicates.
type BenchBaselines struct {
	// CountRange is SELECT count(*) FROM events WHERE <the range predicate
	// Profile and PartitionCounts use> for BenchFrom..BenchTo.
	CountRange func(ctx context.Context) (int64, error)
	// CountRangeRows counts the range by a column that is not indexed, so
	// that it reads every row as the gate must, where CountRange may be
	// answered from the index alone.
	CountRangeRows func(ctx context.Context) (int64, error)
	// CountPartition is the same for BenchPartition alone.
	CountPartition func(ctx context.Context) (int64, error)
	// CountPartitionRows counts BenchPartition's rows by a column that is
	// not indexed, so that it reads every row as the digest must, while
	// CountPartition may be answered from the index alone.
	CountPartitionRows func(ctx context.Context) (int64, error)
	// DigestBefore, when set, is the digest of BenchPartition as the
	// driver's previous checksum version computed it, measured beside the
	// current one so that the two compare in one run.
	DigestBefore func(ctx context.Context) (int64, error)
}

// RunBench measures the gate (Profile with 2 and with 10 not-null columns,
// plus the time checks) against a count of the same range, and the digest
// of one partition against counts of that partition, all in one run:
// b.N rounds, each timing every query once, in turn, so that drift on a
// noisy machine hits them alike. The fastest round of each is reported,
// with the ratios between them. Results are checked against each other
// first: a fast wrong answer is no benchmark.
func RunBench(b *testing.B, w refill.Warehouse, base BenchBaselines) {
	ctx := b.Context()
	prof, ok := w.(refill.Profiler)
	if !ok {
		b.Fatalf("%T is not a refill.Profiler", w)
	}
	reh, ok := w.(refill.Rehearser)
	if !ok {
		b.Fatalf("%T is not a refill.Rehearser", w)
	}
	ref := refill.TableRef{Table: BenchTable, Column: BenchColumn, Grain: refill.GrainDay}
	gate := func(n int) func(context.Context) (int64, error) {
		return func(ctx context.Context) (int64, error) {
			got, err := prof.Profile(ctx, ref, BenchSpec(n), BenchFrom, BenchTo)
			var rows int64
			for _, p := range got {
				rows += p.Rows
			}
			if err == nil && len(got) != BenchDays {
				err = fmt.Errorf("profile found %d partitions, want %d", len(got), BenchDays)
			}
			return rows, err
		}
	}
	digest := func(ctx context.Context) (int64, error) {
		d, err := reh.Digest(ctx, ref, BenchPartition)
		return d.Rows, err
	}
	type measure struct {
		name string
		run  func(context.Context) (int64, error)
		best time.Duration
		rows int64
	}
	ms := []*measure{
		{name: "count", run: base.CountRange},
		{name: "rowcount", run: base.CountRangeRows},
		{name: "gate2", run: gate(2)},
		{name: "gate10", run: gate(10)},
		{name: "partcount", run: base.CountPartition},
		{name: "partrows", run: base.CountPartitionRows},
		{name: "digest", run: digest},
	}
	var dgBefore *measure
	if base.DigestBefore != nil {
		dgBefore = &measure{name: "digest-before", run: base.DigestBefore}
		ms = append(ms, dgBefore)
	}
	// One untimed round warms caches and checks the answers agree.
	for _, m := range ms {
		n, err := m.run(ctx)
		if err != nil {
			b.Fatalf("%s: %v", m.name, err)
		}
		m.rows, m.best = n, time.Duration(1<<62)
	}
	count, rowcount, gate2, gate10, partcount, partrows, dg := ms[0], ms[1], ms[2], ms[3], ms[4], ms[5], ms[6]
	if count.rows != rowcount.rows || count.rows != gate2.rows || count.rows != gate10.rows ||
		partcount.rows != partrows.rows || partcount.rows != dg.rows || partcount.rows == 0 ||
		(dgBefore != nil && dgBefore.rows != dg.rows) {
		b.Fatalf("the queries disagree: range %d and %d, gate %d and %d rows; partition %d and %d, digest %d rows",
			count.rows, rowcount.rows, gate2.rows, gate10.rows, partcount.rows, partrows.rows, dg.rows)
	}
	b.ResetTimer()
	for range b.N {
		for _, m := range ms {
			if m == partcount {
				// The range's scans have pushed the partition out of the
				// warehouse's cache: read it once, untimed, so that the
				// count and the digests all find it there, and not the
				// first of them alone pay to bring it back.
				if _, err := base.CountPartitionRows(ctx); err != nil {
					b.Fatalf("reading the partition: %v", err)
				}
			}
			start := time.Now()
			if _, err := m.run(ctx); err != nil {
				b.Fatalf("%s: %v", m.name, err)
			}
			m.best = min(m.best, time.Since(start))
		}
	}
	b.StopTimer()
	sec := func(m *measure) float64 { return m.best.Seconds() }
	b.ReportMetric(sec(count), "count-s")
	b.ReportMetric(sec(rowcount), "rowcount-s")
	b.ReportMetric(sec(gate2), "gate2-s")
	b.ReportMetric(sec(gate10), "gate10-s")
	b.ReportMetric(sec(gate2)/sec(count), "gate2/count")
	b.ReportMetric(sec(gate10)/sec(count), "gate10/count")
	b.ReportMetric(sec(gate2)/sec(rowcount), "gate2/rowcount")
	b.ReportMetric(sec(gate10)/sec(rowcount), "gate10/rowcount")
	b.ReportMetric(1000*sec(partcount), "partcount-ms")
	b.ReportMetric(1000*sec(partrows), "partrows-ms")
	b.ReportMetric(1000*sec(dg), "digest-ms")
	b.ReportMetric(sec(dg)/sec(partcount), "digest/count")
	b.ReportMetric(sec(dg)/sec(partrows), "digest/rowcount")
	if dgBefore != nil {
		b.ReportMetric(1000*sec(dgBefore), "digest-before-ms")
		b.ReportMetric(sec(dgBefore)/sec(partrows), "digest-before/rowcount")
	}
}
