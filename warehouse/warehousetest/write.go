package warehousetest

import (
	"context"
	"errors"
	"strings"
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

	t.Run("RestoreMatchesColumnsByName", func(t *testing.T) {
		h, ctx := setup(t)
		tr := h.Warehouse.(refill.Transactor)
		r := rehearserOf(t, h)
		h.Exec(t, "CREATE TABLE s (day DATE, note TEXT, n INTEGER)")
		rows := "('2026-11-01', 'p', 1), ('2026-11-01', NULL, 2), ('2026-11-01', 'q', 30)"
		h.Exec(t, "INSERT INTO s (day, note, n) VALUES "+rows+", ('2026-11-02', 'r', 4)")
		ref := refill.TableRef{Table: "s", Column: "day", Grain: refill.GrainDay}
		if err := tr.Transact(ctx, func(tx refill.WarehouseTx) error {
			return tx.CopyPartitions(ctx, ref, "s_snap", "2026-11-01", "2026-11-01")
		}); err != nil {
			t.Fatal(err)
		}
		// The table is rebuilt with its columns in another order, and one
		// more; its partition is rewritten.
		h.Exec(t, "DROP TABLE s")
		h.Exec(t, "CREATE TABLE s (n INTEGER, extra TEXT, note TEXT, day DATE)")
		h.Exec(t, "INSERT INTO s (n, note, day) VALUES (9, 'new', '2026-11-01'), (4, 'r', '2026-11-02')")
		h.Exec(t, "CREATE TABLE s_want (n INTEGER, extra TEXT, note TEXT, day DATE)")
		h.Exec(t, "INSERT INTO s_want (day, note, n) VALUES "+rows)
		var restored int64
		err := tr.Transact(ctx, func(tx refill.WarehouseTx) error {
			var err error
			restored, err = tx.RestorePartition(ctx, ref, "s_snap", "2026-11-01")
			return err
		})
		if err != nil || restored != 3 {
			t.Fatalf("RestorePartition = %d, %v; want 3 rows", restored, err)
		}
		want := digestOf(t, ctx, r, refill.TableRef{Table: "s_want", Column: "day", Grain: refill.GrainDay}, "2026-11-01")
		if got := digestOf(t, ctx, r, ref, "2026-11-01"); got != want {
			t.Errorf("restored by name: %v, want %v (the snapshot's rows in the new column order)", got, want)
		}

		// A table that lost a column of the snapshot is not restored: the
		// column's values would be lost.
		h.Exec(t, "CREATE TABLE s_narrow (day DATE, n INTEGER)")
		h.Exec(t, "INSERT INTO s_narrow (day, n) VALUES ('2026-11-01', 5)")
		narrow := refill.TableRef{Table: "s_narrow", Column: "day", Grain: refill.GrainDay}
		err = tr.Transact(ctx, func(tx refill.WarehouseTx) error {
			_, err := tx.RestorePartition(ctx, narrow, "s_snap", "2026-11-01")
			return err
		})
		if !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), "note") {
			t.Errorf("restore into a table without column note: error = %v, want bad input naming the column", err)
		}
		if d := digestOf(t, ctx, r, narrow, "2026-11-01"); d.Rows != 1 {
			t.Errorf("a refused restore changed the table: %v", d)
		}
	})

	t.Run("DropTable", func(t *testing.T) {
		h, ctx := setup(t)
		tr := h.Warehouse.(refill.Transactor)
		h.Exec(t, "CREATE TABLE keep (day DATE)")
		h.Exec(t, "CREATE TABLE gone (day DATE)")
		boom := errors.New("boom")
		err := tr.Transact(ctx, func(tx refill.WarehouseTx) error {
			if err := tx.DropTable(ctx, "keep"); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatal(err)
		}
		if _, err := h.Warehouse.Columns(ctx, "keep"); err != nil {
			t.Errorf("a drop that was rolled back: %v", err)
		}
		err = tr.Transact(ctx, func(tx refill.WarehouseTx) error {
			if err := tx.DropTable(ctx, "gone"); err != nil {
				return err
			}
			return tx.DropTable(ctx, "gone") // not there: nothing to do
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Warehouse.Columns(ctx, "gone"); !errors.Is(err, refill.ErrNoTable) {
			t.Errorf("after DropTable: %v, want ErrNoTable", err)
		}
	})

	t.Run("AuditAnchor", func(t *testing.T) {
		h, ctx := setup(t)
		tr := h.Warehouse.(refill.Transactor)
		an, ok := h.Warehouse.(refill.Anchorer)
		if !ok {
			t.Fatalf("%T does not implement refill.Anchorer", h.Warehouse)
		}
		latest := func(store string) (refill.AuditAnchor, bool) {
			t.Helper()
			a, ok, err := an.LatestAnchor(ctx, store)
			if err != nil {
				t.Fatal(err)
			}
			return a, ok
		}
		if a, ok := latest("s1"); ok {
			t.Errorf("a new warehouse holds anchor %+v", a)
		}
		anchor := func(fail bool, as ...refill.AuditAnchor) error {
			return tr.Transact(ctx, func(tx refill.WarehouseTx) error {
				for _, a := range as {
					if err := tx.Anchor(ctx, a); err != nil {
						return err
					}
				}
				if fail {
					return errors.New("rolled back")
				}
				return nil
			})
		}
		if err := anchor(true, refill.AuditAnchor{Store: "s1", Seq: 1, Hash: "h1"}); err == nil {
			t.Fatal("want the rollback's error")
		}
		if a, ok := latest("s1"); ok {
			t.Errorf("a rolled-back anchor is there: %+v", a)
		}
		s2 := refill.AuditAnchor{Store: "s2", Seq: 40, Hash: "other", Keyed: true, MAC: "hmac-sha256:m40"}
		err := anchor(false,
			refill.AuditAnchor{Store: "s1", Seq: 1, Hash: "h1"}, refill.AuditAnchor{Store: "s1", Seq: 12, Hash: "h12"},
			refill.AuditAnchor{Store: "s1", Seq: 3, Hash: "h3"}, refill.AuditAnchor{Store: "s2", Seq: 39, Hash: "older"}, s2)
		if err != nil {
			t.Fatal(err)
		}
		if a, ok := latest("s1"); !ok || a != (refill.AuditAnchor{Store: "s1", Seq: 12, Hash: "h12"}) {
			t.Errorf("LatestAnchor(s1) = %+v, %v; want seq 12", a, ok)
		}
		if a, ok := latest("s2"); !ok || a != s2 {
			t.Errorf("LatestAnchor(s2) = %+v, %v; want %+v", a, ok, s2)
		}
		all, err := an.LatestAnchors(ctx)
		if err != nil || len(all) != 2 || all[0] != (refill.AuditAnchor{Store: "s1", Seq: 12, Hash: "h12"}) || all[1] != s2 {
			t.Errorf("LatestAnchors = %+v, %v; want s1's at 12 and s2's at 40", all, err)
		}
		if a, ok := latest("s3"); ok {
			t.Errorf("LatestAnchor of a store never anchored = %+v", a)
		}
		if got, err := an.Anchors(ctx, "s1"); err != nil || len(got) != 3 || got[0].Seq != 1 || got[1].Seq != 3 || got[2] != (refill.AuditAnchor{Store: "s1", Seq: 12, Hash: "h12"}) {
			t.Errorf("Anchors(s1) = %+v, %v; want 1, 3 and 12, oldest first", got, err)
		}
		if got, err := an.Anchors(ctx, "s3"); err != nil || len(got) != 0 {
			t.Errorf("Anchors of a store never anchored = %+v, %v", got, err)
		}
		// An anchor for an entry already anchored keeps the first hash.
		if err := anchor(false, refill.AuditAnchor{Store: "s1", Seq: 12, Hash: "rewritten"}); err != nil {
			t.Fatal(err)
		}
		if a, _ := latest("s1"); a.Hash != "h12" {
			t.Errorf("a second anchor for seq 12 replaced the first: %+v", a)
		}
	})

	// Anchors written before they recorded whether the log was keyed read
	// as unkeyed, and the table gains the columns at the next publish.
	t.Run("AuditAnchorUpgrade", func(t *testing.T) {
		h, ctx := setup(t)
		an := h.Warehouse.(refill.Anchorer)
		h.Exec(t, `CREATE TABLE refill_audit_anchor (store TEXT NOT NULL, seq BIGINT NOT NULL, hash TEXT NOT NULL, PRIMARY KEY (store, seq))`)
		h.Exec(t, `INSERT INTO refill_audit_anchor (store, seq, hash) VALUES ('s1', 5, 'h5')`)
		old := refill.AuditAnchor{Store: "s1", Seq: 5, Hash: "h5"}
		if a, ok, err := an.LatestAnchor(ctx, "s1"); err != nil || !ok || a != old {
			t.Errorf("LatestAnchor of an old table = %+v, %v, %v; want %+v", a, ok, err, old)
		}
		if all, err := an.LatestAnchors(ctx); err != nil || len(all) != 1 || all[0] != old {
			t.Errorf("LatestAnchors of an old table = %+v, %v; want %+v", all, err, old)
		}
		keyed := refill.AuditAnchor{Store: "s1", Seq: 6, Hash: "h6", Keyed: true, MAC: "hmac-sha256:m6"}
		err := h.Warehouse.(refill.Transactor).Transact(ctx, func(tx refill.WarehouseTx) error { return tx.Anchor(ctx, keyed) })
		if err != nil {
			t.Fatalf("anchor into an old table: %v", err)
		}
		if a, ok, err := an.LatestAnchor(ctx, "s1"); err != nil || !ok || a != keyed {
			t.Errorf("LatestAnchor after the upgrade = %+v, %v, %v; want %+v", a, ok, err, keyed)
		}
	})
}
