//go:build duckdb

package warehouse

import (
	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/duckdb"
)

func init() {
	OpenDuckDB = func(path string) (refill.Warehouse, error) { return duckdb.Open(path) }
}
