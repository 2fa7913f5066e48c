package postgres_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/internal/pgtest"
	"github.com/refill-dev/refill/warehouse/postgres"
	"github.com/refill-dev/refill/warehouse/warehousetest"
)

// setup opens a warehouse on a new schema of the test server. The session
// time zone is not UTC (and not a whole hour off it), so that the suite's
// UTC bucketing tests fail if a driver renders keys in the session's zone.
func setup(t *testing.T) *warehousetest.Harness {
	t.Helper()
	w, err := postgres.Open(t.Context(), pgtest.Schema(t)+"&timezone=Asia/Kolkata")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return &warehousetest.Harness{
		Warehouse: w,
		Exec: func(t *testing.T, sql string) {
			t.Helper()
			if _, err := w.Pool().Exec(t.Context(), sql); err != nil {
				t.Fatalf("fixture %q: %v", sql, err)
			}
		},
	}
}

func TestConformance(t *testing.T) {
	warehousetest.Exercise(t, setup)
}

// A Postgres cast on the parameter must survive binding.
func TestQueryCountsCast(t *testing.T) {
	h := setup(t)
	h.Exec(t, "CREATE TABLE events (id integer, at timestamptz)")
	h.Exec(t, "INSERT INTO events VALUES (1, '2026-11-01 10:00Z'), (2, '2026-11-01 23:00Z'), (3, '2026-11-02 01:00Z')")
	got, err := h.Warehouse.QueryCounts(t.Context(),
		"SELECT id FROM events WHERE at >= :partition::timestamp AT TIME ZONE 'UTC' AND at < (:partition::date + 1)::timestamp AT TIME ZONE 'UTC'",
		[]string{"2026-11-01", "2026-11-02", "2026-11-03"})
	if err != nil {
		t.Fatal(err)
	}
	if got["2026-11-01"] != 2 || got["2026-11-02"] != 1 || got["2026-11-03"] != 0 {
		t.Errorf("QueryCounts = %v, want 2, 1, 0", got)
	}
}

// A SELECT can still write through a function; the read-only transaction
// stops it.
func TestQueryCountsReadOnly(t *testing.T) {
	h := setup(t)
	ctx := t.Context()
	h.Exec(t, "CREATE TABLE orders (id integer, day date)")
	h.Exec(t, "INSERT INTO orders VALUES (1, '2026-11-01')")
	h.Exec(t, "CREATE SEQUENCE ids")
	h.Exec(t, "CREATE FUNCTION wipe() RETURNS bigint LANGUAGE sql AS 'DELETE FROM orders RETURNING 1'")
	for _, query := range []string{
		"SELECT wipe() WHERE :partition::date IS NOT NULL",
		"SELECT nextval('ids') WHERE :partition::date IS NOT NULL",
		"SELECT * FROM orders WHERE day = :partition FOR UPDATE",
	} {
		_, err := h.Warehouse.QueryCounts(ctx, query, []string{"2026-11-01"})
		if !errors.Is(err, refill.ErrBadInput) {
			t.Errorf("QueryCounts(%q): error = %v, want bad input", query, err)
		}
	}
	got, err := h.Warehouse.QueryCounts(ctx, "SELECT id FROM orders WHERE day = :partition", []string{"2026-11-01"})
	if err != nil || got["2026-11-01"] != 1 {
		t.Errorf("orders after the attempts: %v, %v; want the row still there", got, err)
	}
	var last int64
	var called bool
	if err := h.Warehouse.(*postgres.Warehouse).Pool().QueryRow(ctx, "SELECT last_value, is_called FROM ids").Scan(&last, &called); err != nil {
		t.Fatal(err)
	}
	if called {
		t.Errorf("the sequence advanced to %d during a count", last)
	}
}

// A DSN asking for the simple protocol must not let a count run a second
// statement.
func TestQueryCountsSimpleProtocol(t *testing.T) {
	w, err := postgres.Open(t.Context(), pgtest.Schema(t)+"&default_query_exec_mode=simple_protocol")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx := t.Context()
	if _, err := w.Pool().Exec(ctx, "CREATE TABLE orders (id integer, day date); INSERT INTO orders VALUES (1, '2026-11-01')"); err != nil {
		t.Fatal(err)
	}
	got, err := w.QueryCounts(ctx, "SELECT id FROM orders WHERE day = :partition", []string{"2026-11-01", "2026-11-02"})
	if err != nil || got["2026-11-01"] != 1 || got["2026-11-02"] != 0 {
		t.Errorf("QueryCounts = %v, %v; want 1 and 0", got, err)
	}
}

func TestColumnsSchemaQualifiedAndTypes(t *testing.T) {
	h := setup(t)
	ctx := t.Context()
	w := h.Warehouse.(*postgres.Warehouse)
	var schema string
	if err := w.Pool().QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	h.Exec(t, "CREATE TABLE events (id bigint, at timestamptz, seen timestamp(3), name varchar(20))")
	cols, err := w.Columns(ctx, schema+".events")
	if err != nil {
		t.Fatal(err)
	}
	want := "[{id bigint} {at timestamp with time zone} {seen timestamp(3) without time zone} {name character varying(20)}]"
	if got := fmtCols(cols); got != want {
		t.Errorf("Columns = %s, want %s", got, want)
	}
	// The same name in another schema is another table.
	if _, err := w.Columns(ctx, "public.events"); !errors.Is(err, refill.ErrNoTable) {
		t.Errorf("Columns(public.events): error = %v, want ErrNoTable", err)
	}
}

func fmtCols(cols []refill.Column) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = "{" + c.Name + " " + c.Type + "}"
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func TestPartitionCountsUnsupportedType(t *testing.T) {
	h := setup(t)
	h.Exec(t, "CREATE TABLE events (id integer, day integer)")
	_, err := h.Warehouse.PartitionCounts(t.Context(), refill.TableRef{Table: "events", Column: "day", Grain: refill.GrainDay}, "2026-11-01", "2026-11-02")
	if !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), "integer") {
		t.Errorf("error = %v, want bad input naming the type", err)
	}
}

func TestOpenUnreachable(t *testing.T) {
	_, err := postgres.Open(t.Context(), "postgres://ann:hunter2@127.0.0.1:1/wh?connect_timeout=5")
	if err == nil {
		t.Fatal("Open of a closed port succeeded")
	}
	msg := err.Error()
	if strings.Contains(msg, "hunter2") || !strings.Contains(msg, "127.0.0.1:1") || !strings.Contains(msg, "wh") {
		t.Errorf("error %q should name 127.0.0.1:1 and wh and not the password", msg)
	}
	if errors.Is(err, refill.ErrBadInput) {
		t.Errorf("an unreachable server is not bad input: %v", err)
	}
}

func TestOpenBadDSN(t *testing.T) {
	_, err := postgres.Open(t.Context(), "postgres://ann:hunter2@127.0.0.1:notaport/wh")
	if !errors.Is(err, refill.ErrBadInput) || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error = %v, want bad input without the password", err)
	}
}
