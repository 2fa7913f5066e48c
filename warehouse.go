package refill

import (
	"context"
	"errors"
	"fmt"
	"time"
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
	// Timezone is the dataset's partition.timezone; drivers ignore it
	// (partition keys are UTC), the gate's seasons follow it.
	Timezone string `json:"timezone,omitempty"`
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
	// Every driver profiles, rehearses, transacts and anchors: these are
	// part of the contract, tested by warehouse/warehousetest, not
	// options found by type assertion.
	Profiler
	Rehearser
	Transactor
	Anchorer
}

// ProfileSpec is what the source gate measures in one scan of a table.
type ProfileSpec struct {
	// NotNull columns get a null count per partition.
	NotNull []string
	// TimeOrder pairs get a count of rows where Earlier > Later.
	TimeOrder []TimeOrderCheck
	// NoFuture columns get a count of rows later than Now, and their max.
	NoFuture []string
	// Now is the clock future timestamps are judged against.
	Now time.Time
	// Accepted columns get a count of non-NULL rows and of those outside
	// their list, in the same scan.
	Accepted []AcceptedValues
	// Drift columns get, in the same scan, their mean and zero count when
	// the warehouse holds them as numbers, and, in one grouped query for
	// the whole range, their distinct count and most frequent value's count.
	Drift []string
	// Unique is a key whose duplicates within each partition are found by
	// one grouped query for the whole range.
	Unique []string
}

// Profile is one partition's measurements from a profile scan.
type Profile struct {
	Rows int64
	// Nulls is keyed by column name.
	Nulls map[string]int64
	// Inversions is indexed like ProfileSpec.TimeOrder.
	Inversions []int64
	// Future is keyed by column name.
	Future map[string]int64
	// Accepted is keyed by ProfileSpec.Accepted's columns.
	Accepted map[string]AcceptedProfile
	// Numeric is keyed by those ProfileSpec.Drift columns that hold numbers.
	Numeric map[string]NumericProfile
	// Values is keyed by ProfileSpec.Drift's columns.
	Values map[string]ValueProfile
	// Duplicates describes the keys of ProfileSpec.Unique that more than
	// one row shares; nil when there are none.
	Duplicates *Duplicates
}

// AcceptedProfile counts a column's non-NULL values and those outside its
// accepted list.
type AcceptedProfile struct {
	NonNull, Outside int64
}

// NumericProfile is a numeric column's mean (over non-NULL values) and
// zero count.
type NumericProfile struct {
	NonNull int64
	Mean    float64
	Zeros   int64
}

// ValueProfile is a column's count of non-NULL values, of distinct ones,
// and of rows holding the most frequent one.
type ValueProfile struct {
	NonNull, Distinct, Top int64
}

// Duplicates summarises a partition's duplicate keys: how many keys are
// shared, how many rows share them, the most rows sharing one key, and
// that key (its columns' values as text).
type Duplicates struct {
	Keys, Rows, Max int64
	Example         []string
}

// Digest is a partition's row count and content checksum: the sum modulo
// 2^64 of a 64-bit hash of every row, so it ignores row order but counts
// duplicates (docs/design.md §9). It is only comparable within one warehouse,
// and with a digest of the same checksum version (digest.go).
type Digest struct {
	Rows     int64  `json:"rows"`
	Checksum string `json:"checksum"` // 16 hex digits, after "v<N>:" from version 2 on
}

// Profiler is the part of a warehouse the source gate uses.
type Profiler interface {
	// Profile scans [from, to] of t once and returns every non-empty
	// partition's measurements. Drift value shapes and Unique keys take
	// one grouped query each for the whole range, never one per partition.
	Profile(ctx context.Context, t TableRef, spec ProfileSpec, from, to string) (map[string]Profile, error)
}

// Rehearser is the part of a warehouse that proofs use: building partitions
// inside a transaction that is always rolled back.
type Rehearser interface {
	// Digest returns the count and checksum of one partition of t.
	Digest(ctx context.Context, t TableRef, partition string) (Digest, error)
	// Rehearse runs fn inside one transaction and always rolls it back,
	// whatever fn returns, so the warehouse is left exactly as it was.
	Rehearse(ctx context.Context, fn func(tx WarehouseTx) error) error
}

// Transactor runs fn inside one warehouse transaction and commits it when
// fn returns nil (rolls back otherwise): the write side of a warehouse, used
// to publish partitions and to reset a proof warehouse.
type Transactor interface {
	Transact(ctx context.Context, fn func(tx WarehouseTx) error) error
}

