// Package warehousetest is the conformance suite every refill.Warehouse
// driver runs: one set of expectations, every driver, so that the planner and
// the gate can rely on the interface alone and a new driver is done when the
// suite passes.
//
// Fixtures are written once in SQL both SQLite and PostgreSQL accept. Where a
// dialect needs a test of its own (a Postgres cast, a SQLite quoting form),
// that test lives with the driver, not here.
package warehousetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
)

// Harness is one fresh, empty warehouse for one test, and a way to load
// fixtures into it behind the interface's back.
type Harness struct {
	Warehouse refill.Warehouse
	// Exec runs one fixture statement and fails the test if it errors.
	Exec func(t *testing.T, sql string)
}

// Exercise runs the suite. newHarness is called once per subtest, from that
// subtest, and must return an empty warehouse of its own (a new SQLite file,
// a new Postgres schema) that it cleans up with t.Cleanup: the subtests run
// in parallel.
func Exercise(t *testing.T, newHarness func(t *testing.T) *Harness) {
	setup := func(t *testing.T) (*Harness, context.Context) {
		t.Parallel()
		return newHarness(t), t.Context()
	}

	t.Run("Driver", func(t *testing.T) {
		h, ctx := setup(t)
		if h.Warehouse.Driver() == "" {
			t.Error("Driver() is empty")
		}
		if err := h.Warehouse.Ping(ctx); err != nil {
			t.Errorf("Ping: %v", err)
		}
	})

	t.Run("Columns", func(t *testing.T) {
		h, ctx := setup(t)
		h.Exec(t, "CREATE TABLE orders (id INTEGER, order_date DATE, customer TEXT, amount NUMERIC)")
		got, err := h.Warehouse.Columns(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		want := []refill.Column{{Name: "id", Type: "integer"}, {Name: "order_date", Type: "date"}, {Name: "customer", Type: "text"}, {Name: "amount", Type: "numeric"}}
		if h.Warehouse.Driver() == "duckdb" {
			// DuckDB keeps no declared type name: TEXT is VARCHAR, and
			// NUMERIC its default DECIMAL.
			want[2].Type, want[3].Type = "varchar", "decimal(18,3)"
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Columns = %v, want %v", got, want)
		}
	})

	t.Run("ColumnsMissingTable", func(t *testing.T) {
		h, ctx := setup(t)
		_, err := h.Warehouse.Columns(ctx, "no_such_table")
		if !errors.Is(err, refill.ErrNoTable) || !strings.Contains(err.Error(), "no_such_table") {
			t.Errorf("Columns of a missing table: error = %v, want ErrNoTable naming the table", err)
		}
	})

	t.Run("PartitionCountsDay", func(t *testing.T) {
		// A date column and a text column holding keys behave the same.
		for _, typ := range []string{"DATE", "TEXT"} {
			t.Run(typ, func(t *testing.T) {
				h, ctx := setup(t)
				h.Exec(t, "CREATE TABLE daily (id INTEGER, day "+typ+")")
				h.Exec(t, `INSERT INTO daily (id, day) VALUES
					(1, '2026-10-31'), (2, '2026-10-31'),
					(3, '2026-11-01'), (4, '2026-11-01'), (5, '2026-11-01'),
					(6, '2026-11-03'),
					(7, '2026-11-04'), (8, NULL)`)
				ref := refill.TableRef{Table: "daily", Column: "day", Grain: refill.GrainDay}
				wantCounts(t, h, ctx, ref, "2026-11-01", "2026-11-03", map[string]int64{"2026-11-01": 3, "2026-11-03": 1})
				wantCounts(t, h, ctx, ref, "2026-11-04", "2026-11-04", map[string]int64{"2026-11-04": 1})
				wantCounts(t, h, ctx, ref, "2025-01-01", "2025-12-31", map[string]int64{})
			})
		}
	})

	t.Run("PartitionCountsTimestamp", func(t *testing.T) {
		h, ctx := setup(t)
		h.Exec(t, "CREATE TABLE clicks (id INTEGER, ts TIMESTAMP)")
		h.Exec(t, `INSERT INTO clicks (id, ts) VALUES
			(1, '2026-11-02 12:59:59'),
			(2, '2026-11-02 13:00:00'), (3, '2026-11-02 13:45:00'),
			(4, '2026-11-02 15:30:00'),
			(5, '2026-11-02 16:00:00'),
			(6, '2026-11-03 13:10:00')`)
		hour := refill.TableRef{Table: "clicks", Column: "ts", Grain: refill.GrainHour}
		wantCounts(t, h, ctx, hour, "2026-11-02T13", "2026-11-02T15", map[string]int64{"2026-11-02T13": 2, "2026-11-02T15": 1})
		day := refill.TableRef{Table: "clicks", Column: "ts", Grain: refill.GrainDay}
		wantCounts(t, h, ctx, day, "2026-11-02", "2026-11-02", map[string]int64{"2026-11-02": 5})
	})

	t.Run("PartitionCountsTimestampUTC", func(t *testing.T) {
		// Partitions are UTC: a time with an offset counts in the UTC hour
		// and day it falls in, even across midnight.
		h, ctx := setup(t)
		h.Exec(t, "CREATE TABLE logins (id INTEGER, seen_at TIMESTAMP WITH TIME ZONE)")
		h.Exec(t, `INSERT INTO logins (id, seen_at) VALUES
			(1, '2026-11-02 23:30:00+00:00'),
			(2, '2026-11-03 01:30:00+02:00'),
			(3, '2026-11-03 00:30:00+00:00'),
			(4, '2026-11-02 00:30:00+01:00')`)
		hour := refill.TableRef{Table: "logins", Column: "seen_at", Grain: refill.GrainHour}
		wantCounts(t, h, ctx, hour, "2026-11-02T23", "2026-11-02T23", map[string]int64{"2026-11-02T23": 2})
		day := refill.TableRef{Table: "logins", Column: "seen_at", Grain: refill.GrainDay}
		wantCounts(t, h, ctx, day, "2026-11-02", "2026-11-02", map[string]int64{"2026-11-02": 2})
		wantCounts(t, h, ctx, day, "2026-11-01", "2026-11-03", map[string]int64{"2026-11-01": 1, "2026-11-02": 2, "2026-11-03": 1})
	})

	t.Run("PartitionCountsHourKeys", func(t *testing.T) {
		h, ctx := setup(t)
		h.Exec(t, "CREATE TABLE hourly (id INTEGER, hour TEXT)")
		h.Exec(t, `INSERT INTO hourly (id, hour) VALUES
			(1, '2026-11-02T12'), (2, '2026-11-02T13'), (3, '2026-11-02T13'),
			(4, '2026-11-02T15'), (5, '2026-11-02T16')`)
		ref := refill.TableRef{Table: "hourly", Column: "hour", Grain: refill.GrainHour}
		wantCounts(t, h, ctx, ref, "2026-11-02T13", "2026-11-02T15", map[string]int64{"2026-11-02T13": 2, "2026-11-02T15": 1})
	})

	t.Run("PartitionCountsErrors", func(t *testing.T) {
		h, ctx := setup(t)
		h.Exec(t, "CREATE TABLE daily (id INTEGER, day DATE)")
		w := h.Warehouse
		_, err := w.PartitionCounts(ctx, refill.TableRef{Table: "no_such_table", Column: "day", Grain: refill.GrainDay}, "2026-11-01", "2026-11-02")
		if !errors.Is(err, refill.ErrNoTable) {
			t.Errorf("missing table: error = %v, want ErrNoTable", err)
		}
		_, err = w.PartitionCounts(ctx, refill.TableRef{Table: "daily", Column: "no_such_column", Grain: refill.GrainDay}, "2026-11-01", "2026-11-02")
		if !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), "no_such_column") {
			t.Errorf("missing column: error = %v, want bad input naming the column", err)
		}
		_, err = w.PartitionCounts(ctx, refill.TableRef{Table: "daily", Column: "day", Grain: refill.GrainHour}, "2026-11-01T00", "2026-11-01T23")
		if !errors.Is(err, refill.ErrBadInput) {
			t.Errorf("hour grain on a date column: error = %v, want bad input", err)
		}
		_, err = w.PartitionCounts(ctx, refill.TableRef{Table: "daily", Column: "day", Grain: refill.GrainDay}, "2026-11-01T00", "2026-13-01")
		if !errors.Is(err, refill.ErrBadInput) {
			t.Errorf("malformed bounds: error = %v, want bad input", err)
		}
	})

	t.Run("QueryCounts", func(t *testing.T) {
		h, ctx := setup(t)
		loadOrders(t, h)
		// A query job that aggregates: it yields one row per customer, not
		// one per order, and nothing at all for 2026-11-02.
		query := `SELECT customer, count(*) AS orders, sum(amount) AS amount
			FROM orders WHERE order_date = :partition GROUP BY customer`
		parts := refill.Range{From: day("2026-10-30"), To: day("2026-11-05")}.Partitions(refill.GrainDay)
		got, err := h.Warehouse.QueryCounts(ctx, query, parts)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int64{"2026-10-30": 0, "2026-10-31": 1, "2026-11-01": 2, "2026-11-02": 0, "2026-11-03": 1, "2026-11-04": 0, "2026-11-05": 0}
		if !maps.Equal(got, want) {
			t.Errorf("QueryCounts = %v, want %v", got, want)
		}

		// What refill would write is what the query counted: materialise the
		// rows the job would produce and count them with PartitionCounts.
		h.Exec(t, "CREATE TABLE orders_by_customer (day DATE, customer TEXT, orders INTEGER, amount NUMERIC)")
		for _, p := range parts {
			h.Exec(t, fmt.Sprintf(`INSERT INTO orders_by_customer (day, customer, orders, amount)
				SELECT '%[1]s', customer, count(*), sum(amount) FROM orders WHERE order_date = '%[1]s' GROUP BY customer`, p))
		}
		written, err := h.Warehouse.PartitionCounts(ctx, refill.TableRef{Table: "orders_by_customer", Column: "day", Grain: refill.GrainDay}, parts[0], parts[len(parts)-1])
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range parts {
			if got[p] != written[p] {
				t.Errorf("partition %s: QueryCounts says %d rows, the job writes %d", p, got[p], written[p])
			}
		}
	})

	t.Run("QueryCountsText", func(t *testing.T) {
		// :partition twice, :partition inside a string literal and a
		// comment (not parameters), a trailing semicolon and comment.
		h, ctx := setup(t)
		loadOrders(t, h)
		query := `SELECT id FROM orders
			WHERE order_date >= :partition AND order_date <= :partition
			  AND customer <> ':partition' /* :partition */;  -- one day`
		got, err := h.Warehouse.QueryCounts(ctx, query, []string{"2026-11-01", "2026-11-02", "2026-11-01"})
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]int64{"2026-11-01": 3, "2026-11-02": 0}; !maps.Equal(got, want) {
			t.Errorf("QueryCounts = %v, want %v", got, want)
		}

		got, err = h.Warehouse.QueryCounts(ctx, "SELECT * FROM orders", []string{"2026-11-01", "2026-11-02"})
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]int64{"2026-11-01": 6, "2026-11-02": 6}; !maps.Equal(got, want) {
			t.Errorf("QueryCounts of a query without :partition = %v, want %v", got, want)
		}

		got, err = h.Warehouse.QueryCounts(ctx, query, nil)
		if err != nil || len(got) != 0 {
			t.Errorf("QueryCounts of no partitions = %v, %v; want an empty map", got, err)
		}
	})

	t.Run("QueryCountsManyPartitions", func(t *testing.T) {
		// More partitions than one statement takes: every one is answered.
		h, ctx := setup(t)
		loadOrders(t, h)
		parts := refill.Range{From: day("2026-01-01"), To: day("2026-12-31")}.Partitions(refill.GrainDay)
		got, err := h.Warehouse.QueryCounts(ctx, "SELECT id FROM orders WHERE order_date = :partition", parts)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(parts) {
			t.Fatalf("QueryCounts answered %d of %d partitions", len(got), len(parts))
		}
		var total int64
		for _, n := range got {
			total += n
		}
		if total != 6 || got["2026-11-01"] != 3 || got["2026-12-31"] != 0 {
			t.Errorf("QueryCounts over a year: total %d, 2026-11-01 %d, 2026-12-31 %d; want 6, 3, 0", total, got["2026-11-01"], got["2026-12-31"])
		}
	})

	t.Run("QueryCountsNeverWrites", func(t *testing.T) {
		h, ctx := setup(t)
		loadOrders(t, h)
		parts := []string{"2026-10-31", "2026-11-01", "2026-11-03"}
		for _, query := range []string{
			"DELETE FROM orders WHERE order_date = :partition",
			"UPDATE orders SET amount = 0 WHERE order_date = :partition RETURNING id",
			"SELECT 1; DELETE FROM orders",
			"SELECT id FROM orders WHERE order_date = :partition; UPDATE orders SET amount = 0",
			// Closes the wrapper's parenthesis to smuggle a second statement.
			"SELECT 1) q; DELETE FROM orders; SELECT * FROM (SELECT 1",
			"WITH gone AS (DELETE FROM orders RETURNING id) SELECT * FROM gone",
			"INSERT INTO orders (id, order_date, customer, amount) VALUES (99, :partition, 'x', 1)",
			"DROP TABLE orders",
		} {
			_, err := h.Warehouse.QueryCounts(ctx, query, parts)
			if !errors.Is(err, refill.ErrBadInput) {
				t.Errorf("QueryCounts(%q): error = %v, want bad input", query, err)
			}
		}
		// Nothing was deleted, inserted or updated.
		wantCounts(t, h, ctx, refill.TableRef{Table: "orders", Column: "order_date", Grain: refill.GrainDay}, "2026-01-01", "2026-12-31",
			map[string]int64{"2026-10-31": 2, "2026-11-01": 3, "2026-11-03": 1})
		zeroed, err := h.Warehouse.QueryCounts(ctx, "SELECT id FROM orders WHERE amount = 0 AND order_date = :partition", parts)
		if err != nil {
			t.Fatal(err)
		}
		for p, n := range zeroed {
			if n != 0 {
				t.Errorf("partition %s: %d orders were updated by a count", p, n)
			}
		}
	})

	t.Run("QueryCountsBadQuery", func(t *testing.T) {
		h, ctx := setup(t)
		loadOrders(t, h)
		parts := []string{"2026-11-01", "2026-11-02"}
		for query, mention := range map[string]string{
			"SELECT no_such_column FROM orders WHERE order_date = :partition": "no_such_column",
			"SELECT * FROM no_such_table WHERE day = :partition":              "no_such_table",
			"SELEKT * FROM orders":                                "syntax",
			"SELECT * FROM orders WHERE customer = 'unterminated": "unterminated",
		} {
			_, err := h.Warehouse.QueryCounts(ctx, query, parts)
			if !errors.Is(err, refill.ErrBadInput) {
				t.Errorf("QueryCounts(%q): error = %v, want bad input", query, err)
				continue
			}
			if !strings.Contains(err.Error(), mention) {
				t.Errorf("QueryCounts(%q): error %q does not mention %q", query, err, mention)
			}
		}
		_, err := h.Warehouse.QueryCounts(ctx, "SELECT no_such_column FROM orders WHERE order_date = :partition", parts)
		if err == nil || !strings.Contains(err.Error(), "2026-11-01") {
			t.Errorf("error %v does not name the first partition", err)
		}
	})

	t.Run("QuotedIdentifiers", func(t *testing.T) {
		// Reserved words are plain identifiers to the config loader; they
		// only work if the driver quotes them.
		h, ctx := setup(t)
		h.Exec(t, `CREATE TABLE "order" ("group" DATE, "select" INTEGER)`)
		h.Exec(t, `INSERT INTO "order" ("group", "select") VALUES ('2026-11-01', 1), ('2026-11-01', 2), ('2026-11-02', 3)`)
		cols, err := h.Warehouse.Columns(ctx, "order")
		if err != nil {
			t.Fatal(err)
		}
		if want := []refill.Column{{Name: "group", Type: "date"}, {Name: "select", Type: "integer"}}; fmt.Sprint(cols) != fmt.Sprint(want) {
			t.Errorf("Columns = %v, want %v", cols, want)
		}
		ref := refill.TableRef{Table: "order", Column: "group", Grain: refill.GrainDay}
		wantCounts(t, h, ctx, ref, "2026-11-01", "2026-11-02", map[string]int64{"2026-11-01": 2, "2026-11-02": 1})
		got, err := h.Warehouse.QueryCounts(ctx, `SELECT "select" FROM "order" WHERE "group" = :partition`, []string{"2026-11-01", "2026-11-02"})
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]int64{"2026-11-01": 2, "2026-11-02": 1}; !maps.Equal(got, want) {
			t.Errorf("QueryCounts = %v, want %v", got, want)
		}
	})

	exerciseProfile(t, setup)
	exerciseDigest(t, setup)
	exerciseRehearse(t, setup)
	exerciseDiff(t, setup)
	exerciseWrite(t, setup)
	exerciseSpoil(t, setup)
	exerciseGuard(t, setup)
	exerciseReach(t, setup)
	exerciseNames(t, setup)
}

