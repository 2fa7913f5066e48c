package warehousetest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// revenue is the table the job-guard tests rebuild.
var revenue = refill.TableRef{Table: "revenue_daily", Column: "day", Grain: refill.GrainDay}

// loadRevenue creates revenue_daily, with rows on three days, and
// revenue_src, from which an honest job rebuilds a day.
func loadRevenue(t *testing.T, h *Harness) {
	t.Helper()
	h.Exec(t, "CREATE TABLE revenue_daily (day DATE, region TEXT, amount NUMERIC, PRIMARY KEY (day, region))")
	h.Exec(t, `INSERT INTO revenue_daily (day, region, amount) VALUES
		('2026-10-31', 'eu', 1), ('2026-11-01', 'eu', 2), ('2026-11-01', 'us', 3), ('2026-11-02', 'eu', 4)`)
	h.Exec(t, "CREATE TABLE revenue_src (day DATE, region TEXT, amount NUMERIC)")
	h.Exec(t, `INSERT INTO revenue_src (day, region, amount) VALUES
		('2026-11-01', 'eu', 20), ('2026-11-01', 'us', 30), ('2026-11-01', 'apac', 40), ('2026-11-02', 'us', 50)`)
}

// HostileJob is an sql job that tries to end, control or leave refill's
// transaction. Each deletes rows first, so that a job that got out would
// show in the table.
type HostileJob struct {
	Name string
	SQL  string
	// Control: the job tries transaction control, which every driver must
	// refuse as a *sqltext.RefusedError. The others must fail, as a
	// refusal or as an error of the warehouse's own (ATTACH is not
	// PostgreSQL).
	Control bool
}

// HostileJobs returns the hostile sql jobs every driver must refuse.
// attach is a path that a job tries to attach as a database; it must not
// exist afterwards.
func HostileJobs(attach string) []HostileJob {
	return []HostileJob{
		// Fooled refill's statement splitter into one SELECT: "temp
		// trigger" looked like the start of a trigger body. As found it
		// is not PostgreSQL (a subquery needs a name there), so it is
		// also here with one.
		{"splitter-fooling", "SELECT temp trigger, 1 AS begin FROM (SELECT 1 AS temp); COMMIT; DELETE FROM revenue_daily; BEGIN;", false},
		{"splitter-fooling, named", "SELECT temp trigger, 1 AS begin FROM (SELECT 1 AS temp) AS x; COMMIT; DELETE FROM revenue_daily; BEGIN;", true},
		{"commit", "DELETE FROM revenue_daily WHERE day = :partition; COMMIT", true},
		{"commit then more", "DELETE FROM revenue_daily WHERE day = :partition;\nCOMMIT;\nDELETE FROM revenue_daily", true},
		{"rollback", "DELETE FROM revenue_daily; ROLLBACK; DELETE FROM revenue_daily", true},
		{"end", "DELETE FROM revenue_daily; END; DELETE FROM revenue_daily", true},
		{"commit and begin", "DELETE FROM revenue_daily; COMMIT; BEGIN; DELETE FROM revenue_daily", true},
		{"start transaction", "COMMIT; START TRANSACTION; DELETE FROM revenue_daily", true},
		{"savepoint", "SAVEPOINT s; DELETE FROM revenue_daily; RELEASE s", true},
		{"release", "DELETE FROM revenue_daily; RELEASE SAVEPOINT refill_spoil", true},
		{"rollback to", "DELETE FROM revenue_daily; ROLLBACK TO SAVEPOINT refill_digest", true},
		{"attach", "ATTACH DATABASE '" + attach + "' AS s; CREATE TABLE s.approvals (id INTEGER); DELETE FROM revenue_daily", false},
		{"pragma", "PRAGMA writable_schema = ON; DELETE FROM revenue_daily", false},
		// Escapes a DO block quoted with $$, or with a guessable tag.
		{"do-block escape", "DELETE FROM revenue_daily; END $$; COMMIT; DO $$ BEGIN", false},
		{"tagged do-block escape", "DELETE FROM revenue_daily; END $refill$; COMMIT; DO $refill$ BEGIN", false},
		{"nested do", "DELETE FROM revenue_daily; DO $$ BEGIN COMMIT; END $$", false},
	}
}

