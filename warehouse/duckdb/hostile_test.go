//go:build duckdb

package duckdb_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/duckdb"
	"github.com/refill-dev/refill/warehouse/sqltext"
	"github.com/refill-dev/refill/warehouse/warehousetest"
)

// Jobs written by a hostile insider that got past the DuckDB job guard
// (guard.go) when a review first tried them. Each test states what must
// hold; the comments say how each attack worked before the guard closed it
// (a lexer that ended line comments at \n alone, table functions the plan
// does not see through, checks made before earlier statements ran, pooled
// connections, an unsalted fence).

var hxRevenue = refill.TableRef{Table: "revenue_daily", Column: "day", Grain: refill.GrainDay}

const hxRebuild = "DELETE FROM revenue_daily WHERE day = :partition;\n" +
	"INSERT INTO revenue_daily (day, region, amount) SELECT day, region, amount FROM revenue_src WHERE day = :partition"

type hxFixture struct {
	h   *warehousetest.Harness
	db  *sql.DB
	w   *duckdb.Warehouse
	ctx context.Context
}

// hxSetup is setup(t) with revenue_daily, revenue_src, billing (a table no
// revenue job may write) and refill's own tables holding a mark and an
// anchor.
func hxSetup(t *testing.T) *hxFixture {
	t.Helper()
	h := setup(t)
	w := h.Warehouse.(*duckdb.Warehouse)
	fx := &hxFixture{h: h, db: w.DB(), w: w, ctx: t.Context()}
	for _, q := range []string{
		"CREATE TABLE revenue_daily (day DATE, region TEXT, amount NUMERIC, PRIMARY KEY (day, region))",
		"INSERT INTO revenue_daily VALUES ('2026-10-31', 'eu', 1), ('2026-11-01', 'eu', 2), ('2026-11-01', 'us', 3), ('2026-11-02', 'eu', 4)",
		"CREATE TABLE revenue_src (day DATE, region TEXT, amount NUMERIC)",
		"INSERT INTO revenue_src VALUES ('2026-11-01', 'eu', 20), ('2026-11-01', 'us', 30), ('2026-11-01', 'apac', 40)",
		"CREATE TABLE billing (day DATE, account TEXT, amount NUMERIC)",
		"INSERT INTO billing VALUES ('2026-11-01', 'acme', 100), ('2026-11-02', 'acme', 200)",
	} {
		h.Exec(t, q)
	}
	err := w.Transact(fx.ctx, func(tx refill.WarehouseTx) error {
		if _, err := tx.MarkPublished(fx.ctx, "plan-1", "revenue", "2026-11-01"); err != nil {
			return err
		}
		return tx.Anchor(fx.ctx, refill.AuditAnchor{Store: "state", Seq: 7, Hash: "h7"})
	})
	if err != nil {
		t.Fatal(err)
	}
	return fx
}

