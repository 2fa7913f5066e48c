package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
	"github.com/refill-dev/refill/warehouse/warehousetest"
)

// BenchmarkSource measures the gate and the digest against bare counts on
// the benchmark source (warehousetest.RunBench), which is generated once
// per row count under $TMPDIR/refill-bench and reused:
//
//	go test ./warehouse/sqlite -run '^$' -bench Source -benchtime 3x -rows 10000000
func BenchmarkSource(b *testing.B) {
	rows := warehousetest.BenchRows(b)
	path, err := benchSource(b, rows)
	if err != nil {
		b.Fatal(err)
	}
	w, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	ref := refill.TableRef{Table: warehousetest.BenchTable, Column: warehousetest.BenchColumn, Grain: refill.GrainDay}
	cols, err := w.Columns(b.Context(), ref.Table)
	if err != nil {
		b.Fatal(err)
	}
	count := func(what, from, to string) func(context.Context) (int64, error) {
		f, err := partitionFilter(ref, cols, from, to)
		if err != nil {
			b.Fatal(err)
		}
		q := fmt.Sprintf("SELECT %s FROM %s WHERE %s", what, sqltext.SQLite.QuoteName(ref.Table), f.where)
		return func(ctx context.Context) (n int64, err error) {
			err = w.db.QueryRowContext(ctx, q, f.args...).Scan(&n)
			return n, err
		}
	}
	for _, q := range []string{"count(*)", "count(coalesce(c10, 0))"} {
		for _, p := range [][2]string{{warehousetest.BenchFrom, warehousetest.BenchTo}, {warehousetest.BenchPartition, warehousetest.BenchPartition}} {
			f, _ := partitionFilter(ref, cols, p[0], p[1])
			b.Logf("plan of %s over %s..%s: %s", q, p[0], p[1], queryPlan(b, w.db, fmt.Sprintf("SELECT %s FROM events WHERE %s", q, f.where), f.args...))
		}
	}
	warehousetest.RunBench(b, w, warehousetest.BenchBaselines{
		CountRange:         count("count(*)", warehousetest.BenchFrom, warehousetest.BenchTo),
		CountRangeRows:     count("count(coalesce(c10, 0))", warehousetest.BenchFrom, warehousetest.BenchTo),
		CountPartition:     count("count(*)", warehousetest.BenchPartition, warehousetest.BenchPartition),
		CountPartitionRows: count("count(coalesce(c10, 0))", warehousetest.BenchPartition, warehousetest.BenchPartition),
	})
}

// queryPlan returns SQLite's plan for q, for the benchmark's log.
func queryPlan(b *testing.B, db *sql.DB, q string, args ...any) string {
	rows, err := db.Query("EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var plan string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			b.Fatal(err)
		}
		plan += detail + "; "
	}
	return plan
}

