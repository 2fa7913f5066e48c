package postgres

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/internal/pgtest"
	"github.com/refill-dev/refill/warehouse/sqltext"
	"github.com/refill-dev/refill/warehouse/warehousetest"
)

// BenchmarkSource measures the gate and the digest (and the digest's
// version 1, as it was before version 2) against bare counts on
// the benchmark source (warehousetest.RunBench), which is generated once
// per row count into the schema refill_bench_<rows> of the test server and
// reused:
//
//	go test ./warehouse/postgres -run '^$' -bench Source -benchtime 3x -rows 10000000
func BenchmarkSource(b *testing.B) {
	rows := warehousetest.BenchRows(b)
	dsn, err := benchSource(b, rows)
	if err != nil {
		b.Fatal(err)
	}
	w, err := Open(b.Context(), dsn)
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
		p, err := partitionPlanFor(ref, cols, from, to)
		if err != nil {
			b.Fatal(err)
		}
		q := fmt.Sprintf("SELECT %s FROM %s WHERE %s", what, sqltext.Postgres.QuoteName(ref.Table), p.where)
		rows, err := w.pool.Query(b.Context(), "EXPLAIN (COSTS OFF) "+q, p.args...)
		if err != nil {
			b.Fatal(err)
		}
		plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("plan of %s over %s..%s: %s", what, from, to, strings.Join(plan, " | "))
		// A partition's counts are planned with their values every time,
		// as the digest is: after five runs, a cached statement's generic
		// plan gives up the parallel scan of one partition.
		args := p.args
		if from == to {
			args = append([]any{pgx.QueryExecModeExec}, p.args...)
		}
		return func(ctx context.Context) (n int64, err error) {
			err = w.pool.QueryRow(ctx, q, args...).Scan(&n)
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
		DigestBefore: func(ctx context.Context) (int64, error) {
			d, err := w.DigestVersion(ctx, ref, part, 1)
			return d.Rows, err
		},
	})
}

// benchSource returns a DSN whose search_path is the schema holding the
// benchmark source with rows rows, generating it if it is not there yet.
// The table's comment, set last, marks it complete; a schema without it is
// dropped and made again.
//
// The data are those of the SQLite driver's source (see its benchSource),
// in native types: day is a date, the times are timestamptz.
func benchSource(b *testing.B, rows int) (string, error) {
	ctx := b.Context()
	schema := fmt.Sprintf("refill_bench_%d", rows)
	u, err := url.Parse(pgtest.DSN())
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	dsn := u.String()

	conn, err := pgx.Connect(ctx, pgtest.DSN())
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	marker := fmt.Sprintf("refill benchmark source, %d rows, v1", rows)
	var comment *string
	err = conn.QueryRow(ctx, "SELECT obj_description(to_regclass($1), 'pg_class')", schema+".events").Scan(&comment)
	if err != nil {
		return "", err
	}
	if comment != nil && *comment == marker {
		return dsn, nil
	}
	b.Logf("generating %d rows into schema %s", rows, schema)
	start := time.Now()
	id := pgx.Identifier{schema}.Sanitize()
	for _, stmt := range []string{
		"DROP SCHEMA IF EXISTS " + id + " CASCADE",
		"CREATE SCHEMA " + id,
		"SET search_path = " + id,
		`CREATE TABLE events (id bigint, day date, created_at timestamptz, updated_at timestamptz,
			c1 bigint, c2 text, c3 double precision, c4 text, c5 integer, c6 text, c7 numeric, c8 text, c9 bigint, c10 text)`,
		fmt.Sprintf(`INSERT INTO events
		SELECT i, d, ca,
			CASE WHEN h %% 13 = 0 THEN NULL WHEN h %% 991 = 0 THEN ca - interval '60 s' ELSE ca + (h %% 3600) * interval '1 s' END,
			CASE WHEN h %% 100 < 3 THEN NULL ELSE h %% 100000 END,
			CASE WHEN h %% 97 < 5 THEN NULL ELSE 'customer-' || (h %% 5000) END,
			CASE WHEN h %% 89 < 2 THEN NULL ELSE (h %% 100000) / 100.0 END,
			CASE WHEN h %% 83 < 20 THEN NULL ELSE 'sku-' || (h %% 777) END,
			CASE WHEN h %% 79 < 1 THEN NULL ELSE h %% 7 END,
			CASE WHEN h %% 73 < 7 THEN NULL ELSE 'eu-west-' || (h %% 3) END,
			CASE WHEN h %% 71 < 9 THEN NULL ELSE (h %% 1000) * 1.5 END,
			CASE WHEN h %% 67 < 4 THEN NULL ELSE to_hex(h) END,
			CASE WHEN h %% 61 < 30 THEN NULL ELSE h END,
			CASE WHEN h %% 59 < 2 THEN NULL ELSE 'status-' || (h %% 4) END
		FROM (SELECT i, h, d,
				CASE WHEN h %% 997 = 0 THEN timestamptz '2027-01-01 00:00:00+00' ELSE d + (i %% 86400) * interval '1 s' END AS ca
			FROM (SELECT i, (i * 2654435761) %% 4294967296 AS h, date '2026-10-01' + (i * 30 / %[1]d)::int AS d
				FROM generate_series(0::bigint, %[1]d - 1) i) g) g2`, rows),
		"CREATE INDEX events_day ON events (day)",
		"VACUUM ANALYZE events",
		fmt.Sprintf("COMMENT ON TABLE events IS '%s'", marker),
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return "", fmt.Errorf("generate %s: %w", schema, err)
		}
	}
	b.Logf("generated in %v", time.Since(start).Round(time.Second))
	return dsn, nil
}

