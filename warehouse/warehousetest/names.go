package warehousetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
)

// NameCase is one way refill.yaml may name a table and its columns, and
// the SQL a user's own job would write for them.
type NameCase struct {
	// Table, Column and Check are written as in refill.yaml: plain names
	// fold as SQL folds them, quoted ones keep their case.
	Table, Column, Check string
	// SQLTable and SQLColumn name the same table and partition column in a
	// job's SQL.
	SQLTable, SQLColumn string
}

// nameFixtures are the two ways a table's names can be stored: created
// without quotes (lower case on PostgreSQL, as written on SQLite) and
// created with capitals in quotes. Each comes with the spellings of it
// that must work on every engine.
var nameFixtures = []struct {
	name   string
	create string
	insert string
	cases  []NameCase
}{
	{
		name:   "Unquoted",
		create: "CREATE TABLE events (id INTEGER, event_date DATE, user_id TEXT)",
		insert: "INSERT INTO events (id, event_date, user_id) VALUES (1, '2026-11-01', 'ada'), (2, '2026-11-01', NULL), (3, '2026-11-02', 'bob')",
		cases: []NameCase{
			{Table: "events", Column: "event_date", Check: "user_id", SQLTable: "events", SQLColumn: "event_date"},
			{Table: "Events", Column: "Event_Date", Check: "User_Id", SQLTable: "Events", SQLColumn: "Event_Date"},
			{Table: "EVENTS", Column: "EVENT_DATE", Check: "USER_ID", SQLTable: "EVENTS", SQLColumn: "EVENT_DATE"},
			{Table: `"events"`, Column: `"event_date"`, Check: `"user_id"`, SQLTable: `"events"`, SQLColumn: `"event_date"`},
		},
	},
	{
		name:   "Quoted",
		create: `CREATE TABLE "Events" (id INTEGER, "EventDate" DATE, "UserId" TEXT)`,
		insert: `INSERT INTO "Events" (id, "EventDate", "UserId") VALUES (1, '2026-11-01', 'ada'), (2, '2026-11-01', NULL), (3, '2026-11-02', 'bob')`,
		cases: []NameCase{
			{Table: `"Events"`, Column: `"EventDate"`, Check: `"UserId"`, SQLTable: `"Events"`, SQLColumn: `"EventDate"`},
		},
	},
}

// exerciseNames checks that a table and its columns named as refill.yaml
// names them work in every operation a driver has, on every engine: the
// driver must fold and quote a name in each statement it writes exactly as
// the engine folds the user's own SQL, and find a column the one way the
// engine does. Spellings that only one engine accepts (Events for a table
// created as "Events" works on SQLite alone) are the drivers' own tests,
// through ExerciseName.
func exerciseNames(t *testing.T, setup func(t *testing.T) (*Harness, context.Context)) {
	for _, f := range nameFixtures {
		for _, c := range f.cases {
			t.Run("Names"+f.name+"/"+c.Table, func(t *testing.T) {
				h, ctx := setup(t)
				h.Exec(t, f.create)
				h.Exec(t, f.insert)
				ExerciseName(t, ctx, h, c)
			})
		}
	}

	t.Run("NamesMissing", func(t *testing.T) {
		h, ctx := setup(t)
		h.Exec(t, nameFixtures[0].create)
		if _, err := h.Warehouse.Columns(ctx, `"no_such_table"`); !errors.Is(err, refill.ErrNoTable) || !strings.Contains(err.Error(), `"no_such_table"`) {
			t.Errorf("Columns of a missing quoted table: %v, want ErrNoTable naming it as written", err)
		}
		ref := refill.TableRef{Table: "events", Column: `"no_such_column"`, Grain: refill.GrainDay}
		_, err := h.Warehouse.PartitionCounts(ctx, ref, "2026-11-01", "2026-11-01")
		for _, want := range []string{`"no_such_column"`, "id, event_date, user_id"} {
			if !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), want) {
				t.Errorf("PartitionCounts by a missing column: %v, want bad input saying %s", err, want)
			}
		}
		spec := refill.ProfileSpec{NotNull: []string{`"No_Such"`}}
		_, err = profileOf(t, h).Profile(ctx, refill.TableRef{Table: "events", Column: "event_date", Grain: refill.GrainDay}, spec, "2026-11-01", "2026-11-01")
		for _, want := range []string{`"No_Such"`, "not_null", "id, event_date, user_id"} {
			if !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), want) {
				t.Errorf("Profile of a missing check column: %v, want bad input saying %s", err, want)
			}
		}
	})
}

