package main

import (
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pgProject writes refill.yaml for a PostgreSQL warehouse (and a SQLite
// state store) into a new directory, after running stmts on the warehouse.
func pgProject(t *testing.T, whDSN, datasets string, stmts ...string) string {
	t.Helper()
	db, err := sql.Open("pgx", whDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	dir := t.TempDir()
	cfg := "version: 1\nwarehouse: \"" + whDSN + "\"\ndatasets:\n" + datasets
	if err := os.WriteFile(filepath.Join(dir, "refill.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestSnapshotTablesNeverCollide: two tables whose names agree in the
// first 63 characters a snapshot table's name can hold, and two tables of
// one name in different schemas, each get a snapshot table of their own,
// and a rollback restores each from its own.
func TestSnapshotTablesNeverCollide(t *testing.T) {
	t.Parallel()
	whDSN := pgSchema(t)
	other := schemaOf(pgSchema(t))
	longA := "quarterly_finance_reconciliation_rollup_by_region_alpha"
	longB := "quarterly_finance_reconciliation_rollup_by_region_beta"
	tables := []string{longA, longB, "agg", other + ".agg"}
	stmts := []string{
		`CREATE TABLE src (day date, v int)`,
		`INSERT INTO src VALUES ('2026-11-01', 1), ('2026-11-01', 2), ('2026-11-02', 5)`,
	}
	var datasets strings.Builder
	datasets.WriteString("  src: {table: src, partition: {column: day}}\n")
	for i, tbl := range tables {
		// Each table starts with values of its own, which its job replaces
		// with its own multiple of the source's sum.
		stmts = append(stmts, `CREATE TABLE `+tbl+` (day date, total bigint)`,
			fmt.Sprintf(`INSERT INTO %s VALUES ('2026-11-01', %d), ('2026-11-02', %d)`, tbl, 1000+i, 2000+i))
		fmt.Fprintf(&datasets, "  d%d:\n    table: %s\n    partition: {column: day}\n    upstream: [src]\n    job: {query: \"SELECT day, sum(v) * %d AS total FROM src WHERE day = :partition::date GROUP BY day\"}\n", i, tbl, i+1)
	}
	dir := pgProject(t, whDSN, datasets.String(), stmts...)
	db, err := sql.Open("pgx", whDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	totals := func() string {
		t.Helper()
		var out []string
		for _, tbl := range tables {
			var a, b int64
			if err := db.QueryRow(`SELECT (SELECT total FROM `+tbl+` WHERE day = '2026-11-01'), (SELECT total FROM `+tbl+` WHERE day = '2026-11-02')`).Scan(&a, &b); err != nil {
				t.Fatalf("%s: %v", tbl, err)
			}
			out = append(out, fmt.Sprintf("%d/%d", a, b))
		}
		return strings.Join(out, " ")
	}
	const before = "1000/2000 1001/2001 1002/2002 1003/2003"

	id := decode[planJSON](t, step(t, dir, 0, "", "plan", "src", "--from", "2026-11-01", "--to", "2026-11-02", "--reason", "r", "--as", "alice", "-o", "json").stdout).ID
	snap := decode[struct {
		Partitions []struct {
			Dataset       string `json:"dataset"`
			SnapshotTable string `json:"snapshot_table"`
		} `json:"partitions"`
	}](t, step(t, dir, 0, "", "snapshot", id, "--as", "alice", "-o", "json").stdout)
	byDataset := map[string]string{}
	owner := map[string]string{}
	for _, p := range snap.Partitions {
		byDataset[p.Dataset] = p.SnapshotTable
		if o, ok := owner[p.SnapshotTable]; ok && o != p.Dataset {
			t.Errorf("%s and %s share the snapshot table %s", o, p.Dataset, p.SnapshotTable)
		}
		owner[p.SnapshotTable] = p.Dataset
		for _, part := range strings.Split(p.SnapshotTable, ".") {
			if len(part) > 63 {
				t.Errorf("snapshot table %s: %q is longer than PostgreSQL's 63 bytes", p.SnapshotTable, part)
			}
		}
	}
	if len(byDataset) != 5 || !strings.HasPrefix(byDataset["d3"], other+".") {
		t.Errorf("snapshot tables: %v, want one each for src and d0..d3, d3's in schema %s", byDataset, other)
	}
	step(t, dir, 0, "", "approve", id, "--as", "bob")
	step(t, dir, 0, "", "apply", id, "--as", "alice")
	if got, want := totals(), "3/5 6/10 9/15 12/20"; got != want {
		t.Fatalf("after apply: %s, want %s", got, want)
	}
	step(t, dir, 0, "", "rollback", id, "--as", "carol")
	if got := totals(); got != before {
		t.Errorf("after rollback: %s, want each table's own rows back: %s", got, before)
	}
}

// TestCommandJobGetsThePostgresDSN: a command job on a PostgreSQL
// warehouse is told the warehouse's own DSN in REFILL_WAREHOUSE, password
// and all so it can connect, while refill's own output never shows the
// password.
func TestCommandJobGetsThePostgresDSN(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(pgSchema(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "s3cr3tpw") // the test server trusts any password
	whDSN := u.String()
	dir := pgProject(t, whDSN, `  export:
    job:
      command: ["sh", "-c", "printf %s \"$REFILL_WAREHOUSE\" > warehouse.txt"]
`, `CREATE TABLE unused (a int)`)
	id := approvedPlan(t, dir, "export")
	r := step(t, dir, 0, "", "apply", id, "--as", "alice")
	got := mustRead(t, filepath.Join(dir, "warehouse.txt"))
	if got != whDSN {
		t.Fatalf("REFILL_WAREHOUSE = %q, want the warehouse's DSN %q", got, whDSN)
	}
	db, err := sql.Open("pgx", got)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM unused`).Scan(&n); err != nil {
		t.Errorf("a job cannot reach the warehouse with REFILL_WAREHOUSE: %v", err)
	}
	for _, out := range []string{r.stdout, r.stderr, step(t, dir, 0, "", "report", id).stdout, step(t, dir, 0, "", "show", id).stdout} {
		if strings.Contains(out, "s3cr3tpw") {
			t.Errorf("refill printed the warehouse password:\n%s", out)
		}
	}
}
