// Package warehouse opens the warehouse a configuration names. It is the one
// place that maps a DSN's scheme to a driver, so the rest of refill sees
// only refill.Warehouse.
package warehouse

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/refill-dev/refill"
	dsnpkg "github.com/refill-dev/refill/dsn"
	"github.com/refill-dev/refill/warehouse/postgres"
	"github.com/refill-dev/refill/warehouse/sqlite"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// Open opens and pings the warehouse at dsn:
//
//   - sqlite:PATH, with PATH relative to baseDir (the config file's
//     directory) unless absolute. The file must exist: a warehouse holds the
//     user's data, so a mistyped path must fail rather than quietly create an
//     empty database whose tables are all missing.
//   - duckdb:PATH, resolved and required to exist as sqlite:PATH is, in a
//     refill built with the build tag duckdb;
//   - postgres://... or postgresql://...
//
// A DSN that is wrong (unknown scheme, missing file, unparsable URL) is an
// error wrapping refill.ErrBadInput; a server that cannot be reached is a
// plain error, since the fix lies in the environment. Errors name the host,
// port and database but never the password.
func Open(ctx context.Context, dsn, baseDir string) (refill.Warehouse, error) {
	switch scheme, _, _ := strings.Cut(dsn, ":"); scheme {
	case "sqlite":
		path, _ := dsnpkg.SQLitePath(dsn, baseDir)
		info, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, refill.BadInputf("warehouse %s: %s does not exist (a sqlite: path is relative to the config file's directory)", dsn, path)
		case err != nil:
			return nil, fmt.Errorf("warehouse %s: %w", dsn, err)
		case info.IsDir():
			return nil, refill.BadInputf("warehouse %s: %s is a directory, not a SQLite file", dsn, path)
		}
		w, err := sqlite.Open(path)
		if err != nil {
			return nil, fmt.Errorf("warehouse %s: %w", dsn, err)
		}
		return w, nil
	case "duckdb":
		path, _ := dsnpkg.DuckDBPath(dsn, baseDir)
		if OpenDuckDB == nil {
			return nil, refill.BadInputf("warehouse %s: this refill was built without DuckDB; build it with -tags duckdb (go build -tags duckdb ./cmd/refill)", dsn)
		}
		info, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, refill.BadInputf("warehouse %s: %s does not exist (a duckdb: path is relative to the config file's directory)", dsn, path)
		case err != nil:
			return nil, fmt.Errorf("warehouse %s: %w", dsn, err)
		case info.IsDir():
			return nil, refill.BadInputf("warehouse %s: %s is a directory, not a DuckDB file", dsn, path)
		}
		w, err := OpenDuckDB(path)
		if err != nil {
			return nil, fmt.Errorf("warehouse %s: %w", dsn, err)
		}
		return w, nil
	case "postgres", "postgresql":
		if !strings.HasPrefix(dsn, scheme+"://") {
			break
		}
		w, err := postgres.Open(ctx, dsn)
		if err != nil {
			return nil, fmt.Errorf("warehouse: %w", err)
		}
		return w, nil
	}
	return nil, refill.BadInputf("warehouse %q: want sqlite:PATH, duckdb:PATH or postgres://USER@HOST:PORT/DATABASE", dsnpkg.Redact(dsn))
}

// OpenDuckDB opens a DuckDB warehouse file; nil in a refill built without
// the build tag duckdb (the driver needs cgo and a 70 MB library).
var OpenDuckDB func(path string) (refill.Warehouse, error)

// Dialect returns the SQL dialect of w's engine (sqltext.Of its Driver).
func Dialect(w refill.Warehouse) sqltext.Dialect { return sqltext.Of(w.Driver()) }
