package postgres_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/postgres"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// The partition fence holds where a plain trigger would not: with
// triggers switched off for replication (the test server's user is a
// superuser, who may), and after a trigger of the owner's has filled in
// the partition column. TRUNCATE, which fires no row trigger, changes the
// catalogue and is refused with the schema changes.
func TestPartitionFence(t *testing.T) {
	h := setup(t)
	ctx := t.Context()
	w := h.Warehouse.(*postgres.Warehouse)
	h.Exec(t, "CREATE TABLE t (day date, at timestamptz, n integer)")
	h.Exec(t, "INSERT INTO t VALUES ('2026-11-01', '2026-11-01 10:00Z', 1), ('2026-11-02', '2026-11-02 10:00Z', 2)")
	h.Exec(t, "CREATE TABLE other (n integer)")
	// The owner's trigger fills day from at; it sorts before the fence.
	h.Exec(t, `CREATE FUNCTION fill_day() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN NEW.day := (NEW.at AT TIME ZONE 'UTC')::date; RETURN NEW; END $$`)
	h.Exec(t, "CREATE TRIGGER fill_day BEFORE INSERT ON t FOR EACH ROW EXECUTE FUNCTION fill_day()")
	ref := refill.TableRef{Table: "t", Column: "day", Grain: refill.GrainDay}
	transact := func(job string) error {
		return w.Transact(ctx, func(tx refill.WarehouseTx) error { return tx.ExecSQL(ctx, ref, job, "2026-11-01") })
	}

	if err := transact("DELETE FROM t WHERE day = :partition; INSERT INTO t (at, n) VALUES ('2026-11-01 12:00Z', 3)"); err != nil {
		t.Fatalf("a job whose rows the owner's trigger completes: %v", err)
	}
	for job, value := range map[string]string{
		"SET session_replication_role = replica; UPDATE t SET n = 0 WHERE day = '2026-11-02'": "2026-11-02",
		"INSERT INTO t (at, n) VALUES ('2026-11-02 01:00Z', 4)":                               "2026-11-02",
		// Caught by the job itself, the raise still undoes the write.
		"DO $$ BEGIN DELETE FROM t WHERE day = '2026-11-02'; EXCEPTION WHEN OTHERS THEN NULL; END $$": "",
	} {
		err := transact(job)
		var out *refill.OutsidePartitionError
		switch {
		case value == "" && err != nil:
			t.Errorf("%q: %v", job, err)
		case value != "" && (!errors.As(err, &out) || out.Value != value):
			t.Errorf("%q: error = %v, want a row of %s outside", job, err, value)
		}
	}
	for _, job := range []string{"TRUNCATE t", "TRUNCATE other", "ALTER TABLE t DISABLE TRIGGER ALL; DELETE FROM t", `DROP TRIGGER "~refill_partition" ON t`} {
		err := transact(job)
		var refused *sqltext.RefusedError
		if !errors.As(err, &refused) || !strings.Contains(err.Error(), "schema") {
			t.Errorf("%q: error = %v, want a refusal of a schema change", job, err)
		}
	}
	// Without statistics nothing can be checked (and only a superuser may
	// turn them off).
	if err := transact("SET LOCAL track_counts = off; INSERT INTO other VALUES (1)"); err == nil || !strings.Contains(err.Error(), "track_counts") {
		t.Errorf("a job that turned statistics off: error = %v, want one naming track_counts", err)
	}
	var rows, fences, others int
	if err := w.Pool().QueryRow(ctx, "SELECT count(*) FROM other").Scan(&others); err != nil || others != 0 {
		t.Errorf("other has %d rows (%v), want none", others, err)
	}
	if err := w.Pool().QueryRow(ctx, "SELECT count(*) FROM t WHERE day = '2026-11-02'").Scan(&rows); err != nil || rows != 1 {
		t.Errorf("2026-11-02 has %d rows (%v), want its 1", rows, err)
	}
	if err := w.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_trigger WHERE tgname = '~refill_partition'`).Scan(&fences); err != nil || fences != 0 {
		t.Errorf("%d partition fences (%v) outlived their transactions", fences, err)
	}
}

// A partitioned table's job writes its partitions, which are its own
// table; the fence still keeps it to the one it builds.
func TestPartitionFenceOnPartitionedTable(t *testing.T) {
	h := setup(t)
	ctx := t.Context()
	h.Exec(t, "CREATE TABLE p (day date, n integer) PARTITION BY RANGE (day)")
	h.Exec(t, "CREATE TABLE p_1 PARTITION OF p FOR VALUES FROM ('2026-11-01') TO ('2026-11-02')")
	h.Exec(t, "CREATE TABLE p_2 PARTITION OF p FOR VALUES FROM ('2026-11-02') TO ('2026-11-03')")
	h.Exec(t, "INSERT INTO p VALUES ('2026-11-01', 1), ('2026-11-02', 2)")
	ref := refill.TableRef{Table: "p", Column: "day", Grain: refill.GrainDay}
	tr := h.Warehouse.(refill.Transactor)
	err := tr.Transact(ctx, func(tx refill.WarehouseTx) error {
		return tx.ExecSQL(ctx, ref, "DELETE FROM p WHERE day = :partition; INSERT INTO p VALUES (:partition, 5); UPDATE p_1 SET n = n + 1", "2026-11-01")
	})
	if err != nil {
		t.Fatalf("an honest job on a partitioned table: %v", err)
	}
	for _, job := range []string{"DELETE FROM p_2", "SET session_replication_role = replica; DELETE FROM p_2"} {
		err = tr.Transact(ctx, func(tx refill.WarehouseTx) error {
			return tx.ExecSQL(ctx, ref, job, "2026-11-01")
		})
		var out *refill.OutsidePartitionError
		if !errors.As(err, &out) || out.Value != "2026-11-02" {
			t.Errorf("%q: error = %v, want 2026-11-02 outside", job, err)
		}
	}
	got, err := h.Warehouse.PartitionCounts(ctx, ref, "2026-11-01", "2026-11-02")
	if err != nil || got["2026-11-01"] != 1 || got["2026-11-02"] != 1 {
		t.Errorf("PartitionCounts = %v, %v; want one row each", got, err)
	}
}

// A read of refill's own tables shows however it is done: a TID scan and
// an index-only scan count too. (One that parallel workers do alone, with
// parallel_leader_participation off, is counted in the workers and goes
// unseen: see guard.go.)
func TestRefillTablesReadAnyHow(t *testing.T) {
	h := setup(t)
	ctx := t.Context()
	w := h.Warehouse.(*postgres.Warehouse)
	h.Exec(t, "CREATE TABLE t (day date, n integer)")
	ref := refill.TableRef{Table: "t", Column: "day", Grain: refill.GrainDay}
	err := w.Transact(ctx, func(tx refill.WarehouseTx) error {
		_, err := tx.MarkPublished(ctx, "plan-1", "t", "2026-11-01")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	h.Exec(t, "VACUUM refill_published") // all visible: an index-only scan reads no heap
	for _, job := range []string{
		"SELECT * FROM refill_published WHERE ctid = '(0,1)'",
		"SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; SELECT plan_id FROM refill_published WHERE plan_id = 'plan-1'",
		"SELECT count(*) FROM (SELECT * FROM refill_published) p, t",
	} {
		err := w.Rehearse(ctx, func(tx refill.WarehouseTx) error { return tx.ExecSQL(ctx, ref, job, "2026-11-01") })
		var refused *sqltext.RefusedError
		if !errors.As(err, &refused) || !strings.Contains(err.Error(), "read refill's own table refill_published") {
			t.Errorf("%q: error = %v, want a refusal of the read", job, err)
		}
	}
}
