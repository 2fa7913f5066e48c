// Package whtest gives tests a fresh, real warehouse of every driver: a
// SQLite file in the test's temp dir and a PostgreSQL schema of its own,
// with a raw handle for fixtures. Packages above the warehouse layer run
// their behaviour on both with it.
package whtest

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the raw PostgreSQL handle
	_ "modernc.org/sqlite"             // the raw SQLite handle

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/dsn"
	"github.com/refill-dev/refill/internal/pgtest"
	"github.com/refill-dev/refill/warehouse"
)

// Warehouse is a fresh warehouse and a raw handle on the same database.
type Warehouse struct {
	Driver string
	DSN    string
	DB     *sql.DB
	WH     refill.Warehouse
}

// Exec runs fixture statements, failing the test on the first error.
func (w *Warehouse) Exec(t testing.TB, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := w.DB.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// Drivers are the warehouse drivers every behaviour runs on.
var Drivers = []string{"sqlite", "postgres"}

// Open makes a fresh warehouse of driver, closed and removed at cleanup.
func Open(t testing.TB, driver string) *Warehouse {
	t.Helper()
	w := &Warehouse{Driver: driver}
	var err error
	switch driver {
	case "sqlite":
		path := filepath.Join(t.TempDir(), "wh.db")
		w.DSN = "sqlite:" + path
		w.DB, err = sql.Open("sqlite", "file:"+path+"?"+dsn.SQLiteWAL)
	case "postgres":
		w.DSN = pgtest.Schema(t)
		w.DB, err = sql.Open("pgx", w.DSN)
	case "duckdb":
		// One process opens a DuckDB file once: fixtures go through the
		// warehouse's own handle, which the opener below shares.
		path := filepath.Join(t.TempDir(), "wh.duckdb")
		w.DSN = "duckdb:" + path
		raw, err := warehouse.OpenDuckDB(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { raw.Close() })
		w.DB = raw.(interface{ DB() *sql.DB }).DB()
	default:
		t.Fatalf("unknown driver %q", driver)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := w.DB.Ping(); err != nil {
		t.Fatal(err)
	}
	if driver != "duckdb" {
		t.Cleanup(func() { w.DB.Close() })
	}
	// The warehouse opens lazily: sqlite's file exists once the raw
	// handle has pinged it.
	w.WH, err = warehouse.Open(context.Background(), w.DSN, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.WH.Close() })
	return w
}

// Each runs fn as a parallel subtest on a fresh warehouse of every driver.
// Fixtures run before the warehouse is handed over.
func Each(t *testing.T, fn func(t *testing.T, w *Warehouse)) {
	t.Helper()
	for _, d := range Drivers {
		t.Run(d, func(t *testing.T) {
			t.Parallel()
			fn(t, Open(t, d))
		})
	}
}

// Pick returns the statement for w's driver: sqlite's, or postgres's on
// PostgreSQL and on DuckDB, whose SQL is PostgreSQL's.
func (w *Warehouse) Pick(sqlite, postgres string) string {
	if w.Driver == "postgres" || w.Driver == "duckdb" {
		return postgres
	}
	return sqlite
}
