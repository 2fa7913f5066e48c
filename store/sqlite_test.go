package store_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
	"github.com/refill-dev/refill/store/storetest"
)

func TestSQLite(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, func(t *testing.T) string {
		return "sqlite:" + filepath.Join(t.TempDir(), "state.db")
	})
}

// TestSQLiteDefaultPath opens the default state: of refill.yaml, which is
// relative to the config's directory and lives in a directory that does not
// exist yet.
func TestSQLiteDefaultPath(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	s, err := store.Open(t.Context(), "sqlite:.refill/state.db", base)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	if want := filepath.Join(base, ".refill", "state.db"); s.SQLitePath() != want {
		t.Fatalf("SQLitePath = %q, want %q", s.SQLitePath(), want)
	}
	if _, err := os.Stat(filepath.Join(base, ".refill", "state.db")); err != nil {
		t.Fatalf("the database is not under the base directory: %v", err)
	}
	var mode string
	if err := s.DB().QueryRowContext(t.Context(), `PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
}

func TestOpenBadDSN(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{
		"",
		"sqlite:",
		"sqlite:state.db?cache=shared",
		"mysql://root:hunter2@localhost/refill",
		"postgres://postgres:hunter2@127.0.0.1:5432/test?sslmode=bogus",
	} {
		s, err := store.Open(t.Context(), dsn, t.TempDir())
		if err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", dsn)
			continue
		}
		if !errors.Is(err, refill.ErrBadInput) {
			t.Errorf("Open(%q): got %v, want an error wrapping ErrBadInput", dsn, err)
		}
		if containsFold(err.Error(), "hunter2") {
			t.Errorf("Open(%q): error %q shows the password", dsn, err)
		}
	}
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}
