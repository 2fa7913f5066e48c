//go:build duckdb

package duckdb_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/duckdb"
	"github.com/refill-dev/refill/warehouse/warehousetest"
)

var revenue = refill.TableRef{Table: "revenue_daily", Column: "day", Grain: refill.GrainDay}

// hostileFixture is a warehouse with revenue_daily (three days), its
// source, a sentinel table no job may touch, refill's own tables holding a
// mark and an anchor, and a state file beside it.
type hostileFixture struct {
	w          *duckdb.Warehouse
	dir, state string
}

func newHostileFixture(t *testing.T) *hostileFixture {
	t.Helper()
	dir := t.TempDir()
	w, err := duckdb.Open(filepath.Join(dir, "warehouse.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	for _, q := range []string{
		"CREATE TABLE revenue_daily (day DATE, region TEXT, amount NUMERIC, PRIMARY KEY (day, region))",
		"INSERT INTO revenue_daily VALUES ('2026-10-31', 'eu', 1), ('2026-11-01', 'eu', 2), ('2026-11-01', 'us', 3), ('2026-11-02', 'eu', 4)",
		"CREATE TABLE revenue_src (day DATE, region TEXT, amount NUMERIC)",
		"INSERT INTO revenue_src VALUES ('2026-11-01', 'eu', 20), ('2026-11-01', 'us', 30)",
		"CREATE TABLE sentinel (id INTEGER, amount NUMERIC)",
		"INSERT INTO sentinel VALUES (1, 100), (2, 200)",
	} {
		if _, err := w.DB().Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	err = w.Transact(t.Context(), func(tx refill.WarehouseTx) error {
		if _, err := tx.MarkPublished(t.Context(), "plan-1", "revenue", "2026-11-01"); err != nil {
			return err
		}
		return tx.Anchor(t.Context(), refill.AuditAnchor{Store: "state", Seq: 7, Hash: "h7"})
	})
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state.db")
	if err := os.WriteFile(state, []byte("the state store"), 0o644); err != nil {
		t.Fatal(err)
	}
	return &hostileFixture{w: w, dir: dir, state: state}
}

// untouchable renders what no job may change: the sentinel, refill's
// tables, revenue_daily outside 2026-11-01, the catalogue, the settings.
func (fx *hostileFixture) untouchable(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []string{
		"SELECT * FROM sentinel ORDER BY id",
		"SELECT plan_id, dataset, partition FROM refill_published ORDER BY ALL",
		"SELECT store, seq, hash, keyed, mac FROM refill_audit_anchor ORDER BY ALL",
		"SELECT * FROM revenue_daily WHERE day <> '2026-11-01' ORDER BY ALL",
		"SELECT database_name, schema_name, table_name, column_name, data_type FROM duckdb_columns() ORDER BY ALL",
		"SELECT database_name, schema_name, function_name FROM duckdb_functions() WHERE NOT internal ORDER BY ALL",
		"SELECT database_name, sequence_name FROM duckdb_sequences() ORDER BY ALL",
		"SELECT index_name FROM duckdb_indexes() ORDER BY ALL",
		"SELECT database_name FROM duckdb_databases() ORDER BY ALL",
		"SELECT name, value FROM duckdb_settings() ORDER BY ALL",
	} {
		rows, err := fx.w.DB().QueryContext(t.Context(), q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(&b, vals...)
		}
		rows.Close()
	}
	return b.String()
}

// digest is revenue_daily as a whole.
func (fx *hostileFixture) digest(t *testing.T) refill.Digest {
	t.Helper()
	var rows int64
	var sum string
	if err := fx.w.DB().QueryRow("SELECT count(*), CAST(coalesce(sum(hash(day, region, amount)::HUGEINT), 0) AS VARCHAR) FROM revenue_daily").Scan(&rows, &sum); err != nil {
		t.Fatal(err)
	}
	return refill.Digest{Rows: rows, Checksum: sum}
}

func listing(t *testing.T, dir string) []byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, e := range entries {
		if e.Name() == "warehouse.duckdb.wal" {
			continue // DuckDB's own, come and gone with checkpoints
		}
		b.WriteString(e.Name() + "\n")
	}
	return b.Bytes()
}

// FuzzHostileSQL runs arbitrary text as an sql job through Transact and
// checks what must hold whatever the text: the state file beside the
// warehouse is untouched and nothing new appears on disk; the sentinel,
// refill's own tables, the catalogue, the settings and revenue_daily's
// other partitions are unchanged, whether the job failed or not; a
// Transact that fails leaves the warehouse exactly as it was; and the
// warehouse takes a write afterwards. "$STATE" stands for the state file.
//
//	go test -tags duckdb ./warehouse/duckdb -run '^$' -fuzz FuzzHostileSQL -fuzztime 60s
func FuzzHostileSQL(f *testing.F) {
	for _, j := range warehousetest.HostileJobs("$STATE") {
		f.Add(j.SQL)
	}
	for _, s := range []string{
		"DELETE FROM revenue_daily WHERE day = :partition; INSERT INTO revenue_daily VALUES (:partition, 'eu', 7)",
		"UPDATE sentinel SET amount = 0",
		"WITH x AS (SELECT 1) UPDATE main.sentinel SET amount = 0",
		"INSERT INTO revenue_daily BY NAME SELECT :partition AS day, 'x' AS region, 1 AS amount; DELETE FROM sentinel",
		"DELETE FROM refill_published; DELETE FROM refill_audit_anchor",
		"SELECT * FROM query('SELECT * FROM refill_' || 'published')",
		"SELECT * FROM query_table('refill_published')",
		"COPY sentinel TO '$STATE'",
		"ATTACH '$STATE' AS s (TYPE sqlite)",
		"SET TimeZone = 'Asia/Tokyo'",
		"CREATE MACRO m() AS 1",
		"CREATE SEQUENCE s; SELECT nextval('s')",
		"INSTALL httpfs; LOAD httpfs",
		"CHECKPOINT",
		"PRAGMA enable_profiling",
		"UPDATE revenue_daily SET day = :partition WHERE day = '2026-11-02'",
		"INSERT OR REPLACE INTO revenue_daily SELECT :partition, region, amount FROM revenue_daily",
		"EXPORT DATABASE '$STATE'",
		"SELECT * FROM read_text('$STATE')",
		"DROP TABLE sentinel",
		"BEGIN TRANSACTION; DELETE FROM sentinel; COMMIT",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, job string) {
		fx := newHostileFixture(t)
		job = strings.ReplaceAll(job, "$STATE", fx.state)
		before, untouchable := fx.digest(t), fx.untouchable(t)
		files := listing(t, fx.dir)
		stateBefore, _ := os.ReadFile(fx.state)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			done <- fx.w.Transact(ctx, func(tx refill.WarehouseTx) error { return tx.ExecSQL(ctx, revenue, job, "2026-11-01") })
		}()
		var err error
		select {
		case err = <-done:
		case <-time.After(20 * time.Second):
			// The context ends the job at 5 s: a job that outlives it
			// would hold the warehouse's turn to write for ever.
			t.Fatalf("job %q still runs 15 s after its context ended", job)
		}
		if now, _ := os.ReadFile(fx.state); !bytes.Equal(now, stateBefore) {
			t.Fatalf("job %q changed the state file", job)
		}
		if now := fx.untouchable(t); now != untouchable {
			t.Fatalf("job %q (error %v) changed what no job may change:\n%s\nnow:\n%s", job, err, untouchable, now)
		}
		if now := listing(t, fx.dir); !bytes.Equal(now, files) {
			t.Fatalf("job %q left files: %s", job, now)
		}
		if err != nil {
			if after := fx.digest(t); after != before {
				t.Fatalf("job %q failed (%v) and yet changed the warehouse: %v -> %v", job, err, before, after)
			}
		}
		// Nothing was left open: a write goes through.
		if _, err := fx.w.DB().Exec("UPDATE sentinel SET amount = amount WHERE id = 1"); err != nil {
			t.Fatalf("after job %q: the warehouse takes no write: %v", job, err)
		}
	})
}
