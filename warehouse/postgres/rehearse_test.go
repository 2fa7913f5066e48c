package postgres_test

import (
	"errors"
	"testing"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/internal/pgtest"
	"github.com/refill-dev/refill/warehouse/postgres"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// A rehearsal's connection is closed, not pooled: session state that a
// rollback keeps, such as a session advisory lock, goes with it.
func TestRehearseDropsSessionState(t *testing.T) {
	h := setup(t)
	w := h.Warehouse.(*postgres.Warehouse)
	ctx := t.Context()
	h.Exec(t, "CREATE TABLE t (day date, n integer)")
	ref := refill.TableRef{Table: "t", Column: "day", Grain: refill.GrainDay}
	err := w.Rehearse(ctx, func(tx refill.WarehouseTx) error {
		return tx.ExecSQL(ctx, ref, "SELECT pg_advisory_lock(4242); PREPARE leftover AS SELECT 1", "2026-11-02")
	})
	if err != nil {
		t.Fatal(err)
	}
	other, err := postgres.Open(ctx, pgtest.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	// The server ends a closed session's backend a moment after the client
	// has gone, so the lock is waited for (an event), up to a bound no
	// pooled session would ever reach.
	conn, err := other.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET lock_timeout = '20s'"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(4242)"); err != nil {
		t.Fatalf("the rehearsal's session lock outlived it: %v", err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock(4242)"); err != nil {
		t.Fatal(err)
	}
}

// The DSN's exec mode does not let a job statement carry a second one: each
// statement goes through the extended protocol.
func TestExecSQLSimpleProtocol(t *testing.T) {
	w, err := postgres.Open(t.Context(), pgtest.Schema(t)+"&default_query_exec_mode=simple_protocol")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx := t.Context()
	if _, err := w.Pool().Exec(ctx, "CREATE TABLE t (day date, n integer); INSERT INTO t VALUES ('2026-11-02', 1)"); err != nil {
		t.Fatal(err)
	}
	ref := refill.TableRef{Table: "t", Column: "day", Grain: refill.GrainDay}
	err = w.Rehearse(ctx, func(tx refill.WarehouseTx) error {
		return tx.ExecSQL(ctx, ref, "UPDATE t SET n = 2 WHERE day = :partition", "2026-11-02")
	})
	if err != nil {
		t.Fatal(err)
	}
	// PostgreSQL itself refuses a COMMIT, however the text hides it.
	for _, job := range []string{"UPDATE t SET n = 3; DO $$ BEGIN COMMIT; END $$", "UPDATE t SET n = 3; COMMIT"} {
		err = w.Transact(ctx, func(tx refill.WarehouseTx) error {
			return tx.ExecSQL(ctx, ref, job, "2026-11-02")
		})
		var refused *sqltext.RefusedError
		if !errors.As(err, &refused) || !errors.Is(err, refill.ErrBadInput) {
			t.Errorf("%q: error = %v, want PostgreSQL to refuse it", job, err)
		}
	}
	var n int
	if err := w.Pool().QueryRow(ctx, "SELECT n FROM t").Scan(&n); err != nil || n != 1 {
		t.Errorf("n = %d, %v; want 1, untouched", n, err)
	}
}

// A digest depends on the rows alone: not on the connection's settings, and
// not on settings a job changes between two builds of a proof.
func TestDigestIgnoresSettings(t *testing.T) {
	dsn := pgtest.Schema(t)
	ctx := t.Context()
	var digests []refill.Digest
	for i, tz := range []string{"Asia/Kolkata", "America/St_Johns"} {
		w, err := postgres.Open(ctx, dsn+"&timezone="+tz)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if i == 0 {
			if _, err := w.Pool().Exec(ctx, `CREATE TABLE t (day date, at timestamptz, f double precision, b bytea, i interval, m money);
				INSERT INTO t VALUES ('2026-11-02', '2026-11-02 13:45:00.123456+00', 0.1, '\x00ff', '1 day 2 hours', 12.5)`); err != nil {
				t.Fatal(err)
			}
		}
		ref := refill.TableRef{Table: "t", Column: "day", Grain: refill.GrainDay}
		d, err := w.Digest(ctx, ref, "2026-11-02")
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d)
		err = w.Rehearse(ctx, func(tx refill.WarehouseTx) error {
			before, err := tx.Digest(ctx, ref, "2026-11-02")
			if err != nil {
				return err
			}
			if err := tx.ExecSQL(ctx, ref, `SET TimeZone = 'Pacific/Chatham'; SET DateStyle = 'SQL, DMY'; SET extra_float_digits = 3;
				SET IntervalStyle = 'iso_8601'; SET bytea_output = 'escape'`, "2026-11-02"); err != nil {
				return err
			}
			after, err := tx.Digest(ctx, ref, "2026-11-02")
			if err != nil {
				return err
			}
			if after != before {
				t.Errorf("the job's settings changed the digest: %v, then %v", before, after)
			}
			// And the digest gave the job its settings back (but for
			// TimeZone, which is UTC whenever a job starts).
			return tx.ExecSQL(ctx, ref, `DO $$ BEGIN IF current_setting('TimeZone') <> 'UTC' OR current_setting('extra_float_digits') <> '3' THEN
				RAISE EXCEPTION 'settings after the digest: %, %', current_setting('TimeZone'), current_setting('extra_float_digits'); END IF; END $$`, "2026-11-02")
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if digests[0] != digests[1] || digests[0].Rows != 1 {
		t.Errorf("digests under two time zones: %v and %v, want one and the same", digests[0], digests[1])
	}
}