// rows renders what a query returns, a line a row.
func (fx *hxFixture) rows(t *testing.T, q string) string {
	t.Helper()
	rows, err := fx.db.QueryContext(fx.ctx, q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var b strings.Builder
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
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return b.String()
}

// exec runs an sql job for revenue_daily's 2026-11-01 through Transact.
func (fx *hxFixture) exec(job string) error {
	return fx.w.Transact(fx.ctx, func(tx refill.WarehouseTx) error {
		return tx.ExecSQL(fx.ctx, hxRevenue, job, "2026-11-01")
	})
}

func hxRefused(err error) bool {
	var refused *sqltext.RefusedError
	return errors.As(err, &refused) && errors.Is(err, refill.ErrBadInput)
}

// DuckDB ends a -- comment at a carriage return as well as at a newline
// (its scanner is PostgreSQL's: non_newline is [^\n\r]); refill's lexer
// ends it only at \n. Text between the \r and the \n is code to DuckDB and
// a comment to WriteTarget, which then names the decoy after the newline:
// the job's own table. UPDATE/DELETE pass the "must scan it" check by
// reading the own table in FROM/USING.
func TestHostileCarriageReturnHidesWriteTarget(t *testing.T) {
	for name, job := range map[string]string{
		"update": "UPDATE -- \rbilling AS\nrevenue_daily SET amount = 0 FROM revenue_daily AS r WHERE true",
		"delete": "DELETE FROM -- \rbilling USING\nrevenue_daily",
		"insert": "INSERT INTO -- \rbilling SELECT * FROM billing AS\nrevenue_daily",
	} {
		t.Run(name, func(t *testing.T) {
			fx := hxSetup(t)
			before := fx.rows(t, "SELECT * FROM billing ORDER BY ALL")
			if got, _ := sqltext.DuckDB.WriteTarget(job); got != "revenue_daily" {
				t.Logf("WriteTarget(%q) = %q", job, got)
			}
			err := fx.exec(job)
			if !hxRefused(err) {
				t.Errorf("%q: error = %v, want a refusal (it writes billing)", job, err)
			}
			if after := fx.rows(t, "SELECT * FROM billing ORDER BY ALL"); after != before {
				t.Errorf("%q wrote billing, committed:\n%s\nnow:\n%s", job, before, after)
			}
		})
	}
}

// json_execute_serialized_sql runs a serialized SELECT as a table function:
// the plan EXPLAIN gives shows JSON_EXECUTE_SERIALIZED_SQL, never the
// tables it reads, so refill's own tables are read in full. So do
// pragma_storage_info's segment statistics (min/max of every column: a
// one-row refill_audit_anchor is given away, hash prefix and all).
func TestHostileReadsRefillTablesThroughTableFunctions(t *testing.T) {
	leak := "json_execute_serialized_sql(json_serialize_sql('SELECT * FROM refill_published'))"
	t.Run("query job", func(t *testing.T) {
		fx := hxSetup(t)
		query := "SELECT CAST(partition AS DATE) AS day, plan_id AS region, 1 AS amount FROM " + leak + " WHERE partition = :partition"
		err := fx.w.Transact(fx.ctx, func(tx refill.WarehouseTx) error {
			_, err := tx.ReplaceFromQuery(fx.ctx, hxRevenue, query, "2026-11-01")
			return err
		})
		if !hxRefused(err) {
			t.Errorf("a query job reading refill_published: error = %v, want a refusal", err)
		}
		if got := fx.rows(t, "SELECT region FROM revenue_daily WHERE region = 'plan-1'"); got != "" {
			t.Errorf("the plan id from refill_published reached revenue_daily: %s", got)
		}
	})
	t.Run("query counts", func(t *testing.T) {
		fx := hxSetup(t)
		query := "SELECT * FROM " + leak + " WHERE partition = :partition"
		counts, err := fx.w.QueryCounts(fx.ctx, query, []string{"2026-11-01", "2026-11-02"})
		if !hxRefused(err) {
			t.Errorf("counting a query reading refill_published: %v, %v; want a refusal", counts, err)
		}
	})
	t.Run("sql job", func(t *testing.T) {
		fx := hxSetup(t)
		// Behaves differently in a proof and in a real apply.
		job := "DELETE FROM revenue_daily WHERE day = :partition AND NOT EXISTS (SELECT 1 FROM " + leak + " p WHERE p.partition = CAST(revenue_daily.day AS VARCHAR))"
		if err := fx.exec(job); !hxRefused(err) {
			t.Errorf("an sql job reading refill_published: error = %v, want a refusal", err)
		}
	})
	t.Run("storage statistics", func(t *testing.T) {
		fx := hxSetup(t)
		query := "SELECT DATE '2026-11-01' AS day, string_agg(stats, ' ') AS region, 1 AS amount FROM pragma_storage_info('refill_audit_anchor') WHERE :partition IS NOT NULL"
		err := fx.w.Transact(fx.ctx, func(tx refill.WarehouseTx) error {
			_, err := tx.ReplaceFromQuery(fx.ctx, hxRevenue, query, "2026-11-01")
			return err
		})
		if !hxRefused(err) {
			t.Errorf("a query job reading refill_audit_anchor's column statistics: error = %v, want a refusal", err)
		}
		if got := fx.rows(t, "SELECT region FROM revenue_daily WHERE region LIKE '%Min: h7%'"); got != "" {
			t.Errorf("refill_audit_anchor's hash reached revenue_daily: %s", got)
		}
	})
}

// A table function's arguments (query, query_table, ...) are evaluated
// when the statement is bound, volatile functions included, and the guard
// binds a statement (Prepare, EXPLAIN) before the job's earlier statements
// run, then it is bound again to run. setseed in an earlier statement makes
// random() at the run's bind a known value, which the guard's bind did not
// see: the plan checked is not the plan run.
func TestHostileBindTimeRandomSwapsPlan(t *testing.T) {
	fx := hxSetup(t)
	// After setseed(0.5) the next random() on the connection is
	// 0.8511131886287325 (DuckDB v1.5.6).
	job := "SELECT setseed(0.5);\n" +
		"DELETE FROM revenue_daily WHERE day = :partition;\n" +
		"INSERT INTO revenue_daily (day, region, amount) SELECT :partition, 'published:' || (SELECT n FROM query(CASE WHEN random() BETWEEN 0.85111318 AND 0.85111319 " +
		"THEN 'SELECT count(*)::VARCHAR AS n FROM refill_published' ELSE 'SELECT ''?'' AS n' END)), 1"
	err := fx.exec(job)
	if got := fx.rows(t, "SELECT region FROM revenue_daily WHERE region LIKE 'published:%'"); strings.TrimSpace(got) == "published:1" {
		t.Errorf("the job read refill_published (error %v): revenue_daily holds %q", err, strings.TrimSpace(got))
	}
	if err == nil {
		t.Errorf("a job whose table function arguments are volatile ran without error")
	}
}

// Some table functions change settings although the configuration is
// locked, and the change stays on the pooled connection (or the whole
// instance) after the job's transaction rolls back: enable_profiling with
// a save_location that external access forbids makes every later statement
// on that connection fail; enable_logging turns on logging globally;
// enable_profiling without one prints every later query of refill to
// stdout.
func TestHostileTableFunctionsChangeSettings(t *testing.T) {
	t.Run("enable_profiling poisons the connection", func(t *testing.T) {
		fx := hxSetup(t)
		job := "SELECT * FROM enable_profiling(save_location := '" + filepath.Join(t.TempDir(), "p.json") + "', format := 'json')"
		_ = fx.w.Rehearse(fx.ctx, func(tx refill.WarehouseTx) error {
			return tx.ExecSQL(fx.ctx, hxRevenue, job, "2026-11-01")
		})
		// A later, honest job and a count.
		if err := fx.exec(hxRebuild); err != nil {
			t.Errorf("an honest job after %q: %v", job, err)
		}
		if _, err := fx.w.QueryCounts(fx.ctx, "SELECT * FROM revenue_src WHERE day = :partition", []string{"2026-11-01"}); err != nil {
			t.Errorf("a count after %q: %v", job, err)
		}
	})
	t.Run("enable_logging", func(t *testing.T) {
		fx := hxSetup(t)
		before := fx.rows(t, "SELECT name, value FROM duckdb_settings() WHERE name LIKE '%logging%' ORDER BY ALL")
		job := "SELECT * FROM enable_logging()"
		err := fx.w.Rehearse(fx.ctx, func(tx refill.WarehouseTx) error {
			return tx.ExecSQL(fx.ctx, hxRevenue, job, "2026-11-01")
		})
		if !hxRefused(err) {
			t.Errorf("%q in a rehearsal: error = %v, want a refusal", job, err)
		}
		if after := fx.rows(t, "SELECT name, value FROM duckdb_settings() WHERE name LIKE '%logging%' ORDER BY ALL"); after != before {
			t.Errorf("%q changed the settings, past the rollback:\n%s\nnow:\n%s", job, before, after)
		}
	})
}

// The fence's row hash is hash(rowid, c1, ..., cn), and DuckDB folds the
// last column in with an XOR of its own hash, which for an integer (or a
// DECIMAL, hashed as its integer) is an invertible function. A job that
// rewrites a row of another partition can pick the value of the last
// column that gives the row back its old hash, and the fence sees nothing.
func TestHostileFenceHashCompensation(t *testing.T) {
	fx := hxSetup(t)
	fx.h.Exec(t, "CREATE TABLE ledger (day DATE, account TEXT, amount NUMERIC, version BIGINT)")
	fx.h.Exec(t, "INSERT INTO ledger VALUES ('2026-10-31', 'acme', 500, 1), ('2026-11-01', 'acme', 10, 1), ('2026-11-02', 'acme', 600, 1)")
	ledger := refill.TableRef{Table: "ledger", Column: "day", Grain: refill.GrainDay}

	// What the insider works out beforehand, on a copy or from the row
	// itself: the row's hash as it is, and the hash of the row wanted
	// (amount 0) with version 0, whose hash is 0.
	var now, wanted uint64
	if err := fx.db.QueryRowContext(fx.ctx, "SELECT hash(rowid, day, account, amount, version), hash(rowid, day, account, 0::DECIMAL(18,3), 0::BIGINT) FROM ledger WHERE day = '2026-10-31'").Scan(&now, &wanted); err != nil {
		t.Fatal(err)
	}
	version := int64(hxUnhashInt64(now ^ wanted))
	var check uint64
	if err := fx.db.QueryRowContext(fx.ctx, "SELECT hash(rowid, day, account, 0::DECIMAL(18,3), $1::BIGINT) FROM ledger WHERE day = '2026-10-31'", version).Scan(&check); err != nil || check != now {
		t.Fatalf("the compensating version does not give the row its hash back (%d, %v): DuckDB's hash changed?", check, err)
	}

	job := "DELETE FROM ledger WHERE day = :partition;\n" +
		"INSERT INTO ledger VALUES (:partition, 'acme', 11, 1);\n" +
		fmt.Sprintf("UPDATE ledger SET amount = 0, version = %d WHERE day = '2026-10-31' AND account = 'acme'", version)
	err := fx.w.Transact(fx.ctx, func(tx refill.WarehouseTx) error {
		return tx.ExecSQL(fx.ctx, ledger, job, "2026-11-01")
	})
	var out *refill.OutsidePartitionError
	if !errors.As(err, &out) {
		t.Errorf("a job that zeroed a row of 2026-10-31: error = %v, want an OutsidePartitionError", err)
	}
	if got := fx.rows(t, "SELECT amount FROM ledger WHERE day = '2026-10-31'"); strings.TrimSpace(got) != "500" {
		t.Errorf("ledger 2026-10-31 amount is now %s, was 500", strings.TrimSpace(got))
	}
}

// hxUnhashInt64 inverts DuckDB's hash of a 64-bit integer (x ^= x>>32;
// x *= K; twice; x ^= x>>32).
func hxUnhashInt64(h uint64) uint64 {
	const kInv = 0xcfee444d8b59a89b // K = 0xd6e8feb86659fd93
	h ^= h >> 32
	h *= kInv
	h ^= h >> 32
	h *= kInv
	h ^= h >> 32
	return h
}
