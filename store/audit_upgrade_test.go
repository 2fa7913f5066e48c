package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/internal/pgtest"
)

// upgradeEngines are the state stores an upgrade test opens on each
// engine: the store's DSN, and the driver and DSN its old schema is written
// with directly.
var upgradeEngines = []struct {
	name string
	d    dialect
	dsn  func(t *testing.T) (storeDSN, driver, rawDSN string)
}{
	{"sqlite", sqliteDialect, func(t *testing.T) (string, string, string) {
		file := filepath.Join(t.TempDir(), "state.db")
		return "sqlite:" + file, "sqlite", file + "?" + sqlitePragmas
	}},
	{"postgres", postgresDialect, func(t *testing.T) (string, string, string) {
		dsn := pgtest.Schema(t)
		return dsn, "pgx", dsn
	}},
}

// TestAuditUpgrade opens a state store written by refill before audit keys
// (schema version 5, an unkeyed chain with no as_of) with this refill: the
// old chain must still verify, unkeyed, and the first entry written with a
// key must mark where keying begins, after which the whole log verifies.
func TestAuditUpgrade(t *testing.T) {
	t.Parallel()
	for _, tc := range upgradeEngines {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			storeDSN, driver, rawDSN := tc.dsn(t)
			legacy := writeLegacyLog(t, ctx, tc.d, driver, rawDSN, 3)

			s, err := Open(ctx, storeDSN, t.TempDir())
			if err != nil {
				t.Fatalf("Open of a version 5 store: %v", err)
			}
			defer s.Close()
			rep, err := s.VerifyAudit(ctx)
			if err != nil || !rep.OK || rep.Keyed || rep.Entries != 3 || rep.Head != legacy[2].Hash || !strings.Contains(rep.Warning, "set audit.key_env") {
				t.Fatalf("VerifyAudit of the upgraded log: %+v, %v; want 3 unkeyed entries that verify, with a warning", rep, err)
			}
			got, err := s.Audit(ctx, AuditFilter{})
			if err != nil || len(got) != 3 || !got[0].AsOf.IsZero() || got[0].Hash != legacy[0].Hash {
				t.Fatalf("Audit of the upgraded log: %+v, %v", got, err)
			}

			s.SetAuditKey([]byte("k"))
			if _, err := s.VerifyAuditFrom(ctx); err != nil {
				t.Fatalf("VerifyAuditFrom with a key, before any keyed entry: %v", err)
			}
			err = s.Update(ctx, func(tx *Tx) error {
				return tx.Append(ctx, &refill.Event{Kind: refill.EventApproval, Actor: "carol", PlanID: "p-after"})
			})
			if err != nil {
				t.Fatalf("Append after the upgrade: %v", err)
			}
			for _, verify := range []func(context.Context, ...VerifyOptions) (AuditReport, error){s.VerifyAudit, s.VerifyAuditFrom} {
				rep, err := verify(ctx)
				if err != nil || !rep.OK || !rep.Keyed || rep.KeyedFrom != 4 || rep.Entries != 4 {
					t.Errorf("verify after the first keyed entry: %+v, %v; want 4 entries, keyed from 4", rep, err)
				}
			}
		})
	}
}

// writeLegacyLog brings a new database to schema version 5 and writes n
// audit entries as refill did then, returning them.
func writeLegacyLog(t *testing.T, ctx context.Context, d dialect, driver, dsn string, n int) []refill.Event {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	migrateTo(t, ctx, d, db, 5)
	var out []refill.Event
	prev := refill.GenesisHash
	for i := range n {
		e := refill.Event{Seq: int64(i + 1), At: time.Date(2026, 1, 2, 3, 4, i, 567000, time.UTC), Actor: "ana",
			Kind: refill.EventPlanCreated, PlanID: fmt.Sprintf("p%d", i), Detail: []byte(`{"n":1}`), PrevHash: prev}
		e.Hash = e.ComputeHash()
		if _, err := db.ExecContext(ctx, d.rebind(`
			INSERT INTO audit_log (seq, at, actor, event, plan_id, dataset, partition, detail, prev_hash, hash)
			VALUES (?, ?, ?, ?, ?, '', '', ?, ?, ?)`),
			e.Seq, d.timestamp(e.At), e.Actor, e.Kind, e.PlanID, string(e.Detail), e.PrevHash, e.Hash); err != nil {
			t.Fatal(err)
		}
		prev = e.Hash
		out = append(out, e)
	}
	if _, err := db.ExecContext(ctx, d.rebind(`INSERT INTO audit_head (id, seq, hash) VALUES (1, ?, ?)`), len(out), prev); err != nil {
		t.Fatal(err)
	}
	return out
}

// migrateTo brings a database's schema up to version, as a refill of that
// version would have left it, one migration after the other.
func migrateTo(t *testing.T, ctx context.Context, d dialect, db *sql.DB, version int) {
	t.Helper()
	all, err := d.migrations()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, d.createMigrations); err != nil {
		t.Fatal(err)
	}
	var at int
	if err := db.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM refill_migrations`).Scan(&at); err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		if m.version <= at {
			continue
		}
		if m.version > version {
			break
		}
		if _, err := db.ExecContext(ctx, m.sql); err != nil {
			t.Fatalf("migration %d: %v", m.version, err)
		}
		if _, err := db.ExecContext(ctx, d.rebind(`INSERT INTO refill_migrations (version, name) VALUES (?, ?)`), m.version, m.name); err != nil {
			t.Fatal(err)
		}
	}
}
