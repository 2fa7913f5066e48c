package warehouse_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/internal/pgtest"
	"github.com/refill-dev/refill/warehouse"
	"github.com/refill-dev/refill/warehouse/sqlite"
)

func TestOpenSQLiteRelative(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	created, err := sqlite.Open(filepath.Join(dir, "data", "wh.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := created.DB().Exec("CREATE TABLE orders (id INTEGER)"); err != nil {
		t.Fatal(err)
	}
	created.Close()

	w, err := warehouse.Open(t.Context(), "sqlite:data/wh.db", dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Driver() != "sqlite" {
		t.Errorf("Driver() = %q, want sqlite", w.Driver())
	}
	if _, err := w.Columns(t.Context(), "orders"); err != nil {
		t.Errorf("the relative path did not reach the file made above: %v", err)
	}
}

func TestOpenSQLiteMissing(t *testing.T) {
	dir := t.TempDir()
	_, err := warehouse.Open(t.Context(), "sqlite:missing.db", dir)
	want := filepath.Join(dir, "missing.db")
	if !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), want) {
		t.Errorf("error = %v, want bad input naming %s", err, want)
	}
	if _, err := os.Stat(want); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open created %s: %v", want, err)
	}
}

func TestOpenUnknownScheme(t *testing.T) {
	for _, dsn := range []string{"mysql://root@db/wh", "warehouse.db", "postgres:db", ""} {
		if _, err := warehouse.Open(t.Context(), dsn, t.TempDir()); !errors.Is(err, refill.ErrBadInput) {
			t.Errorf("Open(%q): error = %v, want bad input", dsn, err)
		}
	}
}

func TestOpenPostgres(t *testing.T) {
	w, err := warehouse.Open(t.Context(), pgtest.Schema(t), "")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Driver() != "postgres" {
		t.Errorf("Driver() = %q, want postgres", w.Driver())
	}
}

func TestOpenPostgresUnreachable(t *testing.T) {
	_, err := warehouse.Open(t.Context(), "postgres://ann:hunter2@127.0.0.1:1/sales?connect_timeout=5", "")
	if err == nil {
		t.Fatal("Open of a closed port succeeded")
	}
	msg := err.Error()
	if !strings.Contains(msg, "127.0.0.1:1") || !strings.Contains(msg, "sales") {
		t.Errorf("error %q should name the host:port and database", msg)
	}
	if strings.Contains(msg, "hunter2") {
		t.Errorf("error %q leaks the password", msg)
	}
	if errors.Is(err, refill.ErrBadInput) || refill.ExitCode(err) != refill.ExitInternal {
		t.Errorf("an unreachable server is an environment error (exit 1), got exit %d: %v", refill.ExitCode(err), err)
	}
}

// TestSealedWarehouse: a plan seals its warehouse without the password,
// so a changed password is the same warehouse and a changed host is not.
func TestSealedWarehouse(t *testing.T) {
	for dsn, want := range map[string]string{
		"sqlite:wh.db":                         "sqlite:wh.db",
		"postgres://ann:hunter2@db:5432/sales": "postgres://ann:xxxxx@db:5432/sales",
	} {
		if got := warehouse.Sealed(dsn); got != want {
			t.Errorf("Sealed(%q) = %q, want %q", dsn, got, want)
		}
	}
	if warehouse.Sealed("postgres://ann:pw@db/wh") != warehouse.Sealed("postgres://ann:other@db/wh") {
		t.Error("a changed password is another warehouse")
	}
	if warehouse.Sealed("postgres://ann:pw@db/wh") == warehouse.Sealed("postgres://ann:pw@db2/wh") {
		t.Error("another host is the same warehouse")
	}
}

func TestSQLitePath(t *testing.T) {
	for dsn, want := range map[string]string{
		"sqlite:wh.db":            "/cfg/wh.db",
		"sqlite:../data/wh.db":    "/data/wh.db",
		"sqlite:/var/wh.db":       "/var/wh.db",
		"sqlite:///var/wh.db":     "/var/wh.db",
		"sqlite:.refill/state.db": "/cfg/.refill/state.db",
	} {
		if got, ok := warehouse.SQLitePath(dsn, "/cfg"); got != want || !ok {
			t.Errorf("SQLitePath(%q) = %q, %v; want %q, true", dsn, got, ok, want)
		}
	}
	for _, dsn := range []string{
		"postgres://ann@db:5432/wh",
		"postgresql://ann@db/wh?sslmode=disable",
		"host=db dbname=wh",
		"",
		"SQLITE:wh.db",
	} {
		if got, ok := warehouse.SQLitePath(dsn, "/cfg"); ok || got != "" {
			t.Errorf("SQLitePath(%q) = %q, %v; want \"\", false: not SQLite", dsn, got, ok)
		}
	}
}
