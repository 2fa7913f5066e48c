//go:build duckdb

package main

import (
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
