package refill

import (
	"context"
	"errors"
)

// ErrNoTable is returned by a Warehouse when a table does not exist.
var ErrNoTable = errors.New("table does not exist")

// Column is one column of a warehouse table as the warehouse reports it.
type Column struct {
	Name string `json:"name"`
	// Type is the warehouse's declared type, lower-cased (e.g. "integer",
	// "text", "timestamp with time zone").
	Type string `json:"type"`
}

// TableRef names a partitioned table: which column holds the partition key
// and at what grain.
type TableRef struct {
	// Table may be schema-qualified ("analytics.events").
	Table  string `json:"table"`
	Column string `json:"column"`
	Grain  Grain  `json:"grain"`
}

// Warehouse is where datasets live. Drivers keep the heavy work in the
// warehouse: refill asks for counts and aggregates, never rows.
//
// Table and column names come as written in refill.yaml, validated by the
// config loader: plain identifiers, or double-quoted ones that keep their
// case. Each driver folds and quotes them as its engine reads SQL (one place
// per engine, sqltext.Dialect.QuoteName). Partition values are always bound
// parameters.
type Warehouse interface {
	// Driver names the driver ("sqlite", "postgres").
	Driver() string
	// Ping checks the warehouse is reachable.
	Ping(ctx context.Context) error
	// Columns returns a table's columns in table order, or an error wrapping
	// ErrNoTable.
	Columns(ctx context.Context, table string) ([]Column, error)
	// PartitionCounts returns the row count of every non-empty partition in
	// [from, to] (partition keys of t.Grain) in one grouped query.
	PartitionCounts(ctx context.Context, t TableRef, from, to string) (map[string]int64, error)
	// QueryCounts counts, without writing anything, the rows a query job
	// would produce for each partition, in one statement for all of them.
	// The query binds :partition.
	QueryCounts(ctx context.Context, query string, partitions []string) (map[string]int64, error)
	// Close releases the connection pool.
	Close() error
}
