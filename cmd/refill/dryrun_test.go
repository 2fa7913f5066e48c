package main

import (
	"database/sql"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestDryRunCountsDownstreamAfterTheUpstream: raw → mid → top of query
// jobs, with mid and top stale. The approver must see top go 1 -> 5, as the
// run will make it, not "1 -> 1 =" counted against today's mid; and a job
// behind a command (whose output refill cannot see ahead) is unknown, never
// "no change", and unknown in the totals too.
func TestDryRunCountsDownstreamAfterTheUpstream(t *testing.T) {
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
	d := setup(t)
	restore := editConfig(t, d, "request.requested_by == 'watcher'", "request.requester == 'watcher'")
	defer restore()
	r := run(t, d, nil, "plan", "sessions", "--from", "2026-11-20", "--to", "2026-11-21", "--reason", "r", "--as", "alice")
	if r.code != 2 || !regexp.MustCompile(`refill\.yaml:\d+`).MatchString(r.stderr) || !regexp.MustCompile(`requester`).MatchString(r.stderr) {
		t.Fatalf("a misspelled rule field: exit %d\n%s", r.code, r.stderr)
	}
}
