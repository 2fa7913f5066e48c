//go:build duckdb

package duckdb_test

import (
	"path/filepath"
	"testing"

	"github.com/refill-dev/refill/warehouse/duckdb"
	"github.com/refill-dev/refill/warehouse/warehousetest"
)

// setup opens a new warehouse file in the test's temporary directory.
func setup(t *testing.T) *warehousetest.Harness {
	t.Helper()
	w, err := duckdb.Open(filepath.Join(t.TempDir(), "warehouse.duckdb"))
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
