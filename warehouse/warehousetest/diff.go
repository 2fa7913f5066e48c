package warehousetest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
)

// diffOf rehearses a diff of one partition whose build runs the statements
// in build, and returns it.
func diffOf(t *testing.T, ctx context.Context, h *Harness, ref refill.TableRef, partition string, spec refill.DiffSpec, build ...string) *refill.PartitionDiff {
	t.Helper()
	var d *refill.PartitionDiff
	err := h.Warehouse.Rehearse(ctx, func(tx refill.WarehouseTx) error {
		var err error
		d, err = tx.Diff(ctx, ref, partition, spec, func() error {
			for _, s := range build {
				if err := tx.ExecSQL(ctx, ref, s, partition); err != nil {
					return err
				}
			}
			return nil
		})
		return err
	})
	if err != nil {
		t.Fatalf("Diff: %v", err)
	}
	if d == nil {
		t.Fatal("Diff returned no diff and no error")
	}
	return d
}

func sum(c refill.ColumnDiff) (string, string) {
	s := func(n *json.Number) string {
		if n == nil {
			return "nil"
		}
		return n.String()
	}
	return s(c.OldSum), s(c.NewSum)
}

func val(m map[string]*string, col string) string {
	v, ok := m[col]
	switch {
	case !ok:
		return "(absent)"
	case v == nil:
		return "NULL"
	}
	return *v
}