// benchSource returns the path of the benchmark source with rows rows,
// generating it if it is not there yet. It is generated into a temporary
// file and renamed, so an interrupted generation is never reused.
//
// Rows are spread evenly over 30 days in order. Each row has ten nullable
// columns (null rates from 1% to 49%), a created_at that is text in SQLite's
// usual form except for 1% in ISO form with a Z and 0.1% in 2027 (future),
// and an updated_at that is 0 to 59 minutes later, 7.7% null and 0.1%
// a minute earlier (inverted).
func benchSource(b *testing.B, rows int) (string, error) {
	dir := filepath.Join(os.TempDir(), "refill-bench")
	path := filepath.Join(dir, fmt.Sprintf("source-%d.db", rows))
	if _, err := os.Stat(path); err == nil {
		return path, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	b.Logf("generating %d rows into %s", rows, path)
	start := time.Now()
	db, err := sql.Open("sqlite", tmp+"?_pragma=journal_mode(OFF)&_pragma=synchronous(OFF)")
	if err != nil {
		return "", err
	}
	defer db.Close()
	for _, q := range []string{
		`CREATE TABLE events (id INTEGER, day TEXT, created_at TIMESTAMP, updated_at TIMESTAMP,
			c1 INTEGER, c2 TEXT, c3 REAL, c4 TEXT, c5 INTEGER, c6 TEXT, c7 REAL, c8 TEXT, c9 INTEGER, c10 TEXT)`,
		fmt.Sprintf(`WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i + 1 < %[1]d),
		r AS (SELECT i, (i * 2654435761) %% 4294967296 AS h, date('2026-10-01', '+' || (i * 30 / %[1]d) || ' days') AS day FROM s)
		INSERT INTO events SELECT i, day,
			CASE WHEN h %% 997 = 0 THEN '2027-01-01 00:00:00'
				WHEN h %% 100 = 1 THEN strftime('%%Y-%%m-%%dT%%H:%%M:%%SZ', day, '+' || (i %% 86400) || ' seconds')
				ELSE datetime(day, '+' || (i %% 86400) || ' seconds') END,
			CASE WHEN h %% 13 = 0 THEN NULL
				WHEN h %% 991 = 0 THEN datetime(day, '+' || (i %% 86400 - 60) || ' seconds')
				ELSE datetime(day, '+' || (i %% 86400 + h %% 3600) || ' seconds') END,
			CASE WHEN h %% 100 < 3 THEN NULL ELSE h %% 100000 END,
			CASE WHEN h %% 97 < 5 THEN NULL ELSE 'customer-' || (h %% 5000) END,
			CASE WHEN h %% 89 < 2 THEN NULL ELSE (h %% 100000) / 100.0 END,
			CASE WHEN h %% 83 < 20 THEN NULL ELSE 'sku-' || (h %% 777) END,
			CASE WHEN h %% 79 < 1 THEN NULL ELSE h %% 7 END,
			CASE WHEN h %% 73 < 7 THEN NULL ELSE 'eu-west-' || (h %% 3) END,
			CASE WHEN h %% 71 < 9 THEN NULL ELSE (h %% 1000) * 1.5 END,
			CASE WHEN h %% 67 < 4 THEN NULL ELSE hex(h) END,
			CASE WHEN h %% 61 < 30 THEN NULL ELSE h END,
			CASE WHEN h %% 59 < 2 THEN NULL ELSE 'status-' || (h %% 4) END
		FROM r`, rows),
		"CREATE INDEX events_day ON events (day)",
		"ANALYZE",
	} {
		if _, err := db.Exec(q); err != nil {
			return "", fmt.Errorf("generate %s: %w", tmp, err)
		}
	}
	if err := db.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", err
	}
	b.Logf("generated in %v", time.Since(start).Round(time.Second))
	return path, nil
}

// BenchmarkDrift measures the gate with 10 not_null columns, unique on id
// and drift on three columns against the analyst's SQL and one query per
// check (warehousetest.RunDriftBench), on the same cached source:
//
//	go test ./warehouse/sqlite -run '^$' -bench Drift -benchtime 3x -rows 1000000
func BenchmarkDrift(b *testing.B) {
	rows := warehousetest.BenchRows(b)
	path, err := benchSource(b, rows)
	if err != nil {
		b.Fatal(err)
	}
	w, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	ref := refill.TableRef{Table: warehousetest.BenchTable, Column: warehousetest.BenchColumn, Grain: refill.GrainDay}
	cols, err := w.Columns(b.Context(), ref.Table)
	if err != nil {
		b.Fatal(err)
	}
	f, err := partitionFilter(ref, cols, warehousetest.BenchFrom, warehousetest.BenchTo)
	if err != nil {
		b.Fatal(err)
	}
	warehousetest.RunDriftBench(b, w, warehousetest.BenchSQL{
		Where: f.where,
		Sums: func(ctx context.Context, q string) (int64, []float64, error) {
			rows, err := w.db.QueryContext(ctx, q, f.args...)
			if err != nil {
				return 0, nil, err
			}
			defer rows.Close()
			names, err := rows.Columns()
			if err != nil {
				return 0, nil, err
			}
			vals := make([]any, len(names))
			dest := make([]any, len(names))
			for i := range vals {
				dest[i] = &vals[i]
			}
			sums := make([]float64, len(names)-1)
			var n int64
			for rows.Next() {
				if err := rows.Scan(dest...); err != nil {
					return 0, nil, err
				}
				n++
				for i, v := range vals[1:] {
					switch v := v.(type) {
					case int64:
						sums[i] += float64(v)
					case float64:
						sums[i] += v
					case nil:
					default:
						return 0, nil, fmt.Errorf("column %d is %T", i+1, v)
					}
				}
			}
			return n, sums, rows.Err()
		},
	})
}

// BenchmarkDiff: the content diff's compare step against the partition's
// checksum (warehousetest.RunDiffBench).
func BenchmarkDiff(b *testing.B) {
	w, err := Open(filepath.Join(b.TempDir(), "wh.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	warehousetest.RunDiffBench(b, w, func(ctx context.Context, sql string) error {
		_, err := w.db.ExecContext(ctx, sql)
		return err
	})
}
