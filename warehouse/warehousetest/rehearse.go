package warehousetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
)

// rehearserOf returns the warehouse's Rehearser or fails the test.
func rehearserOf(t *testing.T, h *Harness) refill.Rehearser {
	t.Helper()
	r, ok := h.Warehouse.(refill.Rehearser)
	if !ok {
		t.Fatalf("%T does not implement refill.Rehearser", h.Warehouse)
	}
	return r
}

// digestOf returns a partition's digest or fails the test.
func digestOf(t *testing.T, ctx context.Context, d interface {
	Digest(context.Context, refill.TableRef, string) (refill.Digest, error)
}, ref refill.TableRef, partition string) refill.Digest {
	t.Helper()
	dg, err := d.Digest(ctx, ref, partition)
	if err != nil {
		t.Fatalf("Digest(%s, %s): %v", ref.Table, partition, err)
	}
	if sum := dg.Sum(); len(sum) != 16 || strings.Trim(sum, "0123456789abcdef") != "" || dg.Version() < refill.DigestV1 ||
		(dg.Version() == refill.DigestV1) != (sum == dg.Checksum) {
		t.Fatalf("Digest(%s, %s): checksum %q is not 16 lower-case hex digits with a version mark (or none for version 1)", ref.Table, partition, dg.Checksum)
	}
	return dg
}

func exerciseDigest(t *testing.T, setup func(t *testing.T) (*Harness, context.Context)) {
	t.Run("Digest", func(t *testing.T) {
		h, ctx := setup(t)
		r := rehearserOf(t, h)
		rows := []string{"('2026-11-01', 'ada', 'x', 1)", "('2026-11-01', 'bob', 'y', 2)", "('2026-11-01', 'cyd', NULL, 3)", "('2026-11-02', 'dee', 'z', 4)"}
		table := func(name string, rows ...string) refill.TableRef {
			h.Exec(t, "CREATE TABLE "+name+" (day DATE, a TEXT, b TEXT, n INTEGER)")
			if len(rows) > 0 {
				h.Exec(t, "INSERT INTO "+name+" (day, a, b, n) VALUES "+strings.Join(rows, ", "))
			}
			return refill.TableRef{Table: name, Column: "day", Grain: refill.GrainDay}
		}
		forward := digestOf(t, ctx, r, table("t_forward", rows...), "2026-11-01")
		backward := digestOf(t, ctx, r, table("t_backward", rows[3], rows[2], rows[1], rows[0]), "2026-11-01")
		if forward != backward || forward.Rows != 3 {
			t.Errorf("the same rows in another order: %v and %v, want equal with 3 rows", forward, backward)
		}
		// Another partition's rows do not count.
		if other := digestOf(t, ctx, r, table("t_other", rows[:3]...), "2026-11-01"); other != forward {
			t.Errorf("without 2026-11-02's row: %v, want %v", other, forward)
		}
		dup := digestOf(t, ctx, r, table("t_dup", append([]string{rows[0]}, rows...)...), "2026-11-01")
		if dup.Rows != 4 || dup.Checksum == forward.Checksum {
			t.Errorf("a duplicated row: %v, want 4 rows and a checksum other than %s", dup, forward.Checksum)
		}
		// Two pairs of equal rows would cancel out under XOR.
		twice := digestOf(t, ctx, r, table("t_twice", rows[0], rows[0], rows[1], rows[1]), "2026-11-01")
		none := digestOf(t, ctx, r, table("t_empty"), "2026-11-01")
		if twice.Checksum == none.Checksum {
			t.Errorf("two pairs of duplicates sum to the empty checksum %s", none.Checksum)
		}
		if none.Rows != 0 || none.Sum() != "0000000000000000" || !none.Comparable(forward) {
			t.Errorf("empty partition: %v, want 0 rows, checksum 0000000000000000 of the version of %s", none, forward.Checksum)
		}

		distinct := map[string][]string{
			"null text":    {"('2026-11-01', NULL, 'x', 1)"},
			"empty text":   {"('2026-11-01', '', 'x', 1)"},
			"zero text":    {"('2026-11-01', '0', 'x', 1)"},
			"null int":     {"('2026-11-01', 'a', 'x', NULL)"},
			"zero int":     {"('2026-11-01', 'a', 'x', 0)"},
			"ab c":         {"('2026-11-01', 'ab', 'c', 1)"},
			"a bc":         {"('2026-11-01', 'a', 'bc', 1)"},
			"swapped rows": {"('2026-11-01', 'ada', 'y', 1)", "('2026-11-01', 'bob', 'x', 2)"},
			"rows":         {"('2026-11-01', 'ada', 'x', 1)", "('2026-11-01', 'bob', 'y', 2)"},
		}
		seen := map[string]string{}
		i := 0
		for name, rows := range distinct {
			i++
			dg := digestOf(t, ctx, r, table(fmt.Sprintf("d%d", i), rows...), "2026-11-01")
			if other, ok := seen[dg.Checksum]; ok {
				t.Errorf("%s and %s have the same checksum %s", name, other, dg.Checksum)
			}
			seen[dg.Checksum] = name
		}

		if _, err := r.Digest(ctx, refill.TableRef{Table: "nope", Column: "day", Grain: refill.GrainDay}, "2026-11-01"); !errors.Is(err, refill.ErrNoTable) {
			t.Errorf("missing table: error = %v, want ErrNoTable", err)
		}
		if _, err := r.Digest(ctx, refill.TableRef{Table: "t_forward", Column: "day", Grain: refill.GrainDay}, "2026-13-01"); !errors.Is(err, refill.ErrBadInput) {
			t.Errorf("bad partition: error = %v, want bad input", err)
		}
	})
}

