package warehousetest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
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

// The drift benchmark's spec: the ten nullable columns not_null, id unique,
// and drift on two numeric columns (c3, c5) and one text column (c8), all
// in the benchmark source as generated since issue 3.
var (
	BenchUnique       = []string{"id"}
	BenchDrift        = []string{"c3", "c5", "c8"}
	benchNumericDrift = []string{"c3", "c5"}
)

// BenchDriftSpec is the gate's spec for the drift benchmark.
func BenchDriftSpec() refill.ProfileSpec {
	spec := BenchSpec(10)
	spec.TimeOrder, spec.NoFuture = nil, nil
	spec.Unique, spec.Drift = BenchUnique, BenchDrift
	return spec
}

// BenchSQL runs hand-written SQL over the benchmark range in the driver's
// own connection: Where is the range predicate (with the driver's
// placeholders), and Sums runs a query whose first column is the partition
// and returns how many rows it returned and the sum of each other column
// (numbers; NULL adds nothing), reading every row as a client would.
type BenchSQL struct {
	Where string
	Sums  func(ctx context.Context, q string) (rows int64, sums []float64, err error)
}

// benchQuery is one hand-written query and the figures the gate's profiles
// must match: its result rows (want[0], -1 for not checked) and its column
// sums.
type benchQuery struct {
	name string
	sql  string
	want func(map[string]refill.Profile) []float64
}

// analystQueries are the SQL a careful analyst writes for the same exact
// metrics as BenchDriftSpec: one GROUP BY partition for counts, nulls, means
// and zeros, and one grouped query each for duplicate keys, distinct counts
// and top values.
func analystQueries(where string) []benchQuery {
	var scan []string
	scan = append(scan, "count(*)")
	for i := range 10 {
		scan = append(scan, fmt.Sprintf("count(*) - count(c%d)", i+1))
	}
	for _, c := range benchNumericDrift {
		scan = append(scan, fmt.Sprintf("CAST(avg(%[1]s) AS DOUBLE PRECISION), sum(CASE WHEN %[1]s = 0 THEN 1 ELSE 0 END)", c))
	}
	var distinct, top, branches []string
	for i, c := range BenchDrift {
		distinct = append(distinct, fmt.Sprintf("count(DISTINCT %s)", c))
		top = append(top, fmt.Sprintf("max(CASE WHEN i = %d THEN n END)", i))
		branches = append(branches, fmt.Sprintf("SELECT day, %d AS i, count(*) AS n FROM events WHERE %s AND %s IS NOT NULL GROUP BY day, %s", i, where, c, c))
	}
	return []benchQuery{
		{name: "a-scan", sql: fmt.Sprintf("SELECT day, %s FROM events WHERE %s GROUP BY day", strings.Join(scan, ", "), where),
			want: func(ps map[string]refill.Profile) []float64 {
				out := []float64{float64(len(ps)), tot(ps, rowsOf)}
				for i := range 10 {
					out = append(out, tot(ps, nullsOf(fmt.Sprintf("c%d", i+1))))
				}
				for _, c := range benchNumericDrift {
					out = append(out, tot(ps, meanOf(c)), tot(ps, zerosOf(c)))
				}
				return out
			}},
		dupQuery("a-dups", where),
		{name: "a-distinct", sql: fmt.Sprintf("SELECT day, %s FROM events WHERE %s GROUP BY day", strings.Join(distinct, ", "), where),
			want: func(ps map[string]refill.Profile) []float64 {
				out := []float64{float64(len(ps))}
				for _, c := range BenchDrift {
					out = append(out, tot(ps, distinctOf(c)))
				}
				return out
			}},
		{name: "a-top", sql: fmt.Sprintf("SELECT day, %s FROM (%s) v GROUP BY day", strings.Join(top, ", "), strings.Join(branches, " UNION ALL ")),
			want: func(ps map[string]refill.Profile) []float64 {
				out := []float64{float64(len(ps))}
				for _, c := range BenchDrift {
					out = append(out, tot(ps, topOf(c)))
				}
				return out
			}},
	}
}