// ExerciseName runs every operation of the warehouse on the table c
// names, which must hold three rows: two in partition 2026-11-01, one of
// them with a NULL check column, and one in 2026-11-02, in columns id,
// the partition column (a date) and the check column (text). It fails the
// test when any operation does not find the table or a column as c names
// them. A driver's own tests call it for the spellings only its engine
// accepts.
func ExerciseName(t *testing.T, ctx context.Context, h *Harness, c NameCase) {
	t.Helper()
	ref := refill.TableRef{Table: c.Table, Column: c.Column, Grain: refill.GrainDay}
	const day = "2026-11-01"

	cols, err := h.Warehouse.Columns(ctx, c.Table)
	if err != nil || len(cols) != 3 {
		t.Fatalf("Columns(%s) = %v, %v; want the table's three columns", c.Table, cols, err)
	}
	got, err := h.Warehouse.PartitionCounts(ctx, ref, day, "2026-11-02")
	if want := map[string]int64{day: 2, "2026-11-02": 1}; err != nil || !maps.Equal(got, want) {
		t.Errorf("PartitionCounts(%s.%s) = %v, %v; want %v", c.Table, c.Column, got, err, want)
	}
	spec := refill.ProfileSpec{NotNull: []string{c.Check}, NoFuture: []string{c.Column}, Now: profileNow}
	prof, err := profileOf(t, h).Profile(ctx, ref, spec, day, day)
	if err != nil || prof[day].Rows != 2 || prof[day].Nulls[c.Check] != 1 {
		t.Errorf("Profile(%s, not_null %s) = %+v, %v; want 2 rows, 1 null", c.Table, c.Check, prof, err)
	}

	// The jobs' SQL names the table and columns as a user would, and the
	// query's output columns are named after the table's: AS "EventDate"
	// for a quoted column, as PostgreSQL needs.
	query := fmt.Sprintf("SELECT 9 AS id, :partition AS %s", c.SQLColumn)
	sql := fmt.Sprintf("DELETE FROM %[1]s WHERE %[2]s = :partition AND id = 2", c.SQLTable, c.SQLColumn)
	r := rehearserOf(t, h)
	before := digestOf(t, ctx, r, ref, day)
	err = r.Rehearse(ctx, func(tx refill.WarehouseTx) error {
		if d := digestOf(t, ctx, tx, ref, day); d != before {
			t.Errorf("Digest in a rehearsal = %v, outside %v", d, before)
		}
		if err := tx.ExecSQL(ctx, ref, sql, day); err != nil {
			return fmt.Errorf("ExecSQL(%s): %w", sql, err)
		}
		if d := digestOf(t, ctx, tx, ref, day); d.Rows != 1 {
			t.Errorf("after the sql job, %d rows, want 1", d.Rows)
		}
		n, err := tx.ReplaceFromQuery(ctx, ref, query, day)
		if err != nil || n != 1 {
			return fmt.Errorf("ReplaceFromQuery(%s) = %d, %v; want 1 row", query, n, err)
		}
		prof, err := tx.Profile(ctx, ref, spec, day, day)
		if err != nil || prof[day].Rows != 1 || prof[day].Nulls[c.Check] != 1 {
			t.Errorf("Profile in the transaction = %+v, %v; want the query's 1 row, its check column NULL", prof, err)
		}
		if _, changed, err := tx.Spoil(ctx, ref, "2026-11-02"); err != nil || !changed {
			return fmt.Errorf("Spoil(%s) = %v, %v", c.Table, changed, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := digestOf(t, ctx, r, ref, day); d != before {
		t.Errorf("the rehearsal left the partition changed: %v -> %v", before, d)
	}

	// A snapshot is named after the table as control names it:
	// refill_snap_<plan>_<the table's last part, quotes and all>_<hash>.
	last := c.Table[strings.LastIndexByte(c.Table, '.')+1:]
	snap := "refill_snap_p1_" + last + "_ab12cd34"
	if i := strings.LastIndexByte(c.Table, '.'); i >= 0 {
		snap = c.Table[:i+1] + snap
	}
	tr := h.Warehouse.(refill.Transactor)
	err = tr.Transact(ctx, func(tx refill.WarehouseTx) error {
		if err := tx.CopyPartitions(ctx, ref, snap, day, day); err != nil {
			return fmt.Errorf("CopyPartitions(%s): %w", snap, err)
		}
		if err := tx.ExecSQL(ctx, ref, sql, day); err != nil {
			return err
		}
		n, err := tx.RestorePartition(ctx, ref, snap, day)
		if err != nil || n != 2 {
			return fmt.Errorf("RestorePartition(%s) = %d, %v; want 2 rows", snap, n, err)
		}
		return tx.DropTable(ctx, snap)
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := digestOf(t, ctx, r, ref, day); d != before {
		t.Errorf("snapshot, delete and restore changed the partition: %v -> %v", before, d)
	}
	if _, err := h.Warehouse.Columns(ctx, snap); !errors.Is(err, refill.ErrNoTable) {
		t.Errorf("after DropTable(%s), Columns = %v, want ErrNoTable", snap, err)
	}
}