// snapshot is what a rehearsal must leave unchanged: every partition's
// digest, and the row count of every partition.
type snapshot struct {
	digests map[string]refill.Digest
	counts  map[string]int64
}

func takeSnapshot(t *testing.T, ctx context.Context, h *Harness, ref refill.TableRef) snapshot {
	t.Helper()
	counts, err := h.Warehouse.PartitionCounts(ctx, ref, "2026-01-01", "2026-12-31")
	if err != nil {
		t.Fatal(err)
	}
	s := snapshot{digests: map[string]refill.Digest{}, counts: counts}
	for _, p := range []string{"2026-10-31", "2026-11-01", "2026-11-02", "2026-11-03"} {
		s.digests[p] = digestOf(t, ctx, rehearserOf(t, h), ref, p)
	}
	return s
}

func (s snapshot) String() string { return fmt.Sprintf("counts %v, digests %v", s.counts, s.digests) }

// wantUnchanged fails the test unless the warehouse is as before.
func wantUnchanged(t *testing.T, ctx context.Context, h *Harness, ref refill.TableRef, before snapshot, after string) {
	t.Helper()
	if now := takeSnapshot(t, ctx, h, ref); now.String() != before.String() {
		t.Errorf("after %s the warehouse changed:\nbefore %v\nafter  %v", after, before, now)
	}
}

