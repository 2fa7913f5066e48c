package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// holdDuckDB opens the DuckDB file at path in this process, with a table
// src and a table daily the config below builds, and returns how to let it
// go; nil in tests built without the build tag duckdb.
var holdDuckDB func(t *testing.T, path string) (release func())

// duckdbJob is a command job that writes one partition of a DuckDB
// warehouse itself (REFILL_WAREHOUSE), as dbt-duckdb would; nil without the
// build tag duckdb.
var duckdbJob func(partition string) int

// TestWarehouseDuckDB: a refill built without DuckDB says so and how to
// get it (exit 2); one built with it plans on a DuckDB file, and while
// another process holds the file it says that, not something cryptic.
func TestWarehouseDuckDB(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := `version: 1
warehouse: duckdb:wh.duckdb
datasets:
  daily:
    table: daily
    partition: {column: day}
    job:
      query: SELECT day, count(*) AS n FROM src WHERE day = :partition GROUP BY day
`
	if err := os.WriteFile(filepath.Join(dir, "refill.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "wh.duckdb")
	plan := []string{"plan", "daily", "--from", "2026-11-28", "--to", "2026-11-29", "--reason", "a late load", "--as", "alice", "-o", "json"}
	if holdDuckDB == nil {
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		r := run(t, dir, nil, plan...)
		if r.code != 2 || !strings.Contains(r.stderr, "built without DuckDB") || !strings.Contains(r.stderr, "-tags duckdb") {
			t.Errorf("exit %d, stderr %q; want 2 and how to build with DuckDB", r.code, r.stderr)
		}
		return
	}
	release := holdDuckDB(t, path)
	r := run(t, dir, nil, plan...)
	if r.code == 0 || r.code == 2 || !strings.Contains(r.stderr, "another process has the file open") {
		t.Errorf("while another process holds the file: exit %d, stderr %q; want an environment failure saying so", r.code, r.stderr)
	}
	release()
	r = run(t, dir, nil, plan...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	p := decode[planJSON](t, r.stdout)
	if len(p.Steps) != 1 || p.Steps[0].Dataset != "daily" || len(p.Steps[0].Partitions) != 2 {
		t.Fatalf("plan = %+v", p)
	}
	for _, pp := range p.Steps[0].Partitions {
		if pp.CurrentRows == nil || *pp.CurrentRows != 1 || pp.ExpectedRows == nil || *pp.ExpectedRows != 1 {
			t.Errorf("%s: current %v, expected %v; want 1 and 1, counted in DuckDB", pp.Partition, pp.CurrentRows, pp.ExpectedRows)
		}
	}
}