func exerciseDiff(t *testing.T, setup func(t *testing.T) (*Harness, context.Context)) {
	// orders: day, id (the key), customer (private), amount, qty, note.
	load := func(t *testing.T, h *Harness) refill.TableRef {
		h.Exec(t, `CREATE TABLE orders (day DATE, id INTEGER, customer TEXT, amount NUMERIC, qty INTEGER, note TEXT)`)
		h.Exec(t, `INSERT INTO orders (day, id, customer, amount, qty, note) VALUES
			('2026-11-01', 1, 'ada', 10, 1, 'a'), ('2026-11-01', 2, 'bob', 20, 2, NULL),
			('2026-11-01', 3, 'cyd', 30, 3, 'c'), ('2026-11-01', 4, 'dee', 40, 4, 'd'),
			('2026-11-02', 5, 'eve', 50, 5, 'e')`)
		return refill.TableRef{Table: "orders", Column: "day", Grain: refill.GrainDay}
	}
	// The rebuild changes id 2's amount and note, drops id 4, adds id 6.
	rebuild := []string{
		`UPDATE orders SET amount = 25, note = 'b' WHERE id = 2 AND day = :partition`,
		`DELETE FROM orders WHERE id = 4 AND day = :partition`,
		`INSERT INTO orders (day, id, customer, amount, qty, note) VALUES (:partition, 6, 'fay', 60, 6, 'f')`,
	}
	spec := refill.DiffSpec{Key: []string{"id"}, Private: []string{"customer"}}

	t.Run("DiffKeyed", func(t *testing.T) {
		h, ctx := setup(t)
		ref := load(t, h)
		d := diffOf(t, ctx, h, ref, "2026-11-01", spec, rebuild...)
		if d.Skipped != "" {
			t.Fatalf("skipped: %s", d.Skipped)
		}
		if d.OnlyOld != 1 || d.OnlyNew != 1 || d.Changed == nil || *d.Changed != 1 || d.Unchanged != 2 {
			t.Fatalf("diff = %+v, want only_old 1, only_new 1, changed 1, unchanged 2", d)
		}
		if strings.Join(d.Key, ",") != "id" {
			t.Errorf("key = %v", d.Key)
		}
		amount := d.Columns["amount"]
		if o, n := sum(amount); o != "100" || n != "125" || amount.Changed == nil || *amount.Changed != 1 {
			t.Errorf("amount = %s → %s, changed %v; want 100 → 125 in 1 row", o, n, amount.Changed)
		}
		if qty := d.Columns["qty"]; qty.Changed == nil || *qty.Changed != 0 {
			t.Errorf("qty changed = %v, want 0", qty.Changed)
		}
		if _, ok := d.Columns["id"]; ok {
			t.Error("the key column is summed")
		}
		if _, ok := d.Columns["note"]; ok {
			t.Error("a text column is summed")
		}
		if len(d.Sample) != 3 {
			t.Fatalf("sample = %+v, want 3 rows", d.Sample)
		}
		ch, gone, added := d.Sample[0], d.Sample[1], d.Sample[2]
		if val(ch.Old, "id") != "2" || val(ch.New, "id") != "2" || val(ch.Old, "note") != "NULL" || val(ch.New, "note") != "b" {
			t.Errorf("changed row = old %v new %v", ch.Old, ch.New)
		}
		if val(gone.Old, "id") != "4" || gone.New != nil || val(added.New, "id") != "6" || added.Old != nil {
			t.Errorf("removed and added rows = %+v, %+v", gone, added)
		}
		for _, r := range d.Sample {
			if _, ok := r.Old["customer"]; ok {
				t.Error("the sample shows a private column")
			}
			if _, ok := r.New["customer"]; ok {
				t.Error("the sample shows a private column")
			}
		}
		// Nothing of the rehearsal stays: the partition and the copy.
		if n, _ := h.Warehouse.PartitionCounts(ctx, ref, "2026-11-01", "2026-11-01"); n["2026-11-01"] != 4 {
			t.Errorf("after the rehearsal the partition holds %d rows, want 4", n["2026-11-01"])
		}
	})

	t.Run("DiffUnchanged", func(t *testing.T) {
		h, ctx := setup(t)
		ref := load(t, h)
		d := diffOf(t, ctx, h, ref, "2026-11-01", spec,
			`DELETE FROM orders WHERE day = :partition`,
			`INSERT INTO orders (day, id, customer, amount, qty, note) VALUES (:partition, 4, 'dee', 40, 4, 'd'), (:partition, 3, 'cyd', 30, 3, 'c'), (:partition, 2, 'bob', 20, 2, NULL), (:partition, 1, 'ada', 10, 1, 'a')`)
		if d.Changes() || d.Unchanged != 4 || len(d.Sample) != 0 || d.Summary() != "" {
			t.Errorf("the same rows rebuilt in another order: %+v", d)
		}
	})

	t.Run("DiffWithoutKey", func(t *testing.T) {
		h, ctx := setup(t)
		ref := load(t, h)
		d := diffOf(t, ctx, h, ref, "2026-11-01", refill.DiffSpec{Private: []string{"customer"}}, rebuild...)
		if d.Changed != nil || d.OnlyOld != 2 || d.OnlyNew != 2 || d.Unchanged != 2 || len(d.Key) != 0 {
			t.Fatalf("diff by row = %+v, want only_old 2, only_new 2, unchanged 2, no changed", d)
		}
		if o, n := sum(d.Columns["amount"]); o != "100" || n != "125" {
			t.Errorf("amount = %s → %s, want 100 → 125", o, n)
		}
		if len(d.Sample) != 4 || d.Sample[0].Old == nil || d.Sample[3].New == nil {
			t.Errorf("sample = %+v, want 2 removed then 2 added", d.Sample)
		}
		b, _ := json.Marshal(d)
		if strings.Contains(string(b), `"changed":`) && !strings.Contains(string(b), `"columns"`) {
			t.Errorf("JSON = %s", b)
		}
	})

	t.Run("DiffKeyNotUnique", func(t *testing.T) {
		h, ctx := setup(t)
		ref := load(t, h)
		h.Exec(t, `INSERT INTO orders (day, id, customer, amount, qty, note) VALUES ('2026-11-01', 1, 'ada', 10, 1, 'twin')`)
		d := diffOf(t, ctx, h, ref, "2026-11-01", refill.DiffSpec{Key: []string{"id"}}, `UPDATE orders SET qty = 9 WHERE id = 3 AND day = :partition`)
		if d.Changed != nil || d.OnlyOld != 1 || d.OnlyNew != 1 || d.Unchanged != 4 || !strings.Contains(d.Note, "shared by several rows") {
			t.Errorf("a key shared by two rows: %+v", d)
		}
		h.Exec(t, `INSERT INTO orders (day, id, amount) VALUES ('2026-11-01', NULL, 1)`)
		d = diffOf(t, ctx, h, ref, "2026-11-01", refill.DiffSpec{Key: []string{"id"}})
		if d.Changes() || d.Unchanged != 6 || !strings.Contains(d.Note, "NULL") {
			t.Errorf("a NULL key, nothing rebuilt: %+v", d)
		}
	})

	t.Run("DiffMissingKeyColumn", func(t *testing.T) {
		h, ctx := setup(t)
		ref := load(t, h)
		d := diffOf(t, ctx, h, ref, "2026-11-01", refill.DiffSpec{Key: []string{"order_no"}}, rebuild...)
		if !strings.Contains(d.Skipped, "order_no") {
			t.Errorf("a key column that is not there: %+v", d)
		}
	})

	t.Run("DiffBuildFails", func(t *testing.T) {
		h, ctx := setup(t)
		ref := load(t, h)
		err := h.Warehouse.Rehearse(ctx, func(tx refill.WarehouseTx) error {
			_, err := tx.Diff(ctx, ref, "2026-11-01", spec, func() error {
				return tx.ExecSQL(ctx, ref, "INSERT INTO orders (day, id) VALUES ('2026-11-02', 99)", "2026-11-01")
			})
			return err
		})
		if err == nil {
			t.Error("a build that writes outside its partition: Diff returned no error")
		}
	})

	t.Run("DiffHostileNames", func(t *testing.T) {
		h, ctx := setup(t)
		h.Exec(t, `CREATE TABLE "we ird" ("Day" DATE, "refill_side" INTEGER, "o" INTEGER, "n;--" TEXT)`)
		h.Exec(t, `INSERT INTO "we ird" ("Day", "refill_side", "o", "n;--") VALUES ('2026-11-01', 1, 5, 'x'), ('2026-11-01', 2, 6, 'y')`)
		ref := refill.TableRef{Table: `"we ird"`, Column: `"Day"`, Grain: refill.GrainDay}
		d := diffOf(t, ctx, h, ref, "2026-11-01", refill.DiffSpec{Key: []string{"refill_side"}},
			`UPDATE "we ird" SET "o" = 7, "n;--" = 'z' WHERE "refill_side" = 2 AND "Day" = :partition`)
		if d.Skipped != "" || d.Changed == nil || *d.Changed != 1 || d.Unchanged != 1 {
			t.Fatalf("diff = %+v", d)
		}
		if o, n := sum(d.Columns["o"]); o != "11" || n != "12" {
			t.Errorf("o = %s → %s, want 11 → 12", o, n)
		}
		if len(d.Sample) != 1 || val(d.Sample[0].New, "n;--") != "z" {
			t.Errorf("sample = %+v", d.Sample)
		}
	})

	// A view's diff is made around its upstream's rebuilds (the plan's
	// rehearsal wraps every partition of the view), so diffs nest: the
	// same table's too, at other partitions, each with a copy of its own.
	t.Run("DiffViewAroundItsUpstream", func(t *testing.T) {
		h, ctx := setup(t)
		ref := load(t, h)
		h.Exec(t, `CREATE VIEW orders_v AS SELECT day, id, amount AS doubled FROM orders`)
		view := refill.TableRef{Table: "orders_v", Column: "day", Grain: refill.GrainDay}
		var inner, other, outer *refill.PartitionDiff
		err := h.Warehouse.Rehearse(ctx, func(tx refill.WarehouseTx) error {
			var err error
			outer, err = tx.Diff(ctx, view, "2026-11-01", refill.DiffSpec{Key: []string{"id"}}, func() error {
				var err error
				other, err = tx.Diff(ctx, ref, "2026-11-02", spec, func() error {
					var err error
					inner, err = tx.Diff(ctx, ref, "2026-11-01", spec, func() error {
						for _, s := range rebuild {
							if err := tx.ExecSQL(ctx, ref, s, "2026-11-01"); err != nil {
								return err
							}
						}
						return nil
					})
					if err != nil {
						return err
					}
					return tx.ExecSQL(ctx, ref, "UPDATE orders SET qty = 9 WHERE day = :partition", "2026-11-02")
				})
				return err
			})
			return err
		})
		if err != nil {
			t.Fatalf("nested diffs: %v", err)
		}
		for name, d := range map[string]*refill.PartitionDiff{"inner": inner, "other": other, "outer": outer} {
			if d == nil || d.Skipped != "" {
				t.Fatalf("%s diff = %+v", name, d)
			}
		}
		if inner.OnlyOld != 1 || inner.OnlyNew != 1 || *inner.Changed != 1 || inner.Unchanged != 2 {
			t.Errorf("the table's diff inside = %+v, want 1 removed, 1 added, 1 changed, 2 unchanged", inner)
		}
		if *other.Changed != 1 || other.Unchanged != 0 || other.OnlyOld+other.OnlyNew != 0 {
			t.Errorf("the table's other partition = %+v, want 1 changed", other)
		}
		if outer.OnlyOld != 1 || outer.OnlyNew != 1 || *outer.Changed != 1 || outer.Unchanged != 2 {
			t.Fatalf("the view's diff = %+v, want 1 removed, 1 added, 1 changed, 2 unchanged", outer)
		}
		if o, n := sum(outer.Columns["doubled"]); o != "100" || n != "125" {
			t.Errorf("the view's doubled = %s → %s, want 100 → 125", o, n)
		}
	})
}
