package main

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDryRunCountsDownstreamAfterTheUpstream: raw → mid → top of query
// jobs, with mid and top stale. The approver must see top go 1 -> 5, as the
// run will make it, not "1 -> 1 =" counted against today's mid; and a job
// behind a command (whose output refill cannot see ahead) is unknown, never
// "no change", and unknown in the totals too.
func TestDryRunCountsDownstreamAfterTheUpstream(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(dir, "wh.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"CREATE TABLE raw (day TEXT, v INTEGER)",
		"CREATE TABLE mid (day TEXT, v INTEGER)",
		"CREATE TABLE top (day TEXT, v INTEGER)",
		"CREATE TABLE behind (day TEXT, v INTEGER)",
		"CREATE TABLE sqldown (day TEXT, v INTEGER)",
		"INSERT INTO sqldown VALUES ('2026-11-02', 7)",
		"INSERT INTO raw VALUES ('2026-11-02', 1), ('2026-11-02', 2), ('2026-11-02', 3), ('2026-11-02', 4), ('2026-11-02', 5)",
		"INSERT INTO mid VALUES ('2026-11-02', 1)",
		"INSERT INTO top VALUES ('2026-11-02', 1)",
		"INSERT INTO behind VALUES ('2026-11-02', 1)",
	} {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	cfg := `version: 1
warehouse: sqlite:wh.db
datasets:
  raw: {table: raw, partition: {column: day}}
  mid:
    table: mid
    partition: {column: day}
    upstream: [raw]
    job: {query: "SELECT day, v FROM raw WHERE day = :partition"}
  top:
    table: top
    partition: {column: day}
    upstream: [mid]
    job: {query: "SELECT day, v FROM mid WHERE day = :partition"}
  sqldown:
    table: sqldown
    partition: {column: day}
    upstream: [mid]
    job: {sql: "DELETE FROM sqldown WHERE day = :partition; INSERT INTO sqldown SELECT day, v FROM mid WHERE day = :partition"}
  export:
    upstream: [raw]
    job: {command: ["true"]}
  behind:
    table: behind
    partition: {column: day}
    upstream: [export]
    job: {query: "SELECT day, v FROM raw WHERE day = :partition"}
`
	if err := os.WriteFile(filepath.Join(dir, "refill.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	r := step(t, dir, 0, "", "plan", "raw", "--from", "2026-11-02", "--to", "2026-11-02", "--reason", "stale chain", "--as", "alice")
	for _, want := range []string{
		`(?m)^\s+2026-11-02\s+1\s+->\s+5\s+\+4 .*rehearsal`,           // top, counted after mid
		`(?m)sqldown.*\n\s+2026-11-02\s+1\s+->\s+5\s+\+4 .*rehearsal`, // an sql job downstream too
		`(?m)^\s+2026-11-02\s+1\s+->\s+\?\s+depends_on_upstream\s*$`,  // behind the command
		`expected after ≥ 15 \(\+ 2 partitions unknown\)`,
	} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("the dry run lacks %s:\n%s", want, r.stdout)
		}
	}
	if regexp.MustCompile(`(?m)^\s+2026-11-02\s+1\s+->\s+1\s+=`).MatchString(r.stdout) {
		t.Errorf("the dry run shows \"no change\" where the run changes rows:\n%s", r.stdout)
	}
}

// TestPolicyRulesAreCheckedAtLoad: a misspelled field in a rule is a config
// error naming the file and line, before any plan is made.
func TestPolicyRulesAreCheckedAtLoad(t *testing.T) {
	t.Parallel()
	d := setup(t)
	restore := editConfig(t, d, "request.requested_by == 'watcher'", "request.requester == 'watcher'")
	defer restore()
	r := run(t, d, nil, "plan", "sessions", "--from", "2026-11-20", "--to", "2026-11-21", "--reason", "r", "--as", "alice")
	if r.code != 2 || !regexp.MustCompile(`refill\.yaml:\d+`).MatchString(r.stderr) || !regexp.MustCompile(`requester`).MatchString(r.stderr) {
		t.Fatalf("a misspelled rule field: exit %d\n%s", r.code, r.stderr)
	}
}

// TestDryRunCountsDownstreamThroughAView: raw → mid → v (a view, lineage
// only) → top. The view passes mid's rows through, so top must be rehearsed
// after mid and shown going 1 -> 5, as the run will make it, and the plan
// must not say that what reads the view reads its rows as they are.
func TestDryRunCountsDownstreamThroughAView(t *testing.T) {
	t.Parallel()
	dir := smallProject(t, `version: 1
warehouse: sqlite:wh.db
datasets:
  raw: {table: raw, partition: {column: day}}
  mid:
    table: mid
    partition: {column: day}
    upstream: [raw]
    job: {query: "SELECT day, v FROM raw WHERE day = :partition"}
  v:
    upstream: [mid]
    lineage_only: materialized as a view
  top:
    table: top
    partition: {column: day}
    upstream: [v]
    job: {query: "SELECT day, v FROM v WHERE day = :partition"}
`,
		"CREATE TABLE raw (day TEXT, v INTEGER)",
		"CREATE TABLE mid (day TEXT, v INTEGER)",
		"CREATE VIEW v AS SELECT day, v FROM mid",
		"CREATE TABLE top (day TEXT, v INTEGER)",
		"INSERT INTO raw VALUES ('2026-11-02', 1), ('2026-11-02', 2), ('2026-11-02', 3), ('2026-11-02', 4), ('2026-11-02', 5)",
		"INSERT INTO mid VALUES ('2026-11-02', 1)",
		"INSERT INTO top VALUES ('2026-11-02', 1)",
	)
	r := step(t, dir, 0, "", "plan", "raw", "--from", "2026-11-02", "--to", "2026-11-02", "--reason", "stale chain", "--as", "alice")
	for _, want := range []string{
		`(?m)~ top .*\n\s+2026-11-02\s+1\s+->\s+5\s+\+4 .*rehearsal\n\s+expected: counted after the plan rebuilds mid, read through v \(materialized as a view\), which passes its upstream's rows through`,
		`expected after 10\n`,
	} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("the dry run lacks %s:\n%s", want, r.stdout)
		}
	}
	for _, bad := range []string{`(?m)^\s+2026-11-02\s+1\s+->\s+1\s+=`, `as they are`} {
		if regexp.MustCompile(bad).MatchString(r.stdout) {
			t.Errorf("the dry run shows %s where the view passes the rebuilt rows through:\n%s", bad, r.stdout)
		}
	}
	js := decode[planJSON](t, step(t, dir, 0, "", "plan", "raw", "--from", "2026-11-02", "--to", "2026-11-02", "--reason", "again", "--as", "alice", "-o", "json").stdout)
	for _, s := range js.Steps {
		if s.Dataset == "top" && (s.Partitions[0].ExpectedRows == nil || *s.Partitions[0].ExpectedRows != 5 || s.Partitions[0].ExpectedMethod != "rehearsal") {
			t.Errorf("top in -o json: %s rows by %s, want 5 by rehearsal", rowsOf(s.Partitions[0].ExpectedRows), s.Partitions[0].ExpectedMethod)
		}
	}
}

