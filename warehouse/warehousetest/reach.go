package warehousetest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// rebuild is an honest sql job for revenue_daily: it replaces the partition
// with revenue_src's rows. The jobs below add to it what an sql job must
// not do, so that a job that got away with it would show in the table.
const rebuild = "DELETE FROM revenue_daily WHERE day = :partition;\n" +
	"INSERT INTO revenue_daily (day, region, amount) SELECT day, region, amount FROM revenue_src WHERE day = :partition"

// runJob runs an sql job for ref's partition through Transact and, in a
// rehearsal, through Rehearse, and returns the two errors.
func runJob(t *testing.T, ctx context.Context, h *Harness, ref refill.TableRef, job, partition string) (transact, rehearse error) {
	t.Helper()
	transact = h.Warehouse.(refill.Transactor).Transact(ctx, func(tx refill.WarehouseTx) error {
		return tx.ExecSQL(ctx, ref, job, partition)
	})
	rehearse = rehearserOf(t, h).Rehearse(ctx, func(tx refill.WarehouseTx) error {
		return tx.ExecSQL(ctx, ref, job, partition)
	})
	return transact, rehearse
}

// wantRefused fails the test unless err is a *sqltext.RefusedError, bad
// input, whose message holds every one of mention.
func wantRefused(t *testing.T, err error, job string, mention ...string) {
	t.Helper()
	var refused *sqltext.RefusedError
	if !errors.As(err, &refused) || !errors.Is(err, refill.ErrBadInput) {
		t.Errorf("%q: error = %v, want a refusal", job, err)
		return
	}
	for _, m := range mention {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("%q: refusal %q does not mention %q", job, err, m)
		}
	}
}

