//go:build duckdb

package whtest

import _ "github.com/refill-dev/refill/warehouse" // registers the DuckDB opener with the duckdb build tag

func init() { Drivers = append(Drivers, "duckdb") }