// WarehouseTx is what a rehearsal (and later a run) may do inside one
// warehouse transaction.
type WarehouseTx interface {
	// ReplaceFromQuery deletes partition from t and inserts the rows of a
	// query job (which binds :partition), matching its output columns to
	// t's columns by name: refill owns the write.
	ReplaceFromQuery(ctx context.Context, t TableRef, query, partition string) (inserted int64, err error)
	// ExecSQL runs an sql job's statements in order, :partition bound.
	// t is the job's own table: the one table the job may write, and only
	// in partition.
	ExecSQL(ctx context.Context, t TableRef, sql, partition string) error
	// DeletePartition empties one partition of t.
	DeletePartition(ctx context.Context, t TableRef, partition string) (deleted int64, err error)
	// Digest is Rehearser.Digest as seen inside the transaction.
	Digest(ctx context.Context, t TableRef, partition string) (Digest, error)
	// MarkPublished records in the warehouse, inside the publishing
	// transaction, that a plan's partition is published; already is true
	// (and nothing is written) when it was before. Because the mark commits
	// with the partition, a run that dies between publishing and recording
	// it in the state store does not publish the partition again.
	MarkPublished(ctx context.Context, planID, dataset, partition string) (already bool, err error)
	// Profile is Profiler.Profile as seen inside the transaction: how a
	// run audits the rows it staged before they are published.
	Profile(ctx context.Context, t TableRef, spec ProfileSpec, from, to string) (map[string]Profile, error)
	// CopyPartitions creates table dst holding a copy of t's rows in
	// partitions [from, to]: a snapshot before a manual run.
	CopyPartitions(ctx context.Context, t TableRef, dst, from, to string) error
	// RestorePartition replaces one partition of t with that partition's
	// rows in table src (a snapshot made by CopyPartitions), matching
	// columns by name, never by position.
	RestorePartition(ctx context.Context, t TableRef, src, partition string) (restored int64, err error)
	// DropTable drops table name if it exists: a snapshot left behind by
	// a snapshot that failed half-way, or one whose plan is done with it.
	DropTable(ctx context.Context, name string) error
	// Spoil makes one partition of t deliberately stale, so that a proof
	// can show a job does not depend on what was there before: it changes
	// the values of one row, deletes another, and adds an extra changed
	// copy of a row (each skipped when the partition is too small or a
	// constraint refuses it). It returns what it did, in words, and
	// changed=false when it could change nothing (an empty partition).
	Spoil(ctx context.Context, t TableRef, partition string) (what string, changed bool, err error)
	// Diff copies one partition of t aside, runs build (which rebuilds it
	// in this transaction), and compares the partition build left with
	// the copy, in the warehouse: rows removed, added, changed and
	// unchanged, numeric columns' sums, and a few changed rows. It fails
	// only when build fails; a comparison that cannot be made is a diff
	// whose Skipped says why, and leaves the transaction usable.
	Diff(ctx context.Context, t TableRef, partition string, spec DiffSpec, build func() error) (*PartitionDiff, error)
	// Anchor records the audit log's head in the warehouse, inside the
	// publishing transaction, so that a log rewritten or truncated in the
	// state store no longer matches what the warehouse holds.
	Anchor(ctx context.Context, a AuditAnchor) error
}

// AuditAnchor is the audit log's head as written into the warehouse at a
// publish: the log must still hold entry Seq with hash Hash.
type AuditAnchor struct {
	// Store is the state store whose log this is (one warehouse may serve
	// several).
	Store string `json:"store,omitempty"`
	Seq   int64  `json:"seq"`
	Hash  string `json:"hash"`
	// Keyed is whether the log was keyed when its head was Seq. A log
	// never stops being keyed, so a keyed anchor says that every later
	// state of the log is keyed too: a log found unkeyed was re-hashed by
	// someone without the key. Anchors written before anchors recorded it
	// read as unkeyed.
	Keyed bool `json:"keyed,omitempty"`
	// MAC binds Store, Seq, Hash and Keyed under the audit key (HMAC-SHA256)
	// when the state store had one, so that someone without the key can
	// neither claim another store's anchors nor drop an anchor's Keyed.
	// Empty when there was no key.
	MAC string `json:"mac,omitempty"`
}

// Yielder is a warehouse that holds its file exclusively while open
// (DuckDB): Yield lets go of it, if nothing of refill's uses it, just
// before refill starts a command job that writes the warehouse itself. The
// warehouse opens it again on its next use.
type Yielder interface {
	Yield()
}

// Yield calls w's Yield if it is a Yielder.
func Yield(w any) {
	if y, ok := w.(Yielder); ok {
		y.Yield()
	}
}

// Anchorer reads back the audit anchors a warehouse holds.
type Anchorer interface {
	// LatestAnchor returns store's anchor with the highest Seq, ok=false
	// when the warehouse holds none for it.
	LatestAnchor(ctx context.Context, store string) (a AuditAnchor, ok bool, err error)
	// LatestAnchors returns the latest anchor of every state store the
	// warehouse holds anchors of, ordered by store: a store whose own
	// are missing can see whether its id was changed.
	LatestAnchors(ctx context.Context) ([]AuditAnchor, error)
	// Anchors returns every anchor of store, oldest first: a log put back
	// from an older copy and grown past its latest anchor since no longer
	// matches the older ones.
	Anchors(ctx context.Context, store string) ([]AuditAnchor, error)
}

// OutsidePartitionError is a job that produced a row outside the partition
// it was asked to build: refill owns the write and never lets one
// partition's job touch another's rows.
type OutsidePartitionError struct {
	Table     string
	Partition string
	// Value is the partition column's value of one offending row.
	Value string
	// Rows counts the offending rows, when known (0 if not).
	Rows int64
}

func (e *OutsidePartitionError) Error() string {
	n := ""
	if e.Rows > 0 {
		n = fmt.Sprintf("%d row(s), for example ", e.Rows)
	}
	return fmt.Sprintf("the job for partition %s of %s returned rows outside that partition: %s%s; a job may only produce rows of the partition it builds (filter on :partition)", e.Partition, e.Table, n, e.Value)
}
