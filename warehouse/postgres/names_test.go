package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/internal/pgtest"
	"github.com/refill-dev/refill/warehouse/postgres"
	"github.com/refill-dev/refill/warehouse/warehousetest"
)

// namesSetup is setup with the test's schema name, as PostgreSQL stores
// it (lower case), and the table created as CREATE TABLE create.
func namesSetup(t *testing.T, create, insert string) (*warehousetest.Harness, string) {
	t.Helper()
	h := setup(t)
	h.Exec(t, create)
	h.Exec(t, insert)
	var schema string
	if err := h.Warehouse.(*postgres.Warehouse).Pool().QueryRow(t.Context(), "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	return h, schema
}

const (
	createUnquoted = "CREATE TABLE events (id integer, event_date date, user_id text)"
	insertUnquoted = "INSERT INTO events VALUES (1, '2026-11-01', 'ada'), (2, '2026-11-01', NULL), (3, '2026-11-02', 'bob')"
	createQuoted   = `CREATE TABLE "Events" (id integer, "EventDate" date, "UserId" text)`
	insertQuoted   = `INSERT INTO "Events" VALUES (1, '2026-11-01', 'ada'), (2, '2026-11-01', NULL), (3, '2026-11-02', 'bob')`
)

// A plain name in the config folds to lower case, as in SQL: a table made
// by CREATE TABLE events is Events and EVENTS too, schema-qualified or
// not, with its columns in any case.
func TestNamesFoldToLowerCase(t *testing.T) {
	h, schema := namesSetup(t, createUnquoted, insertUnquoted)
	for _, c := range []warehousetest.NameCase{
		{Table: "Events", Column: "Event_Date", Check: "User_Id", SQLTable: "Events", SQLColumn: "Event_Date"},
		{Table: strings.ToUpper(schema) + ".EVENTS", Column: "EVENT_DATE", Check: "USER_ID", SQLTable: schema + ".Events", SQLColumn: "event_date"},
		{Table: `"` + schema + `".Events`, Column: `"event_date"`, Check: `"user_id"`, SQLTable: "EVENTS", SQLColumn: "event_date"},
	} {
		t.Run(c.Table, func(t *testing.T) {
			warehousetest.ExerciseName(t, t.Context(), h, c)
		})
	}
}

// A quoted name keeps its case: a table made by CREATE TABLE "Events" is
// '"Events"' in the config, schema-qualified or not, and only that.
func TestQuotedNamesKeepTheirCase(t *testing.T) {
	h, schema := namesSetup(t, createQuoted, insertQuoted)
	for _, table := range []string{`"Events"`, schema + `."Events"`, strings.ToUpper(schema) + `."Events"`, `"` + schema + `"."Events"`} {
		t.Run(table, func(t *testing.T) {
			warehousetest.ExerciseName(t, t.Context(), h, warehousetest.NameCase{
				Table: table, Column: `"EventDate"`, Check: `"UserId"`, SQLTable: `"Events"`, SQLColumn: `"EventDate"`,
			})
		})
	}
}

// A schema created with capitals in quotes is quoted in the config too.
func TestQuotedSchema(t *testing.T) {
	h := setup(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	schema := "Refill_Names_" + hex.EncodeToString(b[:])
	admin, err := pgx.Connect(t.Context(), pgtest.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(t.Context())
	quoted := pgx.Identifier{schema}.Sanitize()
	if _, err := admin.Exec(t.Context(), "CREATE SCHEMA "+quoted); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The test's context is done by now.
		ctx := context.Background()
		c, err := pgx.Connect(ctx, pgtest.DSN())
		if err != nil {
			t.Errorf("dropping schema %s: %v", quoted, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP SCHEMA "+quoted+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", quoted, err)
		}
	})
	h.Exec(t, "CREATE TABLE "+quoted+`."Events" (id integer, "EventDate" date, "UserId" text)`)
	h.Exec(t, "INSERT INTO "+quoted+`."Events" VALUES (1, '2026-11-01', 'ada'), (2, '2026-11-01', NULL), (3, '2026-11-02', 'bob')`)
	warehousetest.ExerciseName(t, t.Context(), h, warehousetest.NameCase{
		Table: `"` + schema + `"."Events"`, Column: `"EventDate"`, Check: `"UserId"`, SQLTable: quoted + `."Events"`, SQLColumn: `"EventDate"`,
	})
	_, err = h.Warehouse.Columns(t.Context(), schema+`."Events"`)
	if !errors.Is(err, refill.ErrNoTable) || !strings.Contains(err.Error(), `'"`+schema+`"."Events"'`) {
		t.Errorf("the schema unquoted: %v; want ErrNoTable saying how to write it", err)
	}
}

// The mistakes the two rules make possible are refused with a message
// that says how to write the name that exists.
func TestNamesInTheWrongCase(t *testing.T) {
	ctx := t.Context()
	t.Run("unquoted name of a quoted table", func(t *testing.T) {
		h, _ := namesSetup(t, createQuoted, insertQuoted)
		for _, table := range []string{"Events", "EVENTS", "events"} {
			_, err := h.Warehouse.Columns(ctx, table)
			if !errors.Is(err, refill.ErrNoTable) || !strings.Contains(err.Error(), `is written '"Events"'`) {
				t.Errorf("Columns(%s): %v; want ErrNoTable saying to write '\"Events\"'", table, err)
			}
			ref := refill.TableRef{Table: table, Column: `"EventDate"`, Grain: refill.GrainDay}
			if _, err := h.Warehouse.PartitionCounts(ctx, ref, "2026-11-01", "2026-11-01"); !errors.Is(err, refill.ErrNoTable) {
				t.Errorf("PartitionCounts(%s): %v; want ErrNoTable", table, err)
			}
		}
		if _, err := h.Warehouse.Columns(ctx, "Events"); !strings.Contains(err.Error(), "Events is read as events") {
			t.Errorf("Columns(Events): %v; want it to say how PostgreSQL read the name", err)
		}
	})
	t.Run("quoted name of an unquoted table", func(t *testing.T) {
		h, _ := namesSetup(t, createUnquoted, insertUnquoted)
		_, err := h.Warehouse.Columns(ctx, `"Events"`)
		if !errors.Is(err, refill.ErrNoTable) || !strings.Contains(err.Error(), "is written events") {
			t.Errorf(`Columns("Events"): %v; want ErrNoTable saying to write events`, err)
		}
	})
	t.Run("unquoted name of a quoted column", func(t *testing.T) {
		h, _ := namesSetup(t, createQuoted, insertQuoted)
		ref := refill.TableRef{Table: `"Events"`, Column: "EventDate", Grain: refill.GrainDay}
		_, err := h.Warehouse.PartitionCounts(ctx, ref, "2026-11-01", "2026-11-01")
		for _, want := range []string{`table "Events" has no column EventDate (the partition column)`, "its columns are id, EventDate, UserId", `is written '"EventDate"'`} {
			if !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), want) {
				t.Errorf("PartitionCounts by EventDate: %v; want bad input saying %s", err, want)
			}
		}
		spec := refill.ProfileSpec{NotNull: []string{"UserId"}}
		ref.Column = `"EventDate"`
		_, err = h.Warehouse.(refill.Profiler).Profile(ctx, ref, spec, "2026-11-01", "2026-11-01")
		if !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), `no column UserId (named by its not_null check)`) || !strings.Contains(err.Error(), `'"UserId"'`) {
			t.Errorf("Profile by UserId: %v", err)
		}
	})
	t.Run("query output named without quotes", func(t *testing.T) {
		h, _ := namesSetup(t, createQuoted, insertQuoted)
		ref := refill.TableRef{Table: `"Events"`, Column: `"EventDate"`, Grain: refill.GrainDay}
		err := h.Warehouse.(refill.Rehearser).Rehearse(ctx, func(tx refill.WarehouseTx) error {
			_, err := tx.ReplaceFromQuery(ctx, ref, "SELECT 9 AS id, :partition AS EventDate", "2026-11-01")
			return err
		})
		if !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), `output column "eventdate"`) || !strings.Contains(err.Error(), `the column EventDate needs AS "EventDate"`) {
			t.Errorf("AS EventDate into \"EventDate\": %v; want bad input explaining the folding", err)
		}
	})
}
