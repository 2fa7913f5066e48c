package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// migrationFiles holds the schema of every dialect, one directory each. The
// binary carries its own schema so that a state store is ready the moment it
// is opened, with nothing to install (docs/design.md §8).
//
//go:embed migrations
var migrationFiles embed.FS

// migration is one versioned step of a dialect's schema, read from a file
// named VERSION_NAME.sql. Versions never change meaning once released: a new
// schema change is a new file, in every dialect, with the same version.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the dialect's migrations in version order.
func (d dialect) migrations() ([]migration, error) {
	dir := path.Join("migrations", d.name)
	entries, err := fs.ReadDir(migrationFiles, dir)
	if err != nil {
		return nil, fmt.Errorf("migrations for %s: %w", d.name, err)
	}
	var out []migration
	for _, e := range entries {
		file := e.Name()
		if e.IsDir() || !strings.HasSuffix(file, ".sql") {
			continue
		}
		num, name, ok := strings.Cut(strings.TrimSuffix(file, ".sql"), "_")
		version, err := strconv.Atoi(num)
		if !ok || err != nil || version <= 0 || name == "" {
			return nil, fmt.Errorf("migration %s/%s: want a name like 0001_plans.sql", dir, file)
		}
		body, err := fs.ReadFile(migrationFiles, path.Join(dir, file))
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: version, name: name, sql: string(body)})
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			return nil, fmt.Errorf("migrations for %s: version %d appears twice", d.name, out[i].version)
		}
	}
	return out, nil
}

// migrate brings the database's schema up to the newest migration in one
// transaction, so a failed migration leaves the schema as it was rather than
// half changed. Applied versions are recorded in refill_migrations, which
// makes opening an up-to-date store a read and nothing more.
func migrate(ctx context.Context, db *sql.DB, d dialect) error {
	all, err := d.migrations()
	if err != nil {
		return err
	}
	if len(all) == 0 {
		return fmt.Errorf("migrate: no migrations embedded for %s", d.name)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if d.lockMigrations != "" {
		if _, err := tx.ExecContext(ctx, d.lockMigrations); err != nil {
			return fmt.Errorf("migrate: lock: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, d.createMigrations); err != nil {
		return fmt.Errorf("migrate: create refill_migrations: %w", err)
	}
	applied := map[int]bool{}
	rows, err := tx.QueryContext(ctx, `SELECT version FROM refill_migrations`)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	newest := 0
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return fmt.Errorf("migrate: %w", err)
		}
		applied[v] = true
		newest = max(newest, v)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	// A database migrated by a newer refill may hold tables this one would
	// misread; refusing is better than writing state the newer one cannot
	// trust.
	if known := all[len(all)-1].version; newest > known {
		return fmt.Errorf("the state store's schema is at version %d, newer than this refill knows (%d): upgrade refill", newest, known)
	}
	for _, m := range all {
		if applied[m.version] {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("migrate: %04d_%s: %w", m.version, m.name, err)
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO refill_migrations (version, name) VALUES (?, ?)`), m.version, m.name); err != nil {
			return fmt.Errorf("migrate: record %04d_%s: %w", m.version, m.name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
