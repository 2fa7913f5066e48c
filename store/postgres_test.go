package store_test

import (
	"strings"
	"testing"

	"github.com/refill-dev/refill/internal/pgtest"
	"github.com/refill-dev/refill/store"
	"github.com/refill-dev/refill/store/storetest"
)

func TestPostgres(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, func(t *testing.T) string { return pgtest.Schema(t) })
}

// TestPostgresUnreachable needs no server: nothing listens on port 1. The
// error must say where refill looked, and must not show the password.
func TestPostgresUnreachable(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{
		"postgres://refill:s3cret-pw@127.0.0.1:1/statedb?sslmode=disable&connect_timeout=5",
		"postgresql://127.0.0.1:1/statedb?sslmode=disable&password=s3cret-pw&user=refill",
	} {
		s, err := store.Open(t.Context(), dsn, "")
		if err == nil {
			s.Close()
			t.Fatalf("Open(%q) succeeded", dsn)
		}
		msg := err.Error()
		if !strings.Contains(msg, "127.0.0.1:1/statedb") {
			t.Errorf("error %q does not name host:port/db", msg)
		}
		if strings.Contains(msg, "s3cret-pw") {
			t.Errorf("error %q shows the password", msg)
		}
	}
}
