package main

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPostgresNamesFoldAsPostgresDoes: refill.yaml names tables and
// columns the way PostgreSQL's own SQL does. A table made unquoted as
// events is configured as SCHEMA.Events (a plain name folds to lower
// case, the schema's too), and beside it the table made quoted as "Events"
// is configured as 'schema."Events"': two tables, two datasets. Both plan,
// both jobs prove, and each dataset's column check reads its own table's
// column, written in either case.
func TestPostgresNamesFoldAsPostgresDoes(t *testing.T) {
	t.Parallel()
	whDSN := pgSchema(t)
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

// TestPostgresDaylightSavingDay: the warehouse connection's time zone is
// America/New_York, and 2026-11-01 is the day its clocks go back, 25 local
// hours long. refill cuts partitions in UTC and runs jobs in UTC, so the
// plan, the proof and the run all see the 24 hourly views of the UTC day,
// and the hour 2026-11-01T05 is 05:00-06:00 UTC. The jobs are written as
// the README's PostgreSQL example writes them.
func TestPostgresDaylightSavingDay(t *testing.T) {
	t.Parallel()
	whDSN := pgSchema(t)
	db, err := sql.Open("pgx", whDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`CREATE TABLE page_views (viewed_at timestamptz, user_id bigint)`,
		`INSERT INTO page_views
		 SELECT g, extract(hour FROM g AT TIME ZONE 'UTC')
		 FROM generate_series(timestamptz '2026-10-31 00:00Z', '2026-11-02 23:00Z', interval '1 hour') g`,
		`CREATE TABLE views (view_date date, viewed_at timestamptz, user_id bigint)`,
		`CREATE TABLE hourly_views (view_hour timestamptz, views bigint)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	dir := t.TempDir()
	cfg := `version: 1
warehouse: "` + whDSN + `&timezone=America/New_York"
datasets:
  page_views:
    table: page_views
    partition: {column: viewed_at, grain: hour}
  views:
    table: views
    partition: {column: view_date, grain: day}
    upstream: [page_views]
    job:
      query: |
        SELECT viewed_at::date AS view_date, viewed_at, user_id
        FROM page_views
        WHERE viewed_at >= :partition::date
          AND viewed_at <  :partition::date + 1
  hourly_views:
    table: hourly_views
    partition: {column: view_hour, grain: hour}
    upstream: [page_views]
    job:
      query: |
        SELECT date_trunc('hour', viewed_at) AS view_hour, count(*) AS views
        FROM page_views
        WHERE viewed_at >= to_timestamp(:partition, 'YYYY-MM-DD"T"HH24')
          AND viewed_at <  to_timestamp(:partition, 'YYYY-MM-DD"T"HH24') + interval '1 hour'
        GROUP BY 1
`
	if err := os.WriteFile(filepath.Join(dir, "refill.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}

	var p planJSON
	for _, c := range []struct {
		dataset, partition string
		rows               string
	}{
		// First, so that the views plan is the last one made and applied
		// below.
		{"hourly_views", "2026-11-01T05", "1"},
		{"views", "2026-11-01", "24"},
	} {
		p = decode[planJSON](t, step(t, dir, 0, "", "plan", c.dataset, "--from", c.partition, "--to", c.partition, "--reason", "dst", "--as", "alice", "-o", "json").stdout)
		if len(p.Steps) != 1 || len(p.Steps[0].Partitions) != 1 {
			t.Fatalf("plan of %s %s: %+v", c.dataset, c.partition, p.Steps)
		}
		if pp := p.Steps[0].Partitions[0]; pp.Partition != c.partition || rowsOf(pp.ExpectedRows) != c.rows || pp.ExpectedMethod != "query" {
			t.Errorf("plan of %s: %s expected %s rows by %s, want %s by query", c.dataset, pp.Partition, rowsOf(pp.ExpectedRows), pp.ExpectedMethod, c.rows)
		}
		r := step(t, dir, 0, "all four builds agree", "prove", c.dataset, "--partition", c.partition, "--as", "alice")
		if !strings.Contains(r.stdout+r.stderr, ": "+c.rows+" rows, checksum") {
			t.Errorf("proof of %s %s does not prove the %s rows the plan expects:\n%s%s", c.dataset, c.partition, c.rows, r.stdout, r.stderr)
		}
	}

	// The run writes what the plan promised: the 24 hours of the UTC day.
	step(t, dir, 0, "", "approve", p.ID, "--as", "bob")
	step(t, dir, 0, "", "apply", p.ID, "--as", "alice")
	var n, inDay int
	if err := db.QueryRow(`SELECT count(*), count(*) FILTER (WHERE view_date = '2026-11-01' AND viewed_at >= '2026-11-01 00:00Z' AND viewed_at < '2026-11-02 00:00Z') FROM views`).Scan(&n, &inDay); err != nil || n != 24 || inDay != 24 {
		t.Errorf("views after the run: %d rows, %d in the UTC day (%v); want 24 and 24", n, inDay, err)
	}
}
