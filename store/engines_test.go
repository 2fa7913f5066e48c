package store_test

import (
	"path/filepath"
	"testing"

	"github.com/refill-dev/refill/internal/pgtest"
	"github.com/refill-dev/refill/store"
)

// eachEngine runs fn as a parallel subtest on a fresh state store of each
// engine, SQLite and PostgreSQL.
func eachEngine(t *testing.T, fn func(t *testing.T, s *store.Store)) {
	t.Helper()
	t.Parallel()
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			dsn := "sqlite:" + filepath.Join(t.TempDir(), "state.db")
			if engine == "postgres" {
				dsn = pgtest.Schema(t)
			}
			s, err := store.Open(t.Context(), dsn, "")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			fn(t, s)
		})
	}
}
