// Package pgtest gives each test its own PostgreSQL schema on the machine's
// server, so that tests against a real database can run in parallel and
// leave nothing behind.
//
// PostgreSQL is required, not optional: when the server cannot be reached
// the test fails with a message saying how to point it at one, because a
// skipped test would let CI pass without ever running the Postgres drivers.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvDSN names the environment variable that overrides DefaultDSN.
const EnvDSN = "REFILL_TEST_POSTGRES"

// DefaultDSN is the server the tests use unless EnvDSN says otherwise: the
// local server with trust authentication that the development machines and
// CI run.
const DefaultDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// DSN returns the base DSN of the test server.
func DSN() string {
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		return dsn
	}
	return DefaultDSN
}

// Schema creates a new, empty schema for the test and returns a DSN whose
// search_path is that schema alone, so unqualified names the code under test
// creates and reads land there. The schema is dropped, with everything in
// it, when the test ends. The DSN must be a postgres:// URL.
func Schema(t testing.TB) (dsn string) {
	t.Helper()
	base := DSN()
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("pgtest: %s must be a postgres:// URL", EnvDSN)
	}

	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	schema := "refill_test_" + hex.EncodeToString(b[:])

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("pgtest: PostgreSQL is required for this test and is not reachable at %s: %v\n"+
			"Start the server or set %s to a reachable postgres:// URL.", u.Redacted(), err, EnvDSN)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create schema %s: %v", schema, err)
	}
	t.Cleanup(func() { drop(t, base, schema) })

	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// drop removes a test's schema. It connects afresh because the test's own
// context is done by the time cleanups run.
func drop(t testing.TB, base, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Errorf("pgtest: drop schema %s: %v", schema, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil && !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("pgtest: drop schema %s: %v", schema, err)
	}
}
