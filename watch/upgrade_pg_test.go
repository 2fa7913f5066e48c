package watch_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/internal/pgtest"
	"github.com/refill-dev/refill/project"
	"github.com/refill-dev/refill/warehouse/postgres"
	"github.com/refill-dev/refill/watch"
)

// version1 is a PostgreSQL warehouse as a refill from before version 2 of
// its checksum saw it: Digest computes version 1, and no other.
type version1 struct {
	refill.Warehouse
	pg *postgres.Warehouse
}

func (v version1) Digest(ctx context.Context, t refill.TableRef, partition string) (refill.Digest, error) {
	return v.pg.DigestVersion(ctx, t, partition, refill.DigestV1)
}

func (v version1) Rehearse(ctx context.Context, fn func(tx refill.WarehouseTx) error) error {
	return v.pg.Rehearse(ctx, fn)
}

// TestUpgradeIsNoChangeInTheSource: the watcher remembers a fingerprint of
// the source's checksums for a plan the gate blocked, and plans again when
// it changes. A fingerprint taken before version 2 of PostgreSQL's
// checksum is of version 1 checksums; after the upgrade the same rows are
// no change, and a real repair still is.
func TestUpgradeIsNoChangeInTheSource(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Schema(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, q := range []string{
		`CREATE TABLE src (day text, v integer, at timestamptz)`,
		`CREATE TABLE leaf (day text, v integer)`,
		`INSERT INTO src SELECT to_char(date '2026-11-29' - i, 'YYYY-MM-DD'), i, timestamptz '2026-11-01 10:00Z' + i * interval '1 h' FROM generate_series(0, 59) i`,
		`INSERT INTO leaf SELECT day, v FROM src`,
		`DELETE FROM leaf WHERE day = '2026-11-27'`,
		`UPDATE src SET v = NULL WHERE day = '2026-11-27'`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	dir := t.TempDir()
	cfg := `version: 1
warehouse: "` + dsn + `"
users:
  alice: {roles: [engineer]}
datasets:
  src:
    table: src
    partition: {column: day}
    checks:
      not_null: {columns: [v]}
  leaf:
    table: leaf
    partition: {column: day}
    upstream: [src]
    schedule: {every: day, lag: 2h, horizon: 10}
    job: {query: "SELECT day, v FROM src WHERE day = :partition"}
`
	if err := os.WriteFile(filepath.Join(dir, "refill.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := project.Open(t.Context(), project.Options{Config: filepath.Join(dir, "refill.yaml"), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if _, err := p.Control.Prove(t.Context(), "leaf", "2026-11-10", "alice"); err != nil {
		t.Fatalf("prove leaf: %v", err)
	}
	pg, ok := p.Warehouse.(*postgres.Warehouse)
	if !ok {
		t.Fatalf("the warehouse is a %T", p.Warehouse)
	}
	w := &watch.Watcher{Config: p.Config, Store: p.Store, Warehouse: version1{pg, pg}, Control: p.Control, Now: func() time.Time { return now }}
	tick := func() watch.Decision {
		t.Helper()
		rep, err := w.Tick(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return one(t, rep)
	}

	if d := tick(); d.Status != refill.StatusBlocked {
		t.Fatalf("before the upgrade, the gap: %+v, want a blocked plan", d)
	}
	if d := tick(); d.Action != watch.Unchanged {
		t.Fatalf("before the upgrade, nothing changed: %+v", d)
	}
	w.Warehouse = pg // the upgrade
	if d := tick(); d.Action != watch.Unchanged {
		t.Fatalf("after the upgrade, nothing changed: %+v", d)
	}
	if d := tick(); d.Action != watch.Unchanged {
		t.Fatalf("after the upgrade, twice: %+v", d)
	}
	if _, err := db.Exec(`UPDATE src SET v = 5 WHERE day = '2026-11-27'`); err != nil {
		t.Fatal(err)
	}
	if d := tick(); d.Action != watch.Applied {
		t.Fatalf("after an in-place repair: %+v", d)
	}
}