func exerciseGuard(t *testing.T, setup func(t *testing.T) (*Harness, context.Context)) {
	t.Run("HostileSQLJobsAreRefused", func(t *testing.T) {
		h, ctx := setup(t)
		tr := h.Warehouse.(refill.Transactor)
		r := rehearserOf(t, h)
		loadRevenue(t, h)
		before := takeSnapshot(t, ctx, h, revenue)
		attach := filepath.Join(t.TempDir(), "state.db")
		for _, job := range HostileJobs(attach) {
			check := func(how string, jobErr, err error) {
				t.Helper()
				if jobErr == nil {
					t.Errorf("%s: %s: the job ran without error", job.Name, how)
					return
				}
				if err == nil {
					t.Errorf("%s: %s: the transaction went on after the job failed", job.Name, how)
				}
				var refused *sqltext.RefusedError
				if job.Control && (!errors.As(jobErr, &refused) || !errors.Is(jobErr, refill.ErrBadInput) ||
					!strings.Contains(jobErr.Error(), "control the transaction") || !strings.Contains(jobErr.Error(), "refuses")) {
					t.Errorf("%s: %s: error = %v, want a refusal saying the job tried to control the transaction", job.Name, how, jobErr)
				}
				wantUnchanged(t, ctx, h, revenue, before, job.Name+" in "+how)
			}
			// As a careless caller would: the job's error is dropped,
			// and more work follows in the same transaction.
			var jobErr, more error
			err := tr.Transact(ctx, func(tx refill.WarehouseTx) error {
				jobErr = tx.ExecSQL(ctx, revenue, job.SQL, "2026-11-01")
				_, more = tx.DeletePartition(ctx, revenue, "2026-11-02")
				return nil
			})
			check("Transact", jobErr, err)
			if jobErr != nil && more == nil {
				t.Errorf("%s: the transaction took more work after the job failed", job.Name)
			}
			err = r.Rehearse(ctx, func(tx refill.WarehouseTx) error {
				jobErr = tx.ExecSQL(ctx, revenue, job.SQL, "2026-11-01")
				return jobErr
			})
			check("Rehearse", jobErr, err)
		}
		if _, err := os.Stat(attach); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a job attached %s: %v", attach, err)
		}
		// Nothing was left open: the warehouse takes writes.
		h.Exec(t, "INSERT INTO revenue_daily (day, region, amount) VALUES ('2026-11-03', 'eu', 5)")
	})

	t.Run("HonestSQLJobsRun", func(t *testing.T) {
		h, ctx := setup(t)
		tr := h.Warehouse.(refill.Transactor)
		loadRevenue(t, h)
		before := takeSnapshot(t, ctx, h, revenue)
		rebuild := "DELETE FROM revenue_daily WHERE day = :partition;\n" +
			"INSERT INTO revenue_daily (day, region, amount) SELECT day, region, amount FROM revenue_src WHERE day = :partition"
		for _, job := range []string{
			rebuild,
			// Transaction words in literals, names and comments are
			// only text.
			"-- COMMIT; BEGIN\n" + rebuild + "; /* ROLLBACK; */ UPDATE revenue_daily SET region = region WHERE region = 'COMMIT; END'",
			// A SELECT, a CTE and reads of other tables (and its own)
			// anywhere, and an UPDATE inside the partition.
			"WITH s AS (SELECT day, region, amount FROM revenue_src WHERE day = :partition) SELECT count(*) FROM s;\n" +
				"DELETE FROM revenue_daily WHERE day = :partition AND region IN (SELECT region FROM revenue_daily WHERE day = :partition);\n" +
				"INSERT INTO revenue_daily (day, region, amount) WITH s AS (SELECT day, region, amount FROM revenue_src WHERE day = :partition) SELECT day, region, amount FROM s;\n" +
				"UPDATE revenue_daily SET amount = (SELECT max(s.amount) FROM revenue_src s WHERE s.day = revenue_daily.day AND s.region = revenue_daily.region) WHERE day = :partition",
		} {
			for range 2 {
				err := tr.Transact(ctx, func(tx refill.WarehouseTx) error { return tx.ExecSQL(ctx, revenue, job, "2026-11-01") })
				if err != nil {
					t.Fatalf("ExecSQL(%q): %v", job, err)
				}
				wantCounts(t, h, ctx, revenue, "2026-10-31", "2026-11-02", map[string]int64{"2026-10-31": 1, "2026-11-01": 3, "2026-11-02": 1})
				for _, p := range []string{"2026-10-31", "2026-11-02"} {
					if d := digestOf(t, ctx, rehearserOf(t, h), revenue, p); d != before.digests[p] {
						t.Errorf("ExecSQL(%q) changed partition %s: %v, was %v", job, p, d, before.digests[p])
					}
				}
			}
		}
	})

	t.Run("QueryJobOutsidePartition", func(t *testing.T) {
		// A query that returns rows for :partition and the next day would
		// grow the neighbour at every run: it is refused, naming the
		// value, and nothing is written.
		h, ctx := setup(t)
		tr := h.Warehouse.(refill.Transactor)
		r := rehearserOf(t, h)
		loadRevenue(t, h)
		before := takeSnapshot(t, ctx, h, revenue)
		query := "SELECT day, region, amount FROM revenue_src WHERE day = :partition OR day = '2026-11-02'"
		// The neighbour's key is free: the row would go in.
		check := func(how string, err error) {
			t.Helper()
			var out *refill.OutsidePartitionError
			if !errors.As(err, &out) {
				t.Fatalf("%s: error = %v, want an OutsidePartitionError", how, err)
			}
			if out.Value != "2026-11-02" || out.Rows != 1 || out.Partition != "2026-11-01" || out.Table != "revenue_daily" {
				t.Errorf("%s: %+v, want 1 row of 2026-11-02 outside partition 2026-11-01 of revenue_daily", how, *out)
			}
			if !strings.Contains(err.Error(), "2026-11-02") {
				t.Errorf("%s: error %q does not name the row's partition", how, err)
			}
			wantUnchanged(t, ctx, h, revenue, before, how)
		}
		var more error
		check("Transact", tr.Transact(ctx, func(tx refill.WarehouseTx) error {
			_, err := tx.ReplaceFromQuery(ctx, revenue, query, "2026-11-01")
			if err != nil {
				_, more = tx.DeletePartition(ctx, revenue, "2026-10-31")
			}
			return err
		}))
		if more == nil {
			t.Error("the transaction took more work after the job wrote outside its partition")
		}
		check("Rehearse", r.Rehearse(ctx, func(tx refill.WarehouseTx) error {
			_, err := tx.ReplaceFromQuery(ctx, revenue, query, "2026-11-01")
			return err
		}))

		// A query without the partition column fills it with its
		// default (NULL): every row is outside.
		h.Exec(t, "CREATE TABLE loose (day DATE, n NUMERIC)")
		err := r.Rehearse(ctx, func(tx refill.WarehouseTx) error {
			_, err := tx.ReplaceFromQuery(ctx, refill.TableRef{Table: "loose", Column: "day", Grain: refill.GrainDay}, "SELECT amount AS n FROM revenue_src WHERE day = :partition", "2026-11-01")
			return err
		})
		var out *refill.OutsidePartitionError
		if !errors.As(err, &out) || out.Rows != 3 {
			t.Errorf("a query without the partition column: error = %v, want 3 rows outside", err)
		}

		// The honest query still runs, for an hour grain too.
		err = tr.Transact(ctx, func(tx refill.WarehouseTx) error {
			n, err := tx.ReplaceFromQuery(ctx, revenue, "SELECT day, region, amount FROM revenue_src WHERE day = :partition", "2026-11-01")
			if err == nil && n != 3 {
				t.Errorf("ReplaceFromQuery inserted %d rows, want 3", n)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		h.Exec(t, "CREATE TABLE clicks (id INTEGER, ts TIMESTAMP)")
		h.Exec(t, "INSERT INTO clicks (id, ts) VALUES (1, '2026-11-02 13:10:00'), (2, '2026-11-02 14:10:00')")
		h.Exec(t, "CREATE TABLE clicks_src (id INTEGER, ts TIMESTAMP)")
		h.Exec(t, "INSERT INTO clicks_src (id, ts) VALUES (3, '2026-11-02 13:20:00'), (4, '2026-11-02 14:20:00')")
		clicks := refill.TableRef{Table: "clicks", Column: "ts", Grain: refill.GrainHour}
		err = r.Rehearse(ctx, func(tx refill.WarehouseTx) error {
			_, err := tx.ReplaceFromQuery(ctx, clicks, "SELECT id, ts FROM clicks_src", "2026-11-02T13")
			return err
		})
		if !errors.As(err, &out) || out.Rows != 1 || !strings.HasPrefix(out.Value, "2026-11-02") || !strings.Contains(out.Value, "14:20") {
			t.Errorf("an hour's query with a row of the next hour: error = %v, want 1 row at 14:20 outside", err)
		}
	})
}