func exerciseRehearse(t *testing.T, setup func(t *testing.T) (*Harness, context.Context)) {
	// totals is rebuilt from orders: one row per customer and day.
	totals := refill.TableRef{Table: "totals", Column: "day", Grain: refill.GrainDay}
	const totalsQuery = `SELECT customer, sum(amount) AS amount, :partition AS day
		FROM orders WHERE order_date = :partition GROUP BY customer -- by customer`
	loadTotals := func(t *testing.T, h *Harness) {
		loadOrders(t, h)
		// Stale totals: 2026-11-01's are wrong, 2026-11-03's are missing.
		h.Exec(t, "CREATE TABLE totals (day DATE, customer TEXT, amount NUMERIC, PRIMARY KEY (day, customer))")
		h.Exec(t, `INSERT INTO totals (day, customer, amount) VALUES
			('2026-10-31', 'ada', 30), ('2026-11-01', 'ada', 99), ('2026-11-01', 'bob', 15)`)
	}

	t.Run("RehearseReplaceFromQuery", func(t *testing.T) {
		h, ctx := setup(t)
		loadTotals(t, h)
		r := rehearserOf(t, h)
		before := takeSnapshot(t, ctx, h, totals)
		var inside refill.Digest
		err := r.Rehearse(ctx, func(tx refill.WarehouseTx) error {
			n, err := tx.ReplaceFromQuery(ctx, totals, totalsQuery, "2026-11-01")
			if err != nil {
				return err
			}
			if n != 2 {
				t.Errorf("ReplaceFromQuery inserted %d rows, want 2", n)
			}
			inside = digestOf(t, ctx, tx, totals, "2026-11-01")
			// A clean rebuild by hand, in the same transaction, gives
			// the same digest: the digest sees the rows, not the way
			// they were written.
			if _, err := tx.DeletePartition(ctx, totals, "2026-11-01"); err != nil {
				return err
			}
			if err := tx.ExecSQL(ctx, totals, "INSERT INTO totals (day, customer, amount) VALUES ('2026-11-01', 'bob', 15), ('2026-11-01', 'ada', 5)", "2026-11-01"); err != nil {
				return err
			}
			if byHand := digestOf(t, ctx, tx, totals, "2026-11-01"); byHand != inside {
				t.Errorf("rebuilt by hand: %v; by the query: %v", byHand, inside)
			}
			n, err = tx.ReplaceFromQuery(ctx, totals, totalsQuery, "2026-11-03")
			if err != nil || n != 1 {
				t.Errorf("ReplaceFromQuery into an empty partition: %d, %v; want 1", n, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if inside.Rows != 2 || inside == before.digests["2026-11-01"] {
			t.Errorf("digest inside the rehearsal %v; before %v: want 2 rows and a new checksum", inside, before.digests["2026-11-01"])
		}
		wantUnchanged(t, ctx, h, totals, before, "a rehearsal")
	})

	t.Run("RehearseReplaceFromQueryErrors", func(t *testing.T) {
		h, ctx := setup(t)
		loadTotals(t, h)
		r := rehearserOf(t, h)
		before := takeSnapshot(t, ctx, h, totals)
		for query, mention := range map[string][]string{
			"SELECT customer, sum(amount) AS total, :partition AS day FROM orders GROUP BY customer": {"total", "totals"},
			"SELECT customer, :partition AS day FROM orders; DELETE FROM totals":                     {"more than one statement"},
			"SELECT customer, customer AS customer, :partition AS day FROM orders":                   {"customer"},
		} {
			err := r.Rehearse(ctx, func(tx refill.WarehouseTx) error {
				_, err := tx.ReplaceFromQuery(ctx, totals, query, "2026-11-01")
				return err
			})
			if !errors.Is(err, refill.ErrBadInput) {
				t.Errorf("ReplaceFromQuery(%q): error = %v, want bad input", query, err)
				continue
			}
			for _, m := range mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("ReplaceFromQuery(%q): error %q does not mention %q", query, err, m)
				}
			}
		}
		// A query the warehouse refuses is the job's failure.
		err := r.Rehearse(ctx, func(tx refill.WarehouseTx) error {
			_, err := tx.ReplaceFromQuery(ctx, totals, "SELECT no_such_column AS customer FROM orders WHERE order_date = :partition", "2026-11-01")
			return err
		})
		if err == nil || errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), "no_such_column") {
			t.Errorf("a failing query: error = %v, want a job failure naming no_such_column", err)
		}
		wantUnchanged(t, ctx, h, totals, before, "failed rehearsals")
	})

	t.Run("RehearseExecSQL", func(t *testing.T) {
		h, ctx := setup(t)
		loadTotals(t, h)
		r := rehearserOf(t, h)
		before := takeSnapshot(t, ctx, h, totals)
		job := `-- rebuild one day
			DELETE FROM totals WHERE day = :partition;
			INSERT INTO totals (day, customer, amount)
			SELECT order_date, customer, sum(amount) FROM orders
			WHERE order_date = :partition AND customer <> ':partition' GROUP BY order_date, customer;`
		err := r.Rehearse(ctx, func(tx refill.WarehouseTx) error {
			if err := tx.ExecSQL(ctx, totals, job, "2026-11-01"); err != nil {
				return err
			}
			sqlJob := digestOf(t, ctx, tx, totals, "2026-11-01")
			if _, err := tx.ReplaceFromQuery(ctx, totals, totalsQuery, "2026-11-01"); err != nil {
				return err
			}
			if query := digestOf(t, ctx, tx, totals, "2026-11-01"); query != sqlJob || sqlJob.Rows != 2 {
				t.Errorf("the sql job wrote %v, the query job %v: want the same 2 rows", sqlJob, query)
			}
			if d := digestOf(t, ctx, tx, totals, "2026-10-31"); d != before.digests["2026-10-31"] {
				t.Errorf("another partition changed: %v, was %v", d, before.digests["2026-10-31"])
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		wantUnchanged(t, ctx, h, totals, before, "a rehearsal")
	})

	t.Run("RehearseExecSQLErrors", func(t *testing.T) {
		h, ctx := setup(t)
		loadTotals(t, h)
		r := rehearserOf(t, h)
		before := takeSnapshot(t, ctx, h, totals)
		// refill owns the transaction: a job that commits is refused
		// before anything runs.
		for _, job := range []string{
			"DELETE FROM totals; COMMIT; DELETE FROM orders",
			"DELETE FROM totals; END",
			"ROLLBACK; DELETE FROM totals",
		} {
			err := r.Rehearse(ctx, func(tx refill.WarehouseTx) error { return tx.ExecSQL(ctx, totals, job, "2026-11-01") })
			if !errors.Is(err, refill.ErrBadInput) {
				t.Errorf("ExecSQL(%q): error = %v, want bad input", job, err)
			}
		}
		err := r.Rehearse(ctx, func(tx refill.WarehouseTx) error {
			return tx.ExecSQL(ctx, totals, "DELETE FROM totals WHERE day = :partition;\nINSERT INTO totals (day, customer) VALUES (:partition, 'ada'), (:partition, 'ada')", "2026-11-01")
		})
		if err == nil || errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), "statement 2 of 2") || !strings.Contains(err.Error(), "2026-11-01") {
			t.Errorf("a failing statement: error = %v, want a job failure naming statement 2 of 2 and the partition", err)
		}
		wantUnchanged(t, ctx, h, totals, before, "failed rehearsals")
	})

	t.Run("RehearseInterrupted", func(t *testing.T) {
		// An interrupted proof: fn writes, then fails, is cancelled or
		// panics. Each time the warehouse is left exactly as it was.
		h, ctx := setup(t)
		loadTotals(t, h)
		r := rehearserOf(t, h)
		before := takeSnapshot(t, ctx, h, totals)
		write := func(tx refill.WarehouseTx) {
			if _, err := tx.DeletePartition(ctx, totals, "2026-10-31"); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.ReplaceFromQuery(ctx, totals, totalsQuery, "2026-11-01"); err != nil {
				t.Fatal(err)
			}
		}

		failed := errors.New("proof failed halfway")
		err := r.Rehearse(ctx, func(tx refill.WarehouseTx) error {
			write(tx)
			return failed
		})
		if !errors.Is(err, failed) {
			t.Errorf("Rehearse returned %v, want fn's error", err)
		}
		wantUnchanged(t, ctx, h, totals, before, "a rehearsal that failed")

		cctx, cancel := context.WithCancel(ctx)
		err = r.Rehearse(cctx, func(tx refill.WarehouseTx) error {
			write(tx)
			cancel()
			_, err := tx.ReplaceFromQuery(cctx, totals, totalsQuery, "2026-11-02")
			return err
		})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Rehearse returned %v, want context.Canceled", err)
		}
		wantUnchanged(t, ctx, h, totals, before, "a cancelled rehearsal")

		// Cancelled in the middle of a long statement: the driver
		// interrupts it, and the rehearsal still ends rolled back.
		cctx, cancel = context.WithCancel(ctx)
		err = r.Rehearse(cctx, func(tx refill.WarehouseTx) error {
			write(tx)
			time.AfterFunc(100*time.Millisecond, cancel)
			return tx.ExecSQL(cctx, totals, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000000)
				INSERT INTO totals (day, customer, amount) SELECT :partition, 'c' || i, i FROM n`, "2026-11-02")
		})
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Rehearse cancelled mid-statement returned %v, want context.Canceled", err)
		}
		wantUnchanged(t, ctx, h, totals, before, "a rehearsal cancelled mid-statement")

		func() {
			defer func() {
				if p := recover(); p != "boom" {
					t.Errorf("recovered %v, want the panic to go on", p)
				}
			}()
			_ = r.Rehearse(ctx, func(tx refill.WarehouseTx) error {
				write(tx)
				panic("boom")
			})
		}()
		wantUnchanged(t, ctx, h, totals, before, "a rehearsal that panicked")

		// And the warehouse still takes writes: no lock or transaction
		// was left behind.
		h.Exec(t, "INSERT INTO totals (day, customer, amount) VALUES ('2026-11-02', 'eve', 1)")
		if d := digestOf(t, ctx, r, totals, "2026-11-02"); d.Rows != 1 {
			t.Errorf("after the rehearsals a write made %v, want 1 row", d)
		}
	})

	t.Run("RehearseCatchesNonIdempotentJobs", func(t *testing.T) {
		// What proofs are for: an sql job that appends instead of
		// replacing doubles its partition when run twice, and one that
		// skips conflicting keys keeps stale rows. Both show in the digest.
		h, ctx := setup(t)
		loadTotals(t, h)
		r := rehearserOf(t, h)
		before := takeSnapshot(t, ctx, h, totals)
		h.Exec(t, "CREATE TABLE log (day DATE, customer TEXT, amount NUMERIC)")
		logRef := refill.TableRef{Table: "log", Column: "day", Grain: refill.GrainDay}
		appendJob := "INSERT INTO log SELECT order_date, customer, amount FROM orders WHERE order_date = :partition"
		ignore := "INSERT OR IGNORE INTO totals (day, customer, amount) SELECT order_date, customer, sum(amount) FROM orders WHERE order_date = :partition GROUP BY order_date, customer"
		if h.Warehouse.Driver() == "postgres" {
			ignore = "INSERT INTO totals (day, customer, amount) SELECT order_date, customer, sum(amount) FROM orders WHERE order_date = :partition GROUP BY order_date, customer ON CONFLICT DO NOTHING"
		}
		err := r.Rehearse(ctx, func(tx refill.WarehouseTx) error {
			if err := tx.ExecSQL(ctx, logRef, appendJob, "2026-11-01"); err != nil {
				return err
			}
			once := digestOf(t, ctx, tx, logRef, "2026-11-01")
			if err := tx.ExecSQL(ctx, logRef, appendJob, "2026-11-01"); err != nil {
				return err
			}
			twice := digestOf(t, ctx, tx, logRef, "2026-11-01")
			if once.Rows != 3 || twice.Rows != 6 || twice.Checksum == once.Checksum {
				t.Errorf("an appending job run twice: %v then %v, want 3 then 6 rows", once, twice)
			}

			if err := tx.ExecSQL(ctx, totals, ignore, "2026-11-01"); err != nil {
				return err
			}
			stale := digestOf(t, ctx, tx, totals, "2026-11-01")
			if _, err := tx.ReplaceFromQuery(ctx, totals, totalsQuery, "2026-11-01"); err != nil {
				return err
			}
			fresh := digestOf(t, ctx, tx, totals, "2026-11-01")
			if stale != before.digests["2026-11-01"] || stale == fresh || stale.Rows != fresh.Rows {
				t.Errorf("INSERT ignoring conflicts left %v (before %v); a real rebuild gives %v: want the stale rows kept, the same count, another checksum",
					stale, before.digests["2026-11-01"], fresh)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		wantUnchanged(t, ctx, h, totals, before, "a rehearsal")
		if d := digestOf(t, ctx, r, logRef, "2026-11-01"); d.Rows != 0 {
			t.Errorf("log after the rehearsal: %v, want empty", d)
		}
	})
}
