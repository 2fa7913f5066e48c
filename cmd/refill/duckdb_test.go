//go:build duckdb

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/refill-dev/refill/warehouse/duckdb"
)

func init() {
	buildTags = "duckdb"
	demoEngines = append(demoEngines, "duckdb")
}

func init() {
	holdDuckDB = func(t *testing.T, path string) func() {
		w, err := duckdb.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{
			"CREATE TABLE src (day DATE, v INTEGER)",
			"INSERT INTO src VALUES ('2026-11-28', 1), ('2026-11-28', 2), ('2026-11-29', 3)",
			"CREATE TABLE daily (day DATE, n BIGINT)",
			"INSERT INTO daily VALUES ('2026-11-28', 2), ('2026-11-29', 1)",
		} {
			if _, err := w.DB().Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		return func() { w.Close() }
	}
}

func init() {
	duckdbJob = func(partition string) int {
		path, ok := strings.CutPrefix(os.Getenv("REFILL_WAREHOUSE"), "duckdb:")
		if !ok {
			fmt.Fprintln(os.Stderr, "REFILL_WAREHOUSE is not a duckdb: DSN:", os.Getenv("REFILL_WAREHOUSE"))
			return 1
		}
		w, err := duckdb.Open(path) // at once: refill must have let go of the file
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer w.Close()
		for _, q := range []string{
			"DELETE FROM daily WHERE day = CAST($1 AS DATE)",
			"INSERT INTO daily SELECT CAST($1 AS DATE), i FROM range(3) t(i)",
		} {
			if _, err := w.DB().Exec(q, partition); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		return 0
	}
}

// TestDuckDBCommandJob: a command job writes a DuckDB warehouse itself
// while refill runs its plan, as dbt-duckdb would: refill lets go of the
// file before it starts the job, and opens it again to record the publish.
func TestDuckDBCommandJob(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := fmt.Sprintf(`version: 1
warehouse: duckdb:wh.duckdb
run: {attempts: 1}
datasets:
  daily:
    table: daily
    partition: {column: day}
    job:
      command: [%q, "duckdb-job", "{{partition}}"]
`, self)
	if err := os.WriteFile(filepath.Join(dir, "refill.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "wh.duckdb")
	w, err := duckdb.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.DB().Exec("CREATE TABLE daily (day DATE, n BIGINT); INSERT INTO daily VALUES ('2026-11-01', 7)"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	id := approvedPlan(t, dir, "daily")
	step(t, dir, 0, "", "apply", id, "--as", "alice")

	w, err = duckdb.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var rows, marks int
	if err := w.DB().QueryRow("SELECT (SELECT count(*) FROM daily WHERE day = '2026-11-01' AND n < 3), (SELECT count(*) FROM refill_published WHERE plan_id = $1)", id).Scan(&rows, &marks); err != nil {
		t.Fatal(err)
	}
	if rows != 3 || marks != 1 {
		t.Errorf("after the run: %d rows the job wrote (want 3), %d publish marks (want 1)", rows, marks)
	}
}
