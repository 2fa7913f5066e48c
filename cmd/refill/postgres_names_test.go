package main

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/refill-dev/refill/internal/pgtest"
)

// TestPostgresNamesFoldAsPostgresDoes: refill.yaml names tables and
// columns the way PostgreSQL's own SQL does. A table made unquoted as
// events is configured as SCHEMA.Events (a plain name folds to lower
// case, the schema's too), and beside it the table made quoted as "Events"
// is configured as 'schema."Events"': two tables, two datasets. Both plan,
// both jobs prove, and each dataset's column check reads its own table's
// column, written in either case.
func TestPostgresNamesFoldAsPostgresDoes(t *testing.T) {
	whDSN := pgtest.Schema(t)
	schema := schemaOf(whDSN)
	db, err := sql.Open("pgx", whDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`CREATE TABLE Events (Day date, User_Id int)`,
		`CREATE TABLE "Events" ("Day" date, "UserId" int)`,
		// Three rows on the first day and four on the second in events,
		// the other way round in "Events", so a plan that read one for
		// the other would count wrong.
		`INSERT INTO events SELECT date '2026-11-01' + (g % 2), g FROM generate_series(1, 7) g`,
		`INSERT INTO "Events" SELECT date '2026-11-01' + ((g + 1) % 2), g FROM generate_series(1, 7) g`,
		`CREATE TABLE Daily (Day date, N bigint)`,
		`CREATE TABLE "Daily" ("Day" date, "N" bigint)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	dir := t.TempDir()
	cfg := `version: 1
warehouse: "` + whDSN + `"
users:
  alice: {roles: [engineer]}
datasets:
  raw:
    table: ` + strings.ToUpper(schema) + `.Events
    partition: {column: DAY}
    checks: {not_null: {columns: [User_Id]}}
  raw_quoted:
    table: '` + schema + `."Events"'
    partition: {column: '"Day"'}
    checks: {not_null: {columns: ['"UserId"']}}
  daily:
    table: Daily
    partition: {column: Day}
    upstream: [raw]
    job: {query: "SELECT day, count(*) AS n FROM Events WHERE day = :partition::date GROUP BY day"}
  daily_quoted:
    table: '"Daily"'
    partition: {column: '"Day"'}
    upstream: [raw_quoted]
    job: {query: 'SELECT "Day", count(*) AS "N" FROM "Events" WHERE "Day" = :partition::date GROUP BY "Day"'}
`
	if err := os.WriteFile(filepath.Join(dir, "refill.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct{ source, target, want string }{
		{"raw", "daily", "2026-11-01:0->1 2026-11-02:0->1"},
		{"raw_quoted", "daily_quoted", "2026-11-01:0->1 2026-11-02:0->1"},
	} {
		p := decode[planJSON](t, step(t, dir, 0, "", "plan", c.source, "--from", "2026-11-01", "--to", "2026-11-02", "--reason", "r", "--as", "alice", "-o", "json").stdout)
		var got []string
		for _, s := range p.Steps {
			if s.Dataset != c.target {
				t.Errorf("plan of %s has a step %s", c.source, s.Dataset)
			}
			for _, pp := range s.Partitions {
				got = append(got, pp.Partition+":"+rowsOf(pp.CurrentRows)+"->"+rowsOf(pp.ExpectedRows))
			}
		}
		if s := strings.Join(got, " "); s != c.want || !p.Gate.Passed {
			t.Errorf("plan of %s: partitions %s (want %s), gate passed %v", c.source, s, c.want, p.Gate.Passed)
		}
		step(t, dir, 0, "all four builds agree", "prove", c.target, "--partition", "2026-11-02", "--as", "alice")
	}
	// The proofs wrote nothing: daily holds nothing yet, and no stray
	// table was made beside the two of each name.
	var tables []string
	rows, err := db.Query(`SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name COLLATE "C"`, schema)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	if got := strings.Join(tables, " "); got != "Daily Events daily events" {
		t.Errorf("tables in the warehouse: %s", got)
	}

	// A null in each table, on different days: each dataset's check finds
	// its own.
	for _, q := range []string{
		`INSERT INTO events VALUES ('2026-11-01', NULL)`,
		`INSERT INTO "Events" VALUES ('2026-11-02', NULL)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ source, column, day string }{
		{"raw", "User_Id", "2026-11-01"},
		{"raw_quoted", `"UserId"`, "2026-11-02"},
	} {
		r := run(t, dir, nil, "check", c.source, "--from", "2026-11-01", "--to", "2026-11-02", "-o", "json")
		g := decode[struct {
			Passed   bool          `json:"passed"`
			Findings []findingJSON `json:"findings"`
		}](t, r.stdout)
		var failed []string
		for _, f := range g.Findings {
			if !f.Passed {
				failed = append(failed, f.Check+":"+f.Column+":"+f.Partition)
			}
		}
		if want := "not_null:" + c.column + ":" + c.day; r.code != 3 || strings.Join(failed, " ") != want {
			t.Errorf("check %s: exit %d, failed %v, want exit 3 and %s\n%s", c.source, r.code, failed, want, r.stderr)
		}
	}
}
