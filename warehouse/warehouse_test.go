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