// loadOrders creates the orders table: two orders on 2026-10-31, three by
// two customers on 2026-11-01, none on 2026-11-02 and one on 2026-11-03.
func loadOrders(t *testing.T, h *Harness) {
	t.Helper()
	h.Exec(t, "CREATE TABLE orders (id INTEGER, order_date DATE, customer TEXT, amount NUMERIC)")
	h.Exec(t, `INSERT INTO orders (id, order_date, customer, amount) VALUES
		(1, '2026-10-31', 'ada', 10), (2, '2026-10-31', 'ada', 20),
		(3, '2026-11-01', 'ada', 5), (4, '2026-11-01', 'bob', 7), (5, '2026-11-01', 'bob', 8),
		(6, '2026-11-03', 'cyd', 1)`)
}

// wantCounts checks PartitionCounts of [from, to] against want.
func wantCounts(t *testing.T, h *Harness, ctx context.Context, ref refill.TableRef, from, to string, want map[string]int64) {
	t.Helper()
	got, err := h.Warehouse.PartitionCounts(ctx, ref, from, to)
	if err != nil {
		t.Fatalf("PartitionCounts(%s.%s, %s, %s): %v", ref.Table, ref.Column, from, to, err)
	}
	if !maps.Equal(got, want) {
		t.Errorf("PartitionCounts(%s.%s %s, %s..%s) = %v, want %v", ref.Table, ref.Column, ref.Grain, from, to, got, want)
	}
}

func day(s string) time.Time {
	d, err := time.Parse("2006-01-02", s)
	if err != nil {
		panic(err)
	}
	return d
}
