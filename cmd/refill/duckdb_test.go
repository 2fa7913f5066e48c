//go:build duckdb

package main

func init() {
	buildTags = "duckdb"
	demoEngines = append(demoEngines, "duckdb")
}