// exerciseReach checks what job text may touch: an sql job writes its own
// table's partition and nothing else, changes no schema, and no job uses
// refill's own tables; honest jobs still read what they like.
func exerciseReach(t *testing.T, setup func(t *testing.T) (*Harness, context.Context)) {
	t.Run("SQLJobWritesOnlyItsOwnTable", func(t *testing.T) {
		h, ctx := setup(t)
		loadRevenue(t, h)
		h.Exec(t, "CREATE TABLE billing (day DATE, account TEXT, amount NUMERIC)")
		h.Exec(t, "INSERT INTO billing (day, account, amount) VALUES ('2026-11-01', 'acme', 100), ('2026-11-02', 'acme', 200)")
		billing := refill.TableRef{Table: "billing", Column: "day", Grain: refill.GrainDay}
		src := refill.TableRef{Table: "revenue_src", Column: "day", Grain: refill.GrainDay}
		before := map[refill.TableRef]snapshot{}
		for _, ref := range []refill.TableRef{revenue, billing, src} {
			before[ref] = takeSnapshot(t, ctx, h, ref)
		}
		for job, table := range map[string]string{
			rebuild + ";\nUPDATE billing SET amount = 0":                                                   "billing",
			rebuild + ";\nINSERT INTO billing (day, account, amount) VALUES (:partition, 'mallory', -100)": "billing",
			"DELETE FROM billing WHERE day = :partition;\n" + rebuild:                                      "billing",
			rebuild + ";\nDELETE FROM revenue_src WHERE day = :partition":                                  "revenue_src",
		} {
			transact, rehearse := runJob(t, ctx, h, revenue, job, "2026-11-01")
			for _, err := range []error{transact, rehearse} {
				wantRefused(t, err, job, "write table "+table, "revenue_daily", "own table")
			}
		}
		for ref, s := range before {
			wantUnchanged(t, ctx, h, ref, s, "jobs that wrote "+ref.Table)
		}
	})

	t.Run("SQLJobLeavesRefillTablesAlone", func(t *testing.T) {
		h, ctx := setup(t)
		loadRevenue(t, h)
		tr := h.Warehouse.(refill.Transactor)
		anchor := refill.AuditAnchor{Store: "state", Seq: 7, Hash: "h7"}
		err := tr.Transact(ctx, func(tx refill.WarehouseTx) error {
			if _, err := tx.MarkPublished(ctx, "plan-1", "revenue", "2026-11-01"); err != nil {
				return err
			}
			return tx.Anchor(ctx, anchor)
		})
		if err != nil {
			t.Fatal(err)
		}
		before := takeSnapshot(t, ctx, h, revenue)
		for job, table := range map[string]string{
			rebuild + ";\nDELETE FROM refill_published":                                                                        "refill_published",
			rebuild + ";\nDELETE FROM refill_audit_anchor":                                                                     "refill_audit_anchor",
			rebuild + ";\nUPDATE refill_audit_anchor SET hash = 'forged'":                                                      "refill_audit_anchor",
			"INSERT INTO refill_published (plan_id, dataset, partition) VALUES ('plan-2', 'revenue', :partition);\n" + rebuild: "refill_published",
			// Reading the bookkeeping tells a proof from a real apply.
			"DELETE FROM revenue_daily WHERE day = :partition AND NOT EXISTS (SELECT 1 FROM refill_published WHERE partition = :partition)": "refill_published",
		} {
			transact, rehearse := runJob(t, ctx, h, revenue, job, "2026-11-01")
			for _, err := range []error{transact, rehearse} {
				wantRefused(t, err, job, "refill's own table "+table)
			}
		}
		wantUnchanged(t, ctx, h, revenue, before, "jobs that used refill's tables")

		// A query job may not read them either, when it runs or when it
		// is counted.
		query := "SELECT s.day, s.region, s.amount FROM revenue_src s WHERE s.day = :partition AND NOT EXISTS (SELECT 1 FROM refill_published p WHERE p.partition = CAST(s.day AS TEXT))"
		err = tr.Transact(ctx, func(tx refill.WarehouseTx) error {
			_, err := tx.ReplaceFromQuery(ctx, revenue, query, "2026-11-01")
			return err
		})
		wantRefused(t, err, query, "refill's own table refill_published")
		_, err = h.Warehouse.QueryCounts(ctx, query, []string{"2026-11-01"})
		wantRefused(t, err, query, "refill_published")
		wantUnchanged(t, ctx, h, revenue, before, "a query job that read refill_published")

		// The mark and the anchor are as refill wrote them.
		if got, ok, err := h.Warehouse.(refill.Anchorer).LatestAnchor(ctx, "state"); err != nil || !ok || got != anchor {
			t.Errorf("LatestAnchor = %v, %v, %v; want %v", got, ok, err, anchor)
		}
		err = rehearserOf(t, h).Rehearse(ctx, func(tx refill.WarehouseTx) error {
			for plan, want := range map[string]bool{"plan-1": true, "plan-2": false} {
				already, err := tx.MarkPublished(ctx, plan, "revenue", "2026-11-01")
				if err != nil {
					return err
				}
				if already != want {
					t.Errorf("%s marked published: %v, want %v", plan, already, want)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})

	t.Run("SQLJobChangesNoSchema", func(t *testing.T) {
		h, ctx := setup(t)
		loadRevenue(t, h)
		before := takeSnapshot(t, ctx, h, revenue)
		trigger := "CREATE TRIGGER later AFTER INSERT ON revenue_src BEGIN DELETE FROM revenue_daily; END"
		tempTrigger := "CREATE TEMP TRIGGER later AFTER INSERT ON revenue_daily BEGIN DELETE FROM revenue_daily; END"
		switch h.Warehouse.Driver() {
		case "duckdb":
			// DuckDB has no triggers: its functions are macros.
			trigger = "CREATE MACRO later(a) AS a + 1"
			tempTrigger = "CREATE TEMP MACRO later_t() AS TABLE SELECT * FROM revenue_daily"
		case "postgres":
			trigger = "CREATE FUNCTION later() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN DELETE FROM revenue_daily; RETURN NULL; END $$;\n" +
				"CREATE TRIGGER later AFTER INSERT ON revenue_src FOR EACH STATEMENT EXECUTE FUNCTION later()"
			tempTrigger = "CREATE FUNCTION pg_temp.later() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$"
		}
		for _, ddl := range []string{
			trigger,
			tempTrigger,
			"DROP TABLE revenue_src",
			"CREATE TABLE leftover (a INTEGER)",
			"CREATE TEMP TABLE staging AS SELECT day, region, amount FROM revenue_src",
			"CREATE VIEW leftover_v AS SELECT 1 AS a",
			"CREATE TEMP VIEW leftover_tv AS SELECT 1 AS a",
			"CREATE INDEX leftover_i ON revenue_daily (amount)",
			"ALTER TABLE revenue_src ADD COLUMN leftover INTEGER",
		} {
			job := rebuild + ";\n" + ddl
			transact, rehearse := runJob(t, ctx, h, revenue, job, "2026-11-01")
			for _, err := range []error{transact, rehearse} {
				wantRefused(t, err, job, "schema")
			}
		}
		wantUnchanged(t, ctx, h, revenue, before, "jobs that changed the schema")
		if cols, err := h.Warehouse.Columns(ctx, "revenue_src"); err != nil || len(cols) != 3 {
			t.Errorf("revenue_src after the jobs: %v, %v; want its 3 columns", cols, err)
		}
		for _, name := range []string{"leftover", "leftover_v", "staging"} {
			if _, err := h.Warehouse.Columns(ctx, name); !errors.Is(err, refill.ErrNoTable) {
				t.Errorf("%s after the jobs: %v, want no such table", name, err)
			}
		}
		// No temporary table reached a later job, on any connection.
		job := rebuild + ";\nDELETE FROM revenue_daily WHERE day = :partition AND region IN (SELECT region FROM staging)"
		for _, err := range func() []error { a, b := runJob(t, ctx, h, revenue, job, "2026-11-01"); return []error{a, b} }() {
			if err == nil || !strings.Contains(err.Error(), "staging") {
				t.Errorf("a later job read a temporary table an earlier one tried to make: %v", err)
			}
		}
	})

	t.Run("SQLJobStaysInItsPartition", func(t *testing.T) {
		h, ctx := setup(t)
		loadRevenue(t, h)
		before := takeSnapshot(t, ctx, h, revenue)
		for job, value := range map[string]string{
			// The neighbour's key is free: the row would go in.
			"DELETE FROM revenue_daily WHERE day = :partition;\n" +
				"INSERT INTO revenue_daily (day, region, amount) SELECT day, region, amount FROM revenue_src WHERE day = :partition OR day = '2026-11-02'": "2026-11-02",
			rebuild + ";\nUPDATE revenue_daily SET amount = 0 WHERE day = '2026-11-02'":                         "2026-11-02",
			rebuild + ";\nUPDATE revenue_daily SET day = '2026-11-02' WHERE day = :partition AND region = 'us'": "2026-11-02",
			rebuild + ";\nDELETE FROM revenue_daily WHERE day = '2026-10-31'":                                   "2026-10-31",
			"DELETE FROM revenue_daily WHERE day <> '2026-11-02';\n" + rebuild:                                  "2026-10-31",
		} {
			transact, rehearse := runJob(t, ctx, h, revenue, job, "2026-11-01")
			for _, err := range []error{transact, rehearse} {
				var out *refill.OutsidePartitionError
				if !errors.As(err, &out) || out.Value != value || out.Partition != "2026-11-01" || out.Table != "revenue_daily" || !strings.Contains(err.Error(), value) {
					t.Errorf("%q: error = %v, want a row of %s outside partition 2026-11-01 of revenue_daily", job, err, value)
				}
			}
		}
		wantUnchanged(t, ctx, h, revenue, before, "jobs that wrote outside their partition")

		// An hour, on a timestamp column and on a column of keys.
		h.Exec(t, "CREATE TABLE clicks (id INTEGER, ts TIMESTAMP)")
		h.Exec(t, "INSERT INTO clicks (id, ts) VALUES (1, '2026-11-02 13:10:00'), (2, '2026-11-02 14:10:00')")
		clicks := refill.TableRef{Table: "clicks", Column: "ts", Grain: refill.GrainHour}
		hour := "DELETE FROM clicks WHERE ts >= '2026-11-02 13:00:00' AND ts < '2026-11-02 14:00:00';\nINSERT INTO clicks (id, ts) VALUES (3, '2026-11-02 13:20:00')"
		if transact, rehearse := runJob(t, ctx, h, clicks, hour, "2026-11-02T13"); transact != nil || rehearse != nil {
			t.Errorf("an honest hour: %v, %v", transact, rehearse)
		}
		transact, rehearse := runJob(t, ctx, h, clicks, hour+", (4, '2026-11-02 14:20:00')", "2026-11-02T13")
		for _, err := range []error{transact, rehearse} {
			var out *refill.OutsidePartitionError
			if !errors.As(err, &out) || !strings.HasPrefix(out.Value, "2026-11-02") || !strings.Contains(out.Value, "14:20") {
				t.Errorf("an hour's job with a row of the next hour: error = %v, want the row at 14:20 outside", err)
			}
		}
		h.Exec(t, "CREATE TABLE hourly (id INTEGER, hour TEXT)")
		hourly := refill.TableRef{Table: "hourly", Column: "hour", Grain: refill.GrainHour}
		if transact, rehearse := runJob(t, ctx, h, hourly, "INSERT INTO hourly (id, hour) VALUES (1, :partition)", "2026-11-02T13"); transact != nil || rehearse != nil {
			t.Errorf("an honest hour of keys: %v, %v", transact, rehearse)
		}
		transact, rehearse = runJob(t, ctx, h, hourly, "INSERT INTO hourly (id, hour) VALUES (2, '2026-11-02T14')", "2026-11-02T13")
		for _, err := range []error{transact, rehearse} {
			var out *refill.OutsidePartitionError
			if !errors.As(err, &out) || out.Value != "2026-11-02T14" {
				t.Errorf("an hour's job writing the next hour's key: error = %v, want 2026-11-02T14 outside", err)
			}
		}
	})

	t.Run("PartitionFenceEndsWithTheJob", func(t *testing.T) {
		// In one transaction, as a planner's rehearsal does: jobs for two
		// partitions of one table, with refill's own writes between and
		// after them, all go through.
		h, ctx := setup(t)
		loadRevenue(t, h)
		err := rehearserOf(t, h).Rehearse(ctx, func(tx refill.WarehouseTx) error {
			for _, p := range []string{"2026-11-01", "2026-11-02"} {
				if err := tx.ExecSQL(ctx, revenue, rebuild, p); err != nil {
					return err
				}
				if _, err := tx.DeletePartition(ctx, revenue, "2026-10-31"); err != nil {
					return err
				}
				if _, _, err := tx.Spoil(ctx, revenue, p); err != nil {
					return err
				}
			}
			if _, err := tx.ReplaceFromQuery(ctx, revenue, "SELECT day, region, amount FROM revenue_src WHERE day = :partition", "2026-11-02"); err != nil {
				return err
			}
			return tx.ExecSQL(ctx, revenue, rebuild, "2026-11-01")
		})
		if err != nil {
			t.Fatal(err)
		}
		// Nor does it outlive a committed transaction: other writers are
		// not fenced in.
		err = h.Warehouse.(refill.Transactor).Transact(ctx, func(tx refill.WarehouseTx) error {
			return tx.ExecSQL(ctx, revenue, rebuild, "2026-11-01")
		})
		if err != nil {
			t.Fatal(err)
		}
		h.Exec(t, "UPDATE revenue_daily SET amount = amount + 1")
		h.Exec(t, "DELETE FROM revenue_daily WHERE day = '2026-10-31'")
		wantCounts(t, h, ctx, revenue, "2026-10-31", "2026-11-02", map[string]int64{"2026-11-01": 3, "2026-11-02": 1})
	})
}
