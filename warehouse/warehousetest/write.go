package warehousetest

import (
	"context"
	"errors"
	"testing"

	"github.com/refill-dev/refill"
)

func exerciseWrite(t *testing.T, setup func(t *testing.T) (*Harness, context.Context)) {
	t.Run("TransactCommitsOrNothing", func(t *testing.T) {
		h, ctx := setup(t)
		tr, ok := h.Warehouse.(refill.Transactor)
		if !ok {
			t.Fatalf("%T does not implement refill.Transactor", h.Warehouse)
		}
		r := rehearserOf(t, h)
		h.Exec(t, "CREATE TABLE w (day DATE, n INTEGER)")
		h.Exec(t, "INSERT INTO w (day, n) VALUES ('2026-11-01', 1), ('2026-11-01', 2), ('2026-11-02', 3)")
		h.Exec(t, "CREATE TABLE w_src (day DATE, n INTEGER)")
		h.Exec(t, "INSERT INTO w_src (day, n) VALUES ('2026-11-01', 10), ('2026-11-01', 20)")
		ref := refill.TableRef{Table: "w", Column: "day", Grain: refill.GrainDay}
		before := digestOf(t, ctx, r, ref, "2026-11-01")
		boom := errors.New("boom")
		err := tr.Transact(ctx, func(tx refill.WarehouseTx) error {
			if _, err := tx.DeletePartition(ctx, ref, "2026-11-01"); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Transact = %v, want the function's error", err)
		}
		if got := digestOf(t, ctx, r, ref, "2026-11-01"); got != before {
			t.Errorf("a failed transaction changed the partition: %v -> %v", before, got)
		}
		err = tr.Transact(ctx, func(tx refill.WarehouseTx) error {
			_, err := tx.ReplaceFromQuery(ctx, ref, "SELECT day, n FROM w_src WHERE day = :partition", "2026-11-01")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := digestOf(t, ctx, r, ref, "2026-11-01"); got.Rows != 2 || got == before {
			t.Errorf("a committed replace: %v (before %v)", got, before)
		}
	})

	t.Run("PublishMarkCommitsWithItsTransaction", func(t *testing.T) {
		h, ctx := setup(t)
		tr := h.Warehouse.(refill.Transactor)
		mark := func(fail bool) (bool, error) {
			var already bool
			err := tr.Transact(ctx, func(tx refill.WarehouseTx) error {
				var err error
				already, err = tx.MarkPublished(ctx, "p1", "agg", "2026-11-01")
				if err == nil && fail {
					err = errors.New("rolled back")
				}
				return err
			})
			return already, err
		}
		if _, err := mark(true); err == nil {
			t.Fatal("want the rollback's error")
		}
		if already, err := mark(false); err != nil || already {
			t.Fatalf("after a rolled-back mark: already %v, %v; want a fresh mark", already, err)
		}
		if already, err := mark(false); err != nil || !already {
			t.Errorf("a second mark: already %v, %v; want already", already, err)
		}
	})

	t.Run("ProfileSeesStagedRows", func(t *testing.T) {
		h, ctx := setup(t)
		tr := h.Warehouse.(refill.Transactor)
		h.Exec(t, "CREATE TABLE st (day DATE, a TEXT)")
		h.Exec(t, "INSERT INTO st (day, a) VALUES ('2026-11-01', 'x')")
		h.Exec(t, "CREATE TABLE st_src (day DATE, a TEXT)")
		h.Exec(t, "INSERT INTO st_src (day, a) VALUES ('2026-11-01', NULL), ('2026-11-01', 'y')")
		ref := refill.TableRef{Table: "st", Column: "day", Grain: refill.GrainDay}
		spec := refill.ProfileSpec{NotNull: []string{"a"}}
		stop := errors.New("stop")
		err := tr.Transact(ctx, func(tx refill.WarehouseTx) error {
			if _, err := tx.ReplaceFromQuery(ctx, ref, "SELECT day, a FROM st_src WHERE day = :partition", "2026-11-01"); err != nil {
				return err
			}
			got, err := tx.Profile(ctx, ref, spec, "2026-11-01", "2026-11-01")
			if err != nil {
				return err
			}
			if pr := got["2026-11-01"]; pr.Rows != 2 || pr.Nulls["a"] != 1 {
				t.Errorf("profile inside the transaction: %+v, want the 2 staged rows, 1 null", pr)
			}
			return stop
		})
		if !errors.Is(err, stop) {
			t.Fatal(err)
		}
		p := h.Warehouse.(refill.Profiler)
		got, err := p.Profile(ctx, ref, spec, "2026-11-01", "2026-11-01")
		if err != nil {
			t.Fatal(err)
		}
		if pr := got["2026-11-01"]; pr.Rows != 1 || pr.Nulls["a"] != 0 {
			t.Errorf("outside, after rollback: %+v, want the 1 live row", pr)
		}
	})

	t.Run("SnapshotAndRestoreAreExact", func(t *testing.T) {
		h, ctx := setup(t)
		tr := h.Warehouse.(refill.Transactor)
		r := rehearserOf(t, h)
		h.Exec(t, "CREATE TABLE s (day DATE, a TEXT, n INTEGER, x REAL)")
		h.Exec(t, "INSERT INTO s (day, a, n, x) VALUES ('2026-11-01', 'p', 1, 1.5), ('2026-11-01', NULL, 2, NULL), ('2026-11-01', 'p', 1, 1.5), ('2026-11-02', 'q', 3, 0.25), ('2026-11-03', 'r', 4, 2)")
		ref := refill.TableRef{Table: "s", Column: "day", Grain: refill.GrainDay}
		parts := []string{"2026-11-01", "2026-11-02"}
		before := map[string]refill.Digest{}
		for _, p := range parts {
			before[p] = digestOf(t, ctx, r, ref, p)
		}
		err := tr.Transact(ctx, func(tx refill.WarehouseTx) error { return tx.CopyPartitions(ctx, ref, "s_snap", parts[0], parts[1]) })
		if err != nil {
			t.Fatal(err)
		}
		snap := refill.TableRef{Table: "s_snap", Column: "day", Grain: refill.GrainDay}
		for _, p := range parts {
			if got := digestOf(t, ctx, r, snap, p); got != before[p] {
				t.Errorf("snapshot of %s: %v, want %v", p, got, before[p])
			}
		}
		if got := digestOf(t, ctx, r, snap, "2026-11-03"); got.Rows != 0 {
			t.Errorf("the snapshot copied a partition outside the range: %v", got)
		}
		// A run rewrites the partitions...
		h.Exec(t, "DELETE FROM s WHERE day = '2026-11-01'")
		h.Exec(t, "INSERT INTO s (day, a, n, x) VALUES ('2026-11-01', 'new', 9, 9), ('2026-11-02', 'dup', 3, 0.25)")
		// ...and a rollback restores them exactly.
		err = tr.Transact(ctx, func(tx refill.WarehouseTx) error {
			for _, p := range parts {
				if _, err := tx.RestorePartition(ctx, ref, "s_snap", p); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range parts {
			if got := digestOf(t, ctx, r, ref, p); got != before[p] {
				t.Errorf("restored %s: %v, want %v", p, got, before[p])
			}
		}
		if got := digestOf(t, ctx, r, ref, "2026-11-03"); got.Rows != 1 {
			t.Errorf("restore touched a partition outside the snapshot: %v", got)
		}
	})
}