// TestDryRunSaysWhyARehearsalFailed: when rebuilding mid in the rehearsal
// fails (its table refuses the rows), top's rows cannot be counted after
// it: they depend on the upstream, and the approver is told why, in the
// text and in -o json.
func TestDryRunSaysWhyARehearsalFailed(t *testing.T) {
	t.Parallel()
	dir := smallProject(t, `version: 1
warehouse: sqlite:wh.db
datasets:
  raw: {table: raw, partition: {column: day}}
  mid:
    table: mid
    partition: {column: day}
    upstream: [raw]
    job: {query: "SELECT day, v FROM raw WHERE day = :partition"}
  top:
    table: top
    partition: {column: day}
    upstream: [mid]
    job: {query: "SELECT day, v FROM mid WHERE day = :partition"}
`,
		"CREATE TABLE raw (day TEXT, v INTEGER)",
		"CREATE TABLE mid (day TEXT, v INTEGER CHECK (v < 3))",
		"CREATE TABLE top (day TEXT, v INTEGER)",
		"INSERT INTO raw VALUES ('2026-11-02', 1), ('2026-11-02', 2), ('2026-11-02', 3), ('2026-11-02', 4), ('2026-11-02', 5)",
		"INSERT INTO mid VALUES ('2026-11-02', 1)",
		"INSERT INTO top VALUES ('2026-11-02', 1)",
	)
	r := step(t, dir, 0, "", "plan", "raw", "--from", "2026-11-02", "--to", "2026-11-02", "--reason", "stale chain", "--as", "alice")
	want := `(?m)~ top .*\n\s+2026-11-02\s+1\s+->\s+\?\s+depends_on_upstream\n\s+expected: the rehearsal that counts its rows after the upstream is rebuilt failed \(building mid 2026-11-02: .*CHECK constraint failed: v < 3.*\)`
	if !regexp.MustCompile(want).MatchString(r.stdout) {
		t.Errorf("the dry run lacks %s:\n%s", want, r.stdout)
	}
	p := decode[struct {
		Steps []struct {
			Dataset      string `json:"dataset"`
			ExpectedNote string `json:"expected_note"`
		} `json:"steps"`
	}](t, step(t, dir, 0, "", "plan", "raw", "--from", "2026-11-02", "--to", "2026-11-02", "--reason", "again", "--as", "alice", "-o", "json").stdout)
	for _, s := range p.Steps {
		switch {
		case s.Dataset == "top" && !strings.Contains(s.ExpectedNote, "CHECK constraint failed"):
			t.Errorf("top's expected_note in -o json: %q, want the rehearsal's failure", s.ExpectedNote)
		case s.Dataset == "mid" && s.ExpectedNote != "":
			t.Errorf("mid's own query counts it, yet it has a note: %q", s.ExpectedNote)
		}
	}
}