// BenchmarkDrift measures the gate with 10 not_null columns, unique on id
// and drift on three columns against the analyst's SQL and one query per
// check (warehousetest.RunDriftBench), on the same cached source:
//
//	go test ./warehouse/postgres -run '^$' -bench Drift -benchtime 3x -rows 1000000
func BenchmarkDrift(b *testing.B) {
	rows := warehousetest.BenchRows(b)
	dsn, err := benchSource(b, rows)
	if err != nil {
		b.Fatal(err)
	}
	w, err := Open(b.Context(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	ref := refill.TableRef{Table: warehousetest.BenchTable, Column: warehousetest.BenchColumn, Grain: refill.GrainDay}
	cols, err := w.Columns(b.Context(), ref.Table)
	if err != nil {
		b.Fatal(err)
	}
	p, err := partitionPlanFor(ref, cols, warehousetest.BenchFrom, warehousetest.BenchTo)
	if err != nil {
		b.Fatal(err)
	}
	warehousetest.RunDriftBench(b, w, warehousetest.BenchSQL{
		Where: p.where,
		Sums: func(ctx context.Context, q string) (int64, []float64, error) {
			rows, err := w.pool.Query(ctx, q, p.args...)
			if err != nil {
				return 0, nil, err
			}
			defer rows.Close()
			var sums []float64
			var n int64
			for rows.Next() {
				vals, err := rows.Values()
				if err != nil {
					return 0, nil, err
				}
				if sums == nil {
					sums = make([]float64, len(vals)-1)
				}
				n++
				for i, v := range vals[1:] {
					switch v := v.(type) {
					case int64:
						sums[i] += float64(v)
					case int32:
						sums[i] += float64(v)
					case float64:
						sums[i] += v
					case nil:
					default:
						return 0, nil, fmt.Errorf("column %d is %T", i+1, v)
					}
				}
			}
			if sums == nil {
				sums = make([]float64, len(rows.FieldDescriptions())-1)
			}
			return n, sums, rows.Err()
		},
	})
}

// BenchmarkDiff: the content diff's compare step against the partition's
// checksum (warehousetest.RunDiffBench), on a schema of its own.
func BenchmarkDiff(b *testing.B) {
	w, err := Open(b.Context(), pgtest.Schema(b))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	warehousetest.RunDiffBench(b, w, func(ctx context.Context, sql string) error {
		_, err := w.pool.Exec(ctx, sql)
		return err
	})
}
