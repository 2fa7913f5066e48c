package sqlite

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
	"github.com/refill-dev/refill/warehouse/warehousetest"
)

// fixture is a warehouse with revenue_daily, the table its jobs build,
// sentinel, a table no job may write, and refill's own tables holding a
// publish mark and an audit anchor; and beside it a state database holding
// approvals: what an sql job once could attach and rewrite.
type fixture struct {
	w     *Warehouse
	dir   string
	state string // the state database's path
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	dir := t.TempDir()
	w, err := Open(filepath.Join(dir, "warehouse.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	f := &fixture{w: w, dir: dir, state: filepath.Join(dir, "state.db")}
	f.exec(t, "CREATE TABLE revenue_daily (day DATE, region TEXT, amount NUMERIC, PRIMARY KEY (day, region))")
	f.exec(t, "INSERT INTO revenue_daily VALUES ('2026-10-31', 'eu', 1), ('2026-11-01', 'eu', 2), ('2026-11-01', 'us', 3), ('2026-11-02', 'eu', 4)")
	f.exec(t, "CREATE TABLE sentinel (day DATE, account TEXT, amount NUMERIC)")
	f.exec(t, "INSERT INTO sentinel VALUES ('2026-11-01', 'acme', 100), ('2026-11-02', 'acme', 200)")
	err = w.Transact(t.Context(), func(tx refill.WarehouseTx) error {
		if _, err := tx.MarkPublished(t.Context(), "plan-1", "revenue", "2026-11-01"); err != nil {
			return err
		}
		return tx.Anchor(t.Context(), refill.AuditAnchor{Store: "state", Seq: 7, Hash: "h7"})
	})
	if err != nil {
		t.Fatal(err)
	}
	state, err := Open(f.state)
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()
	if _, err := state.db.Exec("PRAGMA journal_mode = DELETE; CREATE TABLE approvals (plan TEXT, status TEXT); INSERT INTO approvals VALUES ('p1', 'pending')"); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) exec(t testing.TB, sql string) {
	t.Helper()
	if _, err := f.w.db.Exec(sql); err != nil {
		t.Fatalf("fixture %q: %v", sql, err)
	}
}

var revenue = refill.TableRef{Table: "revenue_daily", Column: "day", Grain: refill.GrainDay}

// digest is every partition's digest and the table's row count.
func (f *fixture) digest(t testing.TB) string {
	t.Helper()
	var n int
	if err := f.w.db.QueryRow("SELECT count(*) FROM revenue_daily").Scan(&n); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, p := range []string{"2026-10-31", "2026-11-01", "2026-11-02"} {
		d, err := f.w.Digest(context.Background(), revenue, p)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(d.Checksum)
	}
	return fmt.Sprintf("%s, %d rows", b.String(), n)
}

// untouchable is every row of the tables no job may write, and of
// revenue_daily's partitions other than 2026-11-01, which a job for
// 2026-11-01 may not write either.
func (f *fixture) untouchable(t testing.TB) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []string{
		"SELECT * FROM sentinel ORDER BY 1, 2, 3",
		"SELECT plan_id, dataset, partition, published_at FROM refill_published ORDER BY 1, 2, 3",
		"SELECT store, seq, hash, written_at FROM refill_audit_anchor ORDER BY 1, 2",
		"SELECT * FROM revenue_daily WHERE day IS NOT '2026-11-01' ORDER BY 1, 2, 3",
		"SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY 1, 2",
	} {
		rows, err := f.w.db.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%q\n", vals)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// stateSum is a checksum of the state database's file.
func (f *fixture) stateSum(t testing.TB) [32]byte {
	t.Helper()
	b, err := os.ReadFile(f.state)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// A job that attaches refill's state database to approve its own plan is
// refused before it attaches anything.
func TestAttachIsRefused(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	before, state := f.digest(t), f.stateSum(t)
	job := "ATTACH DATABASE '" + f.state + "' AS s; UPDATE s.approvals SET status = 'approved'; DELETE FROM revenue_daily"
	for name, run := range map[string]func(fn func(refill.WarehouseTx) error) error{
		"Transact": func(fn func(refill.WarehouseTx) error) error { return f.w.Transact(ctx, fn) },
		"Rehearse": func(fn func(refill.WarehouseTx) error) error { return f.w.Rehearse(ctx, fn) },
	} {
		err := run(func(tx refill.WarehouseTx) error { return tx.ExecSQL(ctx, revenue, job, "2026-11-01") })
		var refused *sqltext.RefusedError
		if !errors.As(err, &refused) || !strings.Contains(err.Error(), "attach a database") || !strings.Contains(err.Error(), f.state) {
			t.Errorf("%s: error = %v, want a refusal saying the job tried to attach %s", name, err, f.state)
		}
	}
	if f.digest(t) != before || f.stateSum(t) != state {
		t.Error("the job changed the warehouse or the state database")
	}
}

// A conflict clause ends the whole transaction without any transaction
// statement for the authorizer to see. The transaction then refuses all
// work, and underneath, the commit hook turns each statement that would
// now commit on its own into a rollback. (The job deletes a row of its own
// partition first, so that its going on would show.)
func TestConflictClauseRollbackEndsNothingEarly(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	before := f.digest(t)
	err := f.w.Transact(ctx, func(rtx refill.WarehouseTx) error {
		err := rtx.ExecSQL(ctx, revenue, "DELETE FROM revenue_daily WHERE day = :partition AND region = 'us'; INSERT OR ROLLBACK INTO revenue_daily VALUES ('2026-11-01', 'eu', 9)", "2026-11-01")
		var refused *sqltext.RefusedError
		if !errors.As(err, &refused) || !strings.Contains(err.Error(), "end the transaction") {
			t.Errorf("INSERT OR ROLLBACK: error = %v, want a refusal saying the job ended the transaction", err)
		}
		if err := rtx.ExecSQL(ctx, revenue, "DELETE FROM revenue_daily", "2026-11-01"); err == nil {
			t.Error("the transaction ran a job after it had ended")
		}
		// Past refill's own checks, straight on the connection, as if
		// autocommit mode were the transaction.
		if _, err := rtx.(*tx).conn.ExecContext(ctx, "DELETE FROM revenue_daily"); err == nil {
			t.Error("a statement committed on its own after the transaction ended")
		}
		return nil // a careless caller
	})
	if err == nil {
		t.Error("Transact committed a transaction that had ended")
	}
	if f.digest(t) != before {
		t.Error("revenue_daily changed")
	}
}

// A query job may only read: the guard refuses writes, whatever the
// statement splitter thought of the text.
func TestQueryGuardOnlyReads(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	conn, err := f.w.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, stmt := range []string{
		"DELETE FROM revenue_daily",
		"INSERT INTO revenue_daily VALUES ('2026-11-03', 'eu', 1)",
		"CREATE TABLE x (a)",
		"CREATE TEMP TRIGGER tr AFTER INSERT ON revenue_daily BEGIN DELETE FROM revenue_daily; END",
		"PRAGMA query_only = OFF",
		"SELECT * FROM refill_published",
		"SELECT day FROM revenue_daily WHERE EXISTS (SELECT 1 FROM refill_audit_anchor)",
	} {
		_, err := guarded(conn, newQueryGuard("other"), "2026-11-01", func() error {
			_, err := conn.ExecContext(ctx, stmt)
			return err
		})
		var refused *sqltext.RefusedError
		if !errors.As(err, &refused) {
			t.Errorf("%q under a query guard: error = %v, want a refusal", stmt, err)
		}
	}
	// Reading is fine, and the guard is gone afterwards.
	if _, err := guarded(conn, newQueryGuard(""), "2026-11-01", func() error {
		var n int
		return conn.QueryRowContext(ctx, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3) SELECT count(*) FROM n, revenue_daily").Scan(&n)
	}); err != nil {
		t.Error(err)
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA user_version = 1"); err != nil {
		t.Errorf("refill's own PRAGMA after the guard: %v", err)
	}
}

// A REPLACE conflict clause deletes the row in the way without the DELETE
// the partition triggers see, unless recursive_triggers is on: a job that
// takes another partition's key is refused all the same, and the
// connection goes back to the pool as it came, without triggers and with
// recursive_triggers off.
func TestReplaceStaysInPartition(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	f.w.db.SetMaxOpenConns(1) // every transaction on the one connection
	f.exec(t, "CREATE TABLE events (id INTEGER PRIMARY KEY, day TEXT, code TEXT UNIQUE)")
	f.exec(t, "INSERT INTO events VALUES (1, '2026-11-01', 'a'), (2, '2026-11-02', 'b')")
	events := refill.TableRef{Table: "events", Column: "day", Grain: refill.GrainDay}
	for _, job := range []string{
		"INSERT OR REPLACE INTO events VALUES (2, :partition, 'c')",
		"REPLACE INTO events VALUES (3, :partition, 'b')",
		"UPDATE OR REPLACE events SET code = 'b' WHERE id = 1",
	} {
		err := f.w.Transact(ctx, func(tx refill.WarehouseTx) error { return tx.ExecSQL(ctx, events, job, "2026-11-01") })
		var out *refill.OutsidePartitionError
		if !errors.As(err, &out) || out.Value != "2026-11-02" {
			t.Errorf("%q: error = %v, want the row of 2026-11-02 it replaced outside", job, err)
		}
	}
	if err := f.w.Transact(ctx, func(tx refill.WarehouseTx) error {
		return tx.ExecSQL(ctx, events, "INSERT OR REPLACE INTO events VALUES (1, :partition, 'z')", "2026-11-01")
	}); err != nil {
		t.Fatalf("replacing a row of its own partition: %v", err)
	}
	var n, triggers, recursive int
	if err := f.w.db.QueryRow("SELECT count(*) FROM events WHERE day = '2026-11-02' AND code = 'b'").Scan(&n); err != nil || n != 1 {
		t.Errorf("2026-11-02's row: %d, %v; want it kept", n, err)
	}
	if err := f.w.db.QueryRow("SELECT count(*) FROM sqlite_temp_schema").Scan(&triggers); err != nil || triggers != 0 {
		t.Errorf("the pooled connection keeps %d temporary objects (%v)", triggers, err)
	}
	if err := f.w.db.QueryRow("PRAGMA recursive_triggers").Scan(&recursive); err != nil || recursive != 0 {
		t.Errorf("the pooled connection has recursive_triggers = %d (%v)", recursive, err)
	}
}

// FuzzHostileSQL runs arbitrary text as an sql job through Transact and
// checks what must hold whatever the text: the state database beside the
// warehouse is untouched and nothing new appears on disk; the sentinel
// table, refill's own tables, the schema and revenue_daily's other
// partitions are unchanged, whether the job failed or not; a Transact that
// fails leaves the warehouse exactly as it was; and no transaction is left
// open. "$STATE" in the text stands for the state database's path.
func FuzzHostileSQL(f *testing.F) {
	for _, j := range warehousetest.HostileJobs("$STATE") {
		f.Add(j.SQL)
	}
	for _, s := range []string{
		"DELETE FROM revenue_daily WHERE day = :partition; INSERT INTO revenue_daily VALUES (:partition, 'eu', 7)",
		"DELETE FROM revenue_daily WHERE day = '2026-11-02'; INSERT OR ROLLBACK INTO revenue_daily VALUES (:partition, 'eu', 9); DELETE FROM revenue_daily",
		"ATTACH '$STATE' AS s; UPDATE s.approvals SET status = 'approved'",
		"DELETE FROM revenue_daily; VACUUM INTO '$STATE'",
		"DELETE FROM revenue_daily; SELECT load_extension('$STATE')",
		"CREATE TEMP TRIGGER t AFTER DELETE ON revenue_daily BEGIN SELECT 1; END; DELETE FROM revenue_daily; COMMIT",
		"SELECT 1 AS [a'b]; COMMIT; DELETE FROM revenue_daily; SELECT 1 AS [c'd]",
		"CREATE TRIGGER x AFTER INSERT ON revenue_daily BEGIN SELECT CASE WHEN 1 THEN 2 END; END; COMMIT; DELETE FROM revenue_daily",
		"DELETE FROM revenue_daily; DETACH main",
		"PRAGMA journal_mode = OFF; DELETE FROM revenue_daily; ROLLBACK",
		"CREATE VIRTUAL TABLE v USING fts5(x); DELETE FROM revenue_daily",
		"DELETE FROM revenue_daily; SAVEPOINT a; RELEASE a; COMMIT",
		"DELETE FROM revenue_daily WHERE day = :partition; UPDATE sentinel SET amount = 0",
		"DELETE FROM refill_published; DELETE FROM refill_audit_anchor",
		"UPDATE revenue_daily SET day = :partition WHERE day = '2026-11-02'",
		"INSERT OR REPLACE INTO revenue_daily SELECT :partition, region, amount FROM revenue_daily",
		"CREATE TRIGGER x AFTER INSERT ON revenue_daily BEGIN UPDATE sentinel SET amount = 0; END; INSERT INTO revenue_daily VALUES (:partition, 'x', 1)",
		"DROP TABLE sentinel",
		"ALTER TABLE sentinel RENAME TO s2",
		"CREATE TEMP TABLE x AS SELECT * FROM refill_published",
		"CREATE VIEW v AS SELECT * FROM sentinel; DELETE FROM v",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, job string) {
		fx := newFixture(t)
		job = strings.ReplaceAll(job, "$STATE", fx.state)
		before, state, untouchable := fx.digest(t), fx.stateSum(t), fx.untouchable(t)
		files := listDir(t, fx.dir)
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		err := fx.w.Transact(ctx, func(tx refill.WarehouseTx) error { return tx.ExecSQL(ctx, revenue, job, "2026-11-01") })
		if fx.stateSum(t) != state {
			t.Fatalf("job %q changed the state database", job)
		}
		if now := fx.untouchable(t); now != untouchable {
			t.Fatalf("job %q (error %v) changed what no job may change:\n%s\nnow:\n%s", job, err, untouchable, now)
		}
		if now := listDir(t, fx.dir); !bytes.Equal(now, files) && !onlyWarehouseFiles(now) {
			t.Fatalf("job %q left files: %s", job, now)
		}
		if err != nil {
			if after := fx.digest(t); after != before {
				t.Fatalf("job %q failed (%v) and yet changed the warehouse: %s -> %s", job, err, before, after)
			}
		}
		// No transaction was left open on any connection: a write
		// transaction starts at once.
		conn, err := fx.w.db.Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(t.Context(), "PRAGMA busy_timeout = 200"); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
			t.Fatalf("after job %q: a write transaction cannot start: %v", job, err)
		}
		if _, err := conn.ExecContext(t.Context(), "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(t.Context(), "PRAGMA busy_timeout = 5000"); err != nil {
			t.Fatal(err)
		}
	})
}

// listDir returns the names in dir, one a line.
func listDir(t testing.TB, dir string) []byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, e := range entries {
		b.WriteString(e.Name() + "\n")
	}
	return b.Bytes()
}

// onlyWarehouseFiles reports whether a listing holds only the two
// databases and the warehouse's own WAL files.
func onlyWarehouseFiles(listing []byte) bool {
	for _, name := range strings.Fields(string(listing)) {
		switch name {
		case "warehouse.db", "warehouse.db-wal", "warehouse.db-shm", "state.db":
		default:
			return false
		}
	}
	return true
}

// The partition triggers are made once per table and transaction and
// read their partition from the fence table: each job of the transaction
// is held to its own partition, not the first one's; between jobs the
// fence is down, so refill's own writes go through; and job text can
// neither read nor change the fence.
func TestFenceFollowsEachPartition(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	f.exec(t, "CREATE TABLE events (day TEXT, n INTEGER)")
	f.exec(t, "INSERT INTO events VALUES ('2026-11-01', 1), ('2026-11-02', 2), ('2026-11-03', 3)")
	events := refill.TableRef{Table: "events", Column: "day", Grain: refill.GrainDay}
	var out *refill.OutsidePartitionError
	err := f.w.Transact(ctx, func(tx refill.WarehouseTx) error {
		if err := tx.ExecSQL(ctx, events, "UPDATE events SET n = n + 10 WHERE day = :partition", "2026-11-01"); err != nil {
			return fmt.Errorf("first partition: %w", err)
		}
		// refill's own write of another partition, between jobs.
		if _, err := tx.DeletePartition(ctx, events, "2026-11-03"); err != nil {
			return fmt.Errorf("refill's delete between jobs: %w", err)
		}
		return tx.ExecSQL(ctx, events, "UPDATE events SET n = 0 WHERE day = '2026-11-01'", "2026-11-02")
	})
	if !errors.As(err, &out) || out.Value != "2026-11-01" || out.Partition != "2026-11-02" {
		t.Fatalf("a job of 2026-11-02 writing 2026-11-01 after 2026-11-01's job: %v; want it refused as outside its partition", err)
	}
	if err := f.w.Transact(ctx, func(tx refill.WarehouseTx) error {
		for _, p := range []string{"2026-11-01", "2026-11-02", "2026-11-03"} {
			if err := tx.ExecSQL(ctx, events, "UPDATE events SET n = n * 2 WHERE day = :partition", p); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("three jobs, each inside its partition: %v", err)
	}
	var sum int
	if err := f.w.db.QueryRow("SELECT sum(n) FROM events").Scan(&sum); err != nil || sum != 12 {
		t.Errorf("sum after doubling 1, 2, 3 = %d (%v), want 12", sum, err)
	}
	for _, job := range []string{
		"SELECT * FROM temp.refill_fence",
		"UPDATE temp.refill_fence SET part = NULL",
		"DELETE FROM refill_fence",
	} {
		err := f.w.Transact(ctx, func(tx refill.WarehouseTx) error {
			if err := tx.ExecSQL(ctx, events, "UPDATE events SET n = n WHERE day = :partition", "2026-11-02"); err != nil {
				return err
			}
			return tx.ExecSQL(ctx, events, job+"; UPDATE events SET n = -1 WHERE day = '2026-11-01'", "2026-11-02")
		})
		var refused *sqltext.RefusedError
		if !errors.As(err, &refused) || refused.Rule != sqltext.RuleOwnTables {
			t.Errorf("%q: %v; want it refused as refill's own table", job, err)
		}
	}
	var temp int
	if err := f.w.db.QueryRow("SELECT count(*) FROM sqlite_temp_schema").Scan(&temp); err != nil || temp != 0 {
		t.Errorf("the pooled connection keeps %d temporary objects (%v)", temp, err)
	}
}

// Job text cannot learn what else ran in its transaction, nor whether it
// runs in a proof or a real apply: not by naming a CTE after a fence
// trigger (the authorizer names a CTE as it names a trigger), not from
// the temp schema's listing, not from the raw pages that hold refill's
// publish marks.
func TestJobCannotReadRefillsStateSideways(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	f.exec(t, "CREATE TABLE events (day TEXT, n INTEGER)")
	f.exec(t, "INSERT INTO events VALUES ('2026-11-01', 1), ('2026-11-02', 2)")
	events := refill.TableRef{Table: "events", Column: "day", Grain: refill.GrainDay}
	for _, job := range []string{
		"WITH refill_fence_1_insert AS (SELECT n, lo, hi, part FROM temp.refill_fence) INSERT INTO events SELECT :partition, n FROM refill_fence_1_insert",
		"WITH refill_fence_1_update AS MATERIALIZED (SELECT * FROM temp.refill_fence LIMIT 5) INSERT INTO events SELECT :partition, count(*) FROM refill_fence_1_update",
		"INSERT INTO events SELECT :partition, count(*) FROM sqlite_temp_schema WHERE name LIKE 'refill%'",
		"INSERT INTO events SELECT :partition, count(*) FROM sqlite_temp_master",
		"INSERT INTO events SELECT :partition, count(*) FROM temp.sqlite_master",
		"INSERT INTO events SELECT :partition, count(*) FROM sqlite_dbpage('main') WHERE instr(data, CAST('events' AS BLOB)) > 0",
		"INSERT INTO events SELECT :partition, count(*) FROM dbstat('main')",
	} {
		err := f.w.Rehearse(ctx, func(tx refill.WarehouseTx) error {
			if err := tx.ExecSQL(ctx, events, "UPDATE events SET n = n WHERE day = :partition", "2026-11-01"); err != nil {
				return err
			}
			return tx.ExecSQL(ctx, events, job, "2026-11-02")
		})
		var refused *sqltext.RefusedError
		if !errors.As(err, &refused) || refused.Rule != sqltext.RuleOwnTables {
			t.Errorf("%q: %v; want it refused as a read of refill's own tables", job, err)
		}
	}
}
