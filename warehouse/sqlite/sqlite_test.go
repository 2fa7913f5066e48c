package sqlite_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqlite"
	"github.com/refill-dev/refill/warehouse/warehousetest"
)

// setup opens a new warehouse file in the test's temporary directory.
func setup(t *testing.T) *warehousetest.Harness {
	t.Helper()
	w, err := sqlite.Open(filepath.Join(t.TempDir(), "warehouse.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return &warehousetest.Harness{
		Warehouse: w,
		Exec: func(t *testing.T, sql string) {
			t.Helper()
			if _, err := w.DB().ExecContext(t.Context(), sql); err != nil {
				t.Fatalf("fixture %q: %v", sql, err)
			}
		},
	}
}

func TestConformance(t *testing.T) {
	warehousetest.Exercise(t, setup)
}

// SQLite reads [a'b] as a quoted name, so the semicolons between the two
// brackets are statement separators and COMMIT would end the rollback-only
// transaction: the one-statement check must lex brackets as SQLite does.
func TestQueryCountsBracketInjection(t *testing.T) {
	h := setup(t)
	ctx := t.Context()
	h.Exec(t, "CREATE TABLE orders (id INTEGER, order_date TEXT)")
	h.Exec(t, "INSERT INTO orders VALUES (1, '2026-11-01')")
	_, err := h.Warehouse.QueryCounts(ctx, "SELECT 1 AS [a'b]; COMMIT; DELETE FROM orders; SELECT 1 AS [c'd]", []string{"2026-11-01"})
	if !errors.Is(err, refill.ErrBadInput) {
		t.Errorf("error = %v, want bad input", err)
	}
	got, err := h.Warehouse.PartitionCounts(ctx, refill.TableRef{Table: "orders", Column: "order_date", Grain: refill.GrainDay}, "2026-11-01", "2026-11-01")
	if err != nil || got["2026-11-01"] != 1 {
		t.Errorf("orders after the attempt: %v, %v; want the one row still there", got, err)
	}
}

func TestColumnsSchemaQualified(t *testing.T) {
	h := setup(t)
	h.Exec(t, "CREATE TABLE orders (id INTEGER, Order_Date DATE)")
	cols, err := h.Warehouse.Columns(t.Context(), "main.orders")
	if err != nil || len(cols) != 2 || cols[1] != (refill.Column{Name: "Order_Date", Type: "date"}) {
		t.Errorf("Columns(main.orders) = %v, %v", cols, err)
	}
	if _, err := h.Warehouse.Columns(t.Context(), "main.missing"); !errors.Is(err, refill.ErrNoTable) {
		t.Errorf("Columns(main.missing): error = %v, want ErrNoTable", err)
	}
}

// An integer column cannot hold date text; counting it as text would find
// nothing and look like an empty table.
func TestPartitionCountsIntegerColumn(t *testing.T) {
	h := setup(t)
	h.Exec(t, "CREATE TABLE events (id INTEGER, day INTEGER)")
	_, err := h.Warehouse.PartitionCounts(t.Context(), refill.TableRef{Table: "events", Column: "day", Grain: refill.GrainDay}, "2026-11-01", "2026-11-02")
	if !errors.Is(err, refill.ErrBadInput) {
		t.Errorf("error = %v, want bad input", err)
	}
}

func TestOpenNotADatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(path, []byte("these are not the pages you are looking for, not at all, no"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.Open(path); !errors.Is(err, refill.ErrBadInput) {
		t.Errorf("Open of a text file: error = %v, want bad input", err)
	}
}
