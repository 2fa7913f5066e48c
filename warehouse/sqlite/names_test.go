package sqlite_test

import (
	"testing"

	"github.com/refill-dev/refill/warehouse/warehousetest"
)

// SQLite compares names ignoring ASCII case, quoted or not: a table made
// by CREATE TABLE "Events" is Events, events and '"EVENTS"' as well, in
// the main schema named or not, and so are its columns. (On PostgreSQL only
// '"Events"' names it; the conformance suite holds what both accept.)
func TestNamesIgnoreCase(t *testing.T) {
	h := setup(t)
	h.Exec(t, `CREATE TABLE "Events" (id INTEGER, "EventDate" DATE, "UserId" TEXT)`)
	h.Exec(t, `INSERT INTO "Events" VALUES (1, '2026-11-01', 'ada'), (2, '2026-11-01', NULL), (3, '2026-11-02', 'bob')`)
	for _, c := range []warehousetest.NameCase{
		{Table: "Events", Column: "EventDate", Check: "UserId", SQLTable: "Events", SQLColumn: "EventDate"},
		{Table: "events", Column: "eventdate", Check: "userid", SQLTable: "events", SQLColumn: "eventdate"},
		{Table: `"EVENTS"`, Column: `"EVENTDATE"`, Check: `"USERID"`, SQLTable: `"EVENTS"`, SQLColumn: `"EVENTDATE"`},
		{Table: "main.Events", Column: "EventDate", Check: "UserId", SQLTable: "main.Events", SQLColumn: "EventDate"},
		{Table: `MAIN."Events"`, Column: `"EventDate"`, Check: `"UserId"`, SQLTable: `"Events"`, SQLColumn: `"EventDate"`},
	} {
		t.Run(c.Table, func(t *testing.T) {
			warehousetest.ExerciseName(t, t.Context(), h, c)
		})
	}
}
