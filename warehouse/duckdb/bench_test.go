//go:build duckdb

package duckdb

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/warehousetest"
)

// BenchmarkSource measures the gate and the digest against bare counts on
// the benchmark source (warehousetest.RunBench), generated once per row
// count under $TMPDIR/refill-bench and reused. Beside the other engines, in
// one run:
//
//	go test -tags duckdb ./warehouse/sqlite ./warehouse/postgres ./warehouse/duckdb -run '^$' -bench Source -benchtime 3x -rows 10000000
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
		q := fmt.Sprintf("SELECT %s FROM %s WHERE %s", what, d.QuoteName(ref.Table), f.where)
		return func(ctx context.Context) (n int64, err error) {
			err = w.DB().QueryRowContext(ctx, q, f.args...).Scan(&n)
			return n, err
		}
	}
	const all, oneRow = "count(*)", "count(coalesce(c10, ''))"
	from, to, part := warehousetest.BenchFrom, warehousetest.BenchTo, warehousetest.BenchPartition
	warehousetest.RunBench(b, w, warehousetest.BenchBaselines{
		CountRange:         count(all, from, to),
		CountRangeRows:     count(oneRow, from, to),
		CountPartition:     count(all, part, part),
		CountPartitionRows: count(oneRow, part, part),
	})
}

// benchSource returns the path of the benchmark source with rows rows,
// generating it if it is not there yet (into a temporary file, renamed
// when complete). The data are those of the SQLite driver's source (see
// its benchSource) in native types, as PostgreSQL's: day is a DATE, the
// times TIMESTAMPTZ.
func benchSource(b *testing.B, rows int) (string, error) {
	dir := filepath.Join(os.TempDir(), "refill-bench")
	path := filepath.Join(dir, fmt.Sprintf("source-%d.duckdb", rows))
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
	w, err := Open(tmp)
	if err != nil {
		return "", err
	}
	for _, q := range []string{
		`CREATE TABLE events (id BIGINT, day DATE, created_at TIMESTAMPTZ, updated_at TIMESTAMPTZ,
			c1 BIGINT, c2 VARCHAR, c3 DOUBLE, c4 VARCHAR, c5 INTEGER, c6 VARCHAR, c7 DECIMAL(18,3), c8 VARCHAR, c9 BIGINT, c10 VARCHAR)`,
		fmt.Sprintf(`INSERT INTO events
		SELECT i, d, ca,
			CASE WHEN h %% 13 = 0 THEN NULL WHEN h %% 991 = 0 THEN ca - INTERVAL 60 SECOND ELSE ca + to_seconds(h %% 3600) END,
			CASE WHEN h %% 100 < 3 THEN NULL ELSE h %% 100000 END,
			CASE WHEN h %% 97 < 5 THEN NULL ELSE 'customer-' || (h %% 5000) END,
			CASE WHEN h %% 89 < 2 THEN NULL ELSE (h %% 100000) / 100.0 END,
			CASE WHEN h %% 83 < 20 THEN NULL ELSE 'sku-' || (h %% 777) END,
			CASE WHEN h %% 79 < 1 THEN NULL ELSE h %% 7 END,
			CASE WHEN h %% 73 < 7 THEN NULL ELSE 'eu-west-' || (h %% 3) END,
			CASE WHEN h %% 71 < 9 THEN NULL ELSE (h %% 1000) * 1.5 END,
			CASE WHEN h %% 67 < 4 THEN NULL ELSE lower(hex(h)) END,
			CASE WHEN h %% 61 < 30 THEN NULL ELSE h END,
			CASE WHEN h %% 59 < 2 THEN NULL ELSE 'status-' || (h %% 4) END
		FROM (SELECT i, h, d,
				CASE WHEN h %% 997 = 0 THEN TIMESTAMPTZ '2027-01-01 00:00:00+00' ELSE CAST(d AS TIMESTAMPTZ) + to_seconds(i %% 86400) END AS ca
			FROM (SELECT i, (i * 2654435761) %% 4294967296 AS h, DATE '2026-10-01' + CAST(i * 30 // %[1]d AS INTEGER) AS d
				FROM range(0, %[1]d) t(i)) g) g2
		ORDER BY i`, rows),
	} {
		if _, err := w.DB().Exec(q); err != nil {
			w.Close()
			return "", fmt.Errorf("generate %s: %w", tmp, err)
		}
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", err
	}
	_ = os.Rename(tmp+".wal", path+".wal")
	b.Logf("generated in %v", time.Since(start).Round(time.Second))
	return path, nil
}