// dupQuery lists the partitions' duplicate keys: the rows it returns are
// the shared keys, and its count column the rows sharing them.
func dupQuery(name, where string) benchQuery {
	k := strings.Join(BenchUnique, ", ")
	var nn []string
	for _, c := range BenchUnique {
		nn = append(nn, c+" IS NOT NULL")
	}
	return benchQuery{name: name,
		sql: fmt.Sprintf("SELECT day, count(*) FROM events WHERE %s AND %s GROUP BY day, %s HAVING count(*) > 1", where, strings.Join(nn, " AND "), k),
		want: func(ps map[string]refill.Profile) []float64 {
			var keys, rows float64
			for _, p := range ps {
				if p.Duplicates != nil {
					keys += float64(p.Duplicates.Keys)
					rows += float64(p.Duplicates.Rows)
				}
			}
			return []float64{keys, rows}
		}}
}

// perCheckQueries are the same metrics the way Soda or Elementary issue
// them: one query per check (per not_null column, for unique, per drift
// metric per column), each over the whole range grouped by partition.
func perCheckQueries(where string) []benchQuery {
	one := func(name, expr, extra string, f func(refill.Profile) float64) benchQuery {
		return benchQuery{name: name, sql: fmt.Sprintf("SELECT day, %s FROM events WHERE %s%s GROUP BY day", expr, where, extra),
			want: func(ps map[string]refill.Profile) []float64 { return []float64{float64(len(ps)), tot(ps, f)} }}
	}
	qs := []benchQuery{one("rows", "count(*)", "", rowsOf)}
	for i := range 10 {
		c := fmt.Sprintf("c%d", i+1)
		qs = append(qs, one("not_null-"+c, fmt.Sprintf("count(*) - count(%s)", c), "", nullsOf(c)))
	}
	qs = append(qs, dupQuery("unique-id", where))
	for _, c := range BenchDrift {
		if slices.Contains(benchNumericDrift, c) {
			qs = append(qs,
				one("mean-"+c, fmt.Sprintf("CAST(avg(%s) AS DOUBLE PRECISION)", c), "", meanOf(c)),
				one("zeros-"+c, fmt.Sprintf("sum(CASE WHEN %s = 0 THEN 1 ELSE 0 END)", c), "", zerosOf(c)))
		}
		qs = append(qs,
			one("distinct-"+c, fmt.Sprintf("count(DISTINCT %s)", c), "", distinctOf(c)),
			benchQuery{name: "top-" + c,
				sql:  fmt.Sprintf("SELECT day, max(n) FROM (SELECT day, count(*) AS n FROM events WHERE %s AND %s IS NOT NULL GROUP BY day, %s) v GROUP BY day", where, c, c),
				want: func(ps map[string]refill.Profile) []float64 { return []float64{float64(len(ps)), tot(ps, topOf(c))} }})
	}
	return qs
}

func tot(ps map[string]refill.Profile, f func(refill.Profile) float64) float64 {
	var s float64
	for _, p := range ps {
		s += f(p)
	}
	return s
}

func rowsOf(p refill.Profile) float64 { return float64(p.Rows) }
func nullsOf(c string) func(refill.Profile) float64 {
	return func(p refill.Profile) float64 { return float64(p.Nulls[c]) }
}
func meanOf(c string) func(refill.Profile) float64 {
	return func(p refill.Profile) float64 { return p.Numeric[c].Mean }
}
func zerosOf(c string) func(refill.Profile) float64 {
	return func(p refill.Profile) float64 { return float64(p.Numeric[c].Zeros) }
}
func distinctOf(c string) func(refill.Profile) float64 {
	return func(p refill.Profile) float64 { return float64(p.Values[c].Distinct) }
}
func topOf(c string) func(refill.Profile) float64 {
	return func(p refill.Profile) float64 { return float64(p.Values[c].Top) }
}

// peakRSS returns the process's peak resident set (VmHWM) in bytes, and
// resets it when reset is true (writing 5 to /proc/self/clear_refs), so
// that a later reading covers only what ran in between. It returns -1
// where /proc does not tell.
func peakRSS(reset bool) float64 {
	if reset {
		_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
		return 0
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				n, err := strconv.ParseFloat(f[0], 64)
				if err == nil {
					return n * 1024
				}
			}
		}
	}
	return -1
}

