package main

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hostileProject writes a small SQLite project whose datasets hold the
// jobs a careless or hostile engineer might write, beside honest ones, all
// over one source. Every target partition starts out exactly as its honest
// job would build it, so a proof is run on a healthy partition: the case a
// proof that never spoils its partition cannot tell from a good job.
func hostileProject(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(dir, "wh.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stmts := []string{
		`CREATE TABLE src (day TEXT NOT NULL, v INTEGER NOT NULL)`,
		`CREATE TABLE victim (id INTEGER)`,
		`INSERT INTO victim VALUES (1), (2), (3)`,
	}
	for _, day := range []string{"2026-11-01", "2026-11-02", "2026-11-03"} {
		for i := 1; i <= 4; i++ {
			stmts = append(stmts, fmt.Sprintf(`INSERT INTO src VALUES ('%s', %d)`, day, i*10))
		}
	}
	for _, tbl := range []string{"t_query", "t_sql", "t_append", "t_outside", "t_ends", "t_attach", "t_pragma"} {
		stmts = append(stmts, `CREATE TABLE `+tbl+` (day TEXT NOT NULL, total INTEGER, n INTEGER)`)
	}
	for _, tbl := range []string{"t_ignore", "t_upsert"} {
		stmts = append(stmts, `CREATE TABLE `+tbl+` (day TEXT PRIMARY KEY, total INTEGER, n INTEGER)`)
	}
	for _, tbl := range []string{"t_query", "t_sql", "t_append", "t_outside", "t_ends", "t_attach", "t_pragma", "t_ignore", "t_upsert"} {
		stmts = append(stmts, `INSERT INTO `+tbl+` SELECT day, sum(v), count(*) FROM src GROUP BY day`)
	}
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	build := "SELECT day, sum(v), count(*) FROM src WHERE day = :partition GROUP BY day"
	cfg := `version: 1
warehouse: sqlite:wh.db
datasets:
  src:
    table: src
    partition: {column: day}
  honest_query:
    table: t_query
    partition: {column: day}
    upstream: [src]
    job:
      query: "SELECT day, sum(v) AS total, count(*) AS n FROM src WHERE day = :partition GROUP BY day"
  honest_sql:
    table: t_sql
    partition: {column: day}
    upstream: [src]
    job:
      sql: "DELETE FROM t_sql WHERE day = :partition; INSERT INTO t_sql (day, total, n) ` + build + `"
  append:
    table: t_append
    partition: {column: day}
    upstream: [src]
    job:
      sql: "INSERT INTO t_append (day, total, n) ` + build + `"
  ignore:
    table: t_ignore
    partition: {column: day}
    upstream: [src]
    job:
      sql: "INSERT OR IGNORE INTO t_ignore (day, total, n) ` + build + `"
  upsert:
    table: t_upsert
    partition: {column: day}
    upstream: [src]
    job:
      sql: "INSERT INTO t_upsert (day, total, n) ` + build + ` ON CONFLICT (day) DO UPDATE SET total = excluded.total"
  outside:
    table: t_outside
    partition: {column: day}
    upstream: [src]
    job:
      query: "SELECT day, sum(v) AS total, count(*) AS n FROM src WHERE day = :partition GROUP BY day UNION ALL SELECT date(:partition, '+1 day') AS day, 5 AS total, 1 AS n"
  ends:
    table: t_ends
    partition: {column: day}
    upstream: [src]
    job:
      sql: "DELETE FROM t_ends WHERE day = :partition; INSERT INTO t_ends (day, total, n) ` + build + `; SELECT temp trigger, 1 AS begin FROM (SELECT 1 AS temp); COMMIT; DELETE FROM victim; BEGIN;"
  attach:
    table: t_attach
    partition: {column: day}
    upstream: [src]
    job:
      sql: "DELETE FROM t_attach WHERE day = :partition; INSERT INTO t_attach (day, total, n) ` + build + `; ATTACH DATABASE '.refill/state.db' AS st; DELETE FROM st.audit_log;"
  pragma:
    table: t_pragma
    partition: {column: day}
    upstream: [src]
    job:
      sql: "DELETE FROM t_pragma WHERE day = :partition; INSERT INTO t_pragma (day, total, n) ` + build + `; PRAGMA writable_schema = ON;"
`
	if err := os.WriteFile(filepath.Join(dir, "refill.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func count(t *testing.T, dir, query string, args ...any) int {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(dir, "wh.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// TestProofsAreAdversarial is the table of hostile jobs that must all be
// caught, beside the honest jobs that must all pass — each proven on a
// partition that is already exactly what the job builds.
func TestProofsAreAdversarial(t *testing.T) {
	t.Parallel()
	dir := hostileProject(t)
	for _, c := range []struct {
		dataset string
		code    int
		want    string
	}{
		{"honest_query", 0, "all four builds agree"},
		{"honest_sql", 0, "all four builds agree"},
		{"append", 5, "a rerun adds rows"},
		{"ignore", 5, "depends on what was there before"},
		{"upsert", 5, "depends on what was there before"},
		{"outside", 5, "outside that partition"},
		{"ends", 5, "tried to control the transaction (COMMIT)"},
		{"attach", 5, "tried to attach a database (.refill/state.db)"},
		{"pragma", 5, "tried to run a PRAGMA (writable_schema)"},
	} {
		t.Run(c.dataset, func(t *testing.T) {
			r := run(t, dir, nil, "prove", c.dataset, "--partition", "2026-11-02", "--as", "alice")
			if r.code != c.code || !strings.Contains(r.stdout+r.stderr, c.want) {
				t.Fatalf("prove %s: exit %d, want %d with %q\n%s%s", c.dataset, r.code, c.code, c.want, r.stdout, r.stderr)
			}
			if c.code == 5 && strings.HasPrefix(c.want, "tried to") && !strings.Contains(r.stderr, "which refill refuses: a job runs inside refill's own transaction") {
				t.Errorf("prove %s does not say why refill refuses it:\n%s", c.dataset, r.stderr)
			}
		})
	}
	// Nothing a job did inside its proof outlived it.
	if n := count(t, dir, `SELECT count(*) FROM victim`); n != 3 {
		t.Errorf("victim has %d rows after the proofs, want 3: a job ended refill's transaction", n)
	}
	if n := count(t, dir, `SELECT count(*) FROM t_outside WHERE day = '2026-11-03'`); n != 1 {
		t.Errorf("t_outside 2026-11-03 has %d rows after the proof, want 1", n)
	}
	step(t, dir, 0, "intact", "audit", "verify")

	// A failing proof stays failing: the plan is not auto, and says why.
	r := step(t, dir, 0, "", "plan", "ignore", "--from", "2026-11-02", "--to", "2026-11-02", "--reason", "r", "--as", "alice", "-o", "json")
	p := decode[planJSON](t, r.stdout)
	if p.Tier == "auto" || !strings.Contains(strings.Join(p.Reasons, " "), "proof of ignore failed") {
		t.Errorf("a plan over a job whose proof failed is %s: %v", p.Tier, p.Reasons)
	}
}

// TestQueryJobCannotWriteOutsideItsPartition: a query job that returns a
// row for the next day fails its apply, naming the row's partition, and
// the neighbour is untouched however often it is applied.
func TestQueryJobCannotWriteOutsideItsPartition(t *testing.T) {
	t.Parallel()
	dir := hostileProject(t)
	before := count(t, dir, `SELECT count(*) FROM t_outside WHERE day = '2026-11-03'`)
	for i := 0; i < 2; i++ {
		r := step(t, dir, 0, "", "plan", "outside", "--from", "2026-11-02", "--to", "2026-11-02", "--reason", "neighbour", "--as", "alice", "-o", "json")
		id := decode[planJSON](t, r.stdout).ID
		step(t, dir, 0, "", "approve", id, "--as", "bob")
		step(t, dir, 1, "2026-11-03", "apply", id, "--as", "alice")
		step(t, dir, 4, "cancel it instead", "reject", id, "--as", "bob", "--note", "writes outside its partition")
		step(t, dir, 0, "", "cancel", id, "--as", "bob", "--reason", "writes outside its partition")
	}
	if after := count(t, dir, `SELECT count(*) FROM t_outside WHERE day = '2026-11-03'`); after != before {
		t.Errorf("the neighbour partition went from %d to %d rows", before, after)
	}
}

// TestHostileJobsAreRefusedAtApply: an approved plan over a job that ends
// refill's transaction (COMMIT; DELETE FROM victim; BEGIN;), attaches the
// state store or runs a PRAGMA fails its apply, saying why, and nothing the
// job did outlives it: the victim keeps its rows, the target partition is
// as it was, the audit log is whole.
func TestHostileJobsAreRefusedAtApply(t *testing.T) {
	t.Parallel()
	dir := hostileProject(t)
	entries := func() int {
		t.Helper()
		var n int
		if err := openState(t, dir).QueryRow(`SELECT count(*) FROM audit_log`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, c := range []struct{ dataset, table, want string }{
		{"ends", "t_ends", "tried to control the transaction (COMMIT)"},
		{"attach", "t_attach", "tried to attach a database (.refill/state.db)"},
		{"pragma", "t_pragma", "tried to run a PRAGMA (writable_schema)"},
	} {
		t.Run(c.dataset, func(t *testing.T) {
			id := approvedPlan(t, dir, c.dataset)
			before := entries()
			r := step(t, dir, 1, c.want, "apply", id, "--as", "alice")
			if !strings.Contains(r.stderr, "which refill refuses") || !strings.Contains(r.stdout, "0 of 1 partitions published") {
				t.Errorf("apply %s:\nstdout: %s\nstderr: %s", c.dataset, r.stdout, r.stderr)
			}
			if n := count(t, dir, `SELECT count(*) FROM victim`); n != 3 {
				t.Fatalf("victim has %d rows after applying %s, want 3: the job ended refill's transaction", n, c.dataset)
			}
			if n := count(t, dir, `SELECT count(*) FROM `+c.table+` WHERE day = '2026-11-01' AND total = 100 AND n = 4`); n != 1 {
				t.Errorf("%s 2026-11-01 changed under a refused job", c.table)
			}
			if after := entries(); after <= before {
				t.Errorf("the audit log had %d entries before applying %s, %d after", before, c.dataset, after)
			}
			step(t, dir, 0, "status failed", "show", id)
		})
	}
	step(t, dir, 0, "intact", "audit", "verify")
}