// TestHourHistoryKnowsTheWeek: a command job's hour-grain table is
// expected from its history, and Saturday 10:00 from Saturdays at 10:00
// (3 rows), not from the weekday mornings (7), the other Saturday hours
// (2) or the weeks' median (5).
func TestHourHistoryKnowsTheWeek(t *testing.T) {
	t.Parallel()
	var values []string
	start := time.Date(2026, 10, 31, 0, 0, 0, 0, time.UTC) // 28 days before the Saturday planned
	for ts := start; ts.Before(time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)); ts = ts.Add(time.Hour) {
		weekend := ts.Weekday() == time.Saturday || ts.Weekday() == time.Sunday
		n := 5
		switch {
		case weekend && ts.Hour() == 10:
			n = 3
		case weekend:
			n = 2
		case ts.Hour() == 10:
			n = 7
		}
		if ts.Weekday() == time.Sunday && ts.Hour() == 10 {
			n = 1 // Sunday is not Saturday either
		}
		for i := range n {
			values = append(values, fmt.Sprintf("('%s', %d)", ts.Format("2006-01-02T15"), i))
		}
	}
	dir := smallProject(t, `version: 1
warehouse: sqlite:wh.db
datasets:
  hourly:
    table: hourly
    partition: {column: hour, grain: hour}
    job: {command: ["true"]}
`,
		"CREATE TABLE hourly (hour TEXT, n INTEGER)",
		"INSERT INTO hourly VALUES "+strings.Join(values, ", "),
	)
	p := decode[planJSON](t, step(t, dir, 0, "", "plan", "hourly", "--from", "2026-11-28T10", "--to", "2026-11-28T10", "--reason", "lost hour", "--as", "alice", "-o", "json").stdout)
	if len(p.Steps) != 1 || len(p.Steps[0].Partitions) != 1 {
		t.Fatalf("plan of one hour: %+v", p.Steps)
	}
	pp := p.Steps[0].Partitions[0]
	if pp.Partition != "2026-11-28T10" || pp.ExpectedMethod != "history" || rowsOf(pp.ExpectedRows) != "3" || rowsOf(pp.CurrentRows) != "0" {
		t.Errorf("Saturday 10:00: %s %s -> %s by %s, want 0 -> 3 by history (Saturdays at 10:00)",
			pp.Partition, rowsOf(pp.CurrentRows), rowsOf(pp.ExpectedRows), pp.ExpectedMethod)
	}
}