// RunDriftBench measures the gate's profile with BenchDriftSpec (10
// not_null columns, unique on id, drift on c3, c5 and c8) over the 30-day
// range against the analyst's four queries (analystQueries, run one after
// another) and against one query per check (perCheckQueries), in one run:
// b.N rounds, each timing the gate, the analyst's set and the per-check
// set once, in turn; the fastest round of each is reported with the
// ratios. Every query's result is first checked against the gate's
// profiles. It also reports the gate's peak RSS (VmHWM over the gate's
// calls alone, reset before each) and the Go heap it allocates per call.
func RunDriftBench(b *testing.B, w refill.Warehouse, s BenchSQL) {
	ctx := b.Context()
	prof, ok := w.(refill.Profiler)
	if !ok {
		b.Fatalf("%T is not a refill.Profiler", w)
	}
	ref := refill.TableRef{Table: BenchTable, Column: BenchColumn, Grain: refill.GrainDay}
	spec := BenchDriftSpec()
	ps, err := prof.Profile(ctx, ref, spec, BenchFrom, BenchTo)
	if err != nil {
		b.Fatalf("gate: %v", err)
	}
	if len(ps) != BenchDays {
		b.Fatalf("profile found %d partitions, want %d", len(ps), BenchDays)
	}
	analyst, perCheck := analystQueries(s.Where), perCheckQueries(s.Where)
	for _, q := range append(slices.Clone(analyst), perCheck...) {
		n, sums, err := s.Sums(ctx, q.sql)
		if err != nil {
			b.Fatalf("%s: %v\n%s", q.name, err, q.sql)
		}
		got := append([]float64{float64(n)}, sums...)
		want := q.want(ps)
		if len(got) != len(want) {
			b.Fatalf("%s: %d figures, want %d", q.name, len(got), len(want))
		}
		for i := range got {
			if d := got[i] - want[i]; d > 1e-6*max(1, want[i]) || -d > 1e-6*max(1, want[i]) {
				b.Fatalf("%s disagrees with the gate at figure %d: %v, gate %v\n%s", q.name, i, got[i], want[i], q.sql)
			}
		}
	}
	b.Logf("%d analyst queries and %d per-check queries agree with the gate", len(analyst), len(perCheck))
	runAll := func(qs []benchQuery) error {
		for _, q := range qs {
			if _, _, err := s.Sums(ctx, q.sql); err != nil {
				return fmt.Errorf("%s: %w", q.name, err)
			}
		}
		return nil
	}
	var gateBest, analystBest, perCheckBest = time.Duration(1 << 62), time.Duration(1 << 62), time.Duration(1 << 62)
	var rss, alloc float64
	b.ResetTimer()
	for range b.N {
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		peakRSS(true)
		start := time.Now()
		if _, err := prof.Profile(ctx, ref, spec, BenchFrom, BenchTo); err != nil {
			b.Fatalf("gate: %v", err)
		}
		gateBest = min(gateBest, time.Since(start))
		rss = max(rss, peakRSS(false))
		runtime.ReadMemStats(&m1)
		alloc = max(alloc, float64(m1.TotalAlloc-m0.TotalAlloc))

		start = time.Now()
		if err := runAll(analyst); err != nil {
			b.Fatal(err)
		}
		analystBest = min(analystBest, time.Since(start))

		start = time.Now()
		if err := runAll(perCheck); err != nil {
			b.Fatal(err)
		}
		perCheckBest = min(perCheckBest, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(gateBest.Seconds(), "gate-s")
	b.ReportMetric(analystBest.Seconds(), "analyst-s")
	b.ReportMetric(perCheckBest.Seconds(), "perchk-s")
	b.ReportMetric(gateBest.Seconds()/analystBest.Seconds(), "gate/analyst")
	b.ReportMetric(perCheckBest.Seconds()/gateBest.Seconds(), "perchk/gate")
	b.ReportMetric(float64(len(perCheck)), "perchk-queries")
	b.ReportMetric(rss/1e6, "gate-peak-rss-MB")
	b.ReportMetric(alloc/1e6, "gate-alloc-MB")
}
