package planner

import (
	"context"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
)

// TestPartitionColumnNames: the planner finds a partition column exactly
// as the warehouse's driver will when the plan runs, so that no plan is
// made for a column the run cannot find and none refused for one it can.
// On PostgreSQL a plain name folds to lower case and a quoted one keeps
// its case; SQLite ignores case either way.
func TestPartitionColumnNames(t *testing.T) {
	t.Parallel()
	fixtures := []string{
		"CREATE TABLE plain (event_day TEXT, v INTEGER)",
		"INSERT INTO plain VALUES ('2026-11-01', 1)",
		`CREATE TABLE "Quoted" ("EventDay" TEXT, v INTEGER)`,
		`INSERT INTO "Quoted" VALUES ('2026-11-01', 1)`,
	}
	for _, tt := range []struct {
		table, column string
		// want is "" when the plan is made, else what its error says, by
		// driver.
		sqlite, postgres string
	}{
		{table: "plain", column: "event_day"},
		{table: "PLAIN", column: "Event_Day"},
		{table: `"plain"`, column: `"event_day"`},
		{table: `"Quoted"`, column: `"EventDay"`},
		{table: `"Quoted"`, column: "EventDay",
			postgres: `table "Quoted" has no partition column "EventDay" (columns: EventDay, v); EventDay is read as eventday, as unquoted SQL would be; a name that differs only in case is written '"EventDay"'`},
		{table: `"Quoted"`, column: `"eventday"`,
			postgres: `has no partition column '"eventday"' (columns: EventDay, v); a name that differs only in case is written '"EventDay"'`},
		{table: "Quoted", column: `"EventDay"`,
			postgres: `table Quoted does not exist in the warehouse; Quoted is read as quoted, as unquoted SQL would be; a name that differs only in case is written '"Quoted"' (refill.yaml:7)`},
		{table: "plain", column: `"Event_Day"`,
			postgres: `has no partition column '"Event_Day"' (columns: event_day, v); a name that differs only in case is written event_day`},
	} {
		datasets := map[string]*refill.Dataset{
			"d": {Table: tt.table, Partition: refill.PartitionSpec{Column: tt.column}, Line: 7,
				Job: &refill.Job{Kind: refill.JobCommand, Command: []string{"true"}}},
		}
		t.Run(tt.table+"/"+tt.column, func(t *testing.T) {
			each(t, datasets, fixtures, func(t *testing.T, b *bundle) {
				want := tt.sqlite
				if b.name == "postgres" {
					want = tt.postgres
				}
				_, err := b.p.Plan(context.Background(), req("d", "2026-11-01", "2026-11-01"))
				switch {
				case want == "" && err != nil:
					t.Errorf("Plan: %v, want a plan", err)
				case want != "" && (refill.ExitCode(err) != refill.ExitBadInput || !strings.Contains(err.Error(), want)):
					t.Errorf("Plan: %v\nwant bad input saying %s", err, want)
				}
			})
		})
	}
}
