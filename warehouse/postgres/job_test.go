package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/internal/pgtest"
	"github.com/refill-dev/refill/warehouse/postgres"
)

// Job text runs in UTC whatever the connection's TimeZone (the harness's
// is Asia/Kolkata), so that a job cuts days where refill does: sql jobs,
// query jobs and the counts the planner makes of them.
func TestJobsRunInUTC(t *testing.T) {
	h := setup(t)
	ctx := t.Context()
	tr := h.Warehouse.(refill.Transactor)
	h.Exec(t, "CREATE TABLE zones (day date, zone text)")
	ref := refill.TableRef{Table: "zones", Column: "day", Grain: refill.GrainDay}
	err := tr.Transact(ctx, func(tx refill.WarehouseTx) error {
		if err := tx.ExecSQL(ctx, ref, "INSERT INTO zones (day, zone) SELECT :partition, current_setting('TimeZone')", "2026-11-01"); err != nil {
			return err
		}
		_, err := tx.ReplaceFromQuery(ctx, ref, "SELECT :partition AS day, current_setting('TimeZone') AS zone", "2026-11-02")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := h.Warehouse.QueryCounts(ctx, "SELECT zone FROM zones WHERE day = :partition AND zone = current_setting('TimeZone')", []string{"2026-11-01", "2026-11-02"})
	if err != nil {
		t.Fatal(err)
	}
	if got["2026-11-01"] != 1 || got["2026-11-02"] != 1 {
		t.Errorf("rows written and counted in UTC: %v, want one each", got)
	}
}

// A job's SET does not steer refill's own statements: not later in its
// transaction, and not in the next transaction on the same connection.
func TestJobSettingsDoNotOutliveTheJob(t *testing.T) {
	w, err := postgres.Open(t.Context(), pgtest.Schema(t)+"&pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx := t.Context()
	if _, err := w.Pool().Exec(ctx, "CREATE TABLE t (day date, n integer); INSERT INTO t VALUES ('2026-11-01', 1)"); err != nil {
		t.Fatal(err)
	}
	ref := refill.TableRef{Table: "t", Column: "day", Grain: refill.GrainDay}
	job := "UPDATE t SET n = n + 1 WHERE day = :partition; SET search_path TO pg_catalog; SET ROLE pg_read_all_data; SET TimeZone = 'Pacific/Chatham'"
	for range 2 {
		err := w.Transact(ctx, func(tx refill.WarehouseTx) error {
			if err := tx.ExecSQL(ctx, ref, job, "2026-11-01"); err != nil {
				return err
			}
			// refill's own statements still find t, as the user they
			// connected as (pg_read_all_data could not write the mark).
			if _, err := tx.MarkPublished(ctx, "p", "t", "2026-11-01"); err != nil {
				return err
			}
			d, err := tx.Digest(ctx, ref, "2026-11-01")
			if err == nil && d.Rows != 1 {
				t.Errorf("digest after the job: %v, want t's 1 row", d)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var path, role, zone string
	if err := w.Pool().QueryRow(ctx, "SELECT current_setting('search_path'), current_setting('role'), current_setting('TimeZone')").Scan(&path, &role, &zone); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(path, "pg_catalog") || role != "none" || zone == "Pacific/Chatham" {
		t.Errorf("the pooled connection kept the job's settings: search_path %s, role %s, TimeZone %s", path, role, zone)
	}
}

// A partition is inlined into an sql job's DO block only when it is a day
// or an hour; anything else is refused before any text runs.
func TestExecSQLPartitionLiteral(t *testing.T) {
	h := setup(t)
	ctx := t.Context()
	h.Exec(t, "CREATE TABLE t (day date, n integer)")
	h.Exec(t, "INSERT INTO t VALUES ('2026-11-01', 1)")
	h.Exec(t, "CREATE TABLE h (hour text, n integer)")
	h.Exec(t, "INSERT INTO h VALUES ('2026-11-01T13', 1)")
	ref := refill.TableRef{Table: "t", Column: "day", Grain: refill.GrainDay}
	tr := h.Warehouse.(refill.Transactor)
	for _, p := range []string{"2026-11-01'; DELETE FROM t; --", "2026-11-01$$", "2026-13-01", "2026-11-01T24", "２０２６-11-01", "2026-11-01 ", ""} {
		err := tr.Transact(ctx, func(tx refill.WarehouseTx) error {
			return tx.ExecSQL(ctx, ref, "UPDATE t SET n = 2 WHERE day = :partition", p)
		})
		if !errors.Is(err, refill.ErrBadInput) {
			t.Errorf("partition %q: error = %v, want bad input", p, err)
		}
	}
	for p, ref := range map[string]refill.TableRef{"2026-11-01": ref, "2026-11-01T13": {Table: "h", Column: "hour", Grain: refill.GrainHour}} {
		err := tr.Transact(ctx, func(tx refill.WarehouseTx) error {
			return tx.ExecSQL(ctx, ref, "UPDATE "+ref.Table+" SET n = n + 1 WHERE "+ref.Column+"::text = :partition", p)
		})
		if err != nil {
			t.Errorf("partition %q: %v", p, err)
		}
	}
	var n, m int
	if err := h.Warehouse.(*postgres.Warehouse).Pool().QueryRow(ctx, "SELECT t.n, h.n FROM t, h").Scan(&n, &m); err != nil || n != 2 || m != 2 {
		t.Errorf("n = %d and %d, %v; want 2 and 2", n, m, err)
	}
}

// A snapshot may live in a schema of its own, created if need be; names
// PostgreSQL would cut short are refused, so that two snapshots never
// share one.
func TestSnapshotInSchema(t *testing.T) {
	h := setup(t)
	ctx := t.Context()
	w := h.Warehouse.(*postgres.Warehouse)
	var schema string
	if err := w.Pool().QueryRow(ctx, "SELECT current_schema() || '_snap'").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = w.Pool().Exec(context.Background(), `DROP SCHEMA IF EXISTS "`+schema+`" CASCADE`)
	})
	h.Exec(t, "CREATE TABLE s (day date, n integer)")
	h.Exec(t, "INSERT INTO s VALUES ('2026-11-01', 1), ('2026-11-02', 2)")
	ref := refill.TableRef{Table: "s", Column: "day", Grain: refill.GrainDay}
	snap := schema + ".s_plan_1"
	err := w.Transact(ctx, func(tx refill.WarehouseTx) error {
		return tx.CopyPartitions(ctx, ref, snap, "2026-11-01", "2026-11-02")
	})
	if err != nil {
		t.Fatal(err)
	}
	if cols, err := w.Columns(ctx, snap); err != nil || len(cols) != 2 {
		t.Fatalf("Columns(%s) = %v, %v", snap, cols, err)
	}
	h.Exec(t, "UPDATE s SET n = 9")
	err = w.Transact(ctx, func(tx refill.WarehouseTx) error {
		if _, err := tx.RestorePartition(ctx, ref, snap, "2026-11-01"); err != nil {
			return err
		}
		return tx.DropTable(ctx, snap)
	})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := w.Pool().QueryRow(ctx, "SELECT n FROM s WHERE day = '2026-11-01'").Scan(&n); err != nil || n != 1 {
		t.Errorf("restored n = %d, %v; want 1", n, err)
	}
	if _, err := w.Columns(ctx, snap); !errors.Is(err, refill.ErrNoTable) {
		t.Errorf("after DropTable(%s): %v, want ErrNoTable", snap, err)
	}

	long := schema + "." + strings.Repeat("x", 64)
	err = w.Transact(ctx, func(tx refill.WarehouseTx) error {
		return tx.CopyPartitions(ctx, ref, long, "2026-11-01", "2026-11-01")
	})
	if !errors.Is(err, refill.ErrBadInput) {
		t.Errorf("a 64-byte snapshot name: error = %v, want bad input", err)
	}
}
