// Package sqlite is the SQLite warehouse: one file, opened with
// modernc.org/sqlite (pure Go, so refill stays one static binary).
//
// SQLite has no date type: partition columns hold text, either the partition
// key itself ('2026-11-02', '2026-11-02T13') or a timestamp SQLite's date
// functions read ('2026-11-02 13:45:00', '2026-11-02T13:45:00Z',
// '2026-11-02 15:45:00+02:00'). Timestamps are bucketed in UTC.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/dsn"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// queryBatch is how many partitions one QueryCounts statement counts.
// SQLite caps a compound SELECT at 500 terms by default; 100 keeps each
// statement small while a year of days still takes only four round trips.
const queryBatch = 100

// Warehouse is a SQLite database file used as a warehouse.
type Warehouse struct {
	db        *sql.DB
	ownTables atomic.Bool // refill_published and refill_audit_anchor are known to exist
	// writer is the file's turn to write, shared by every Warehouse of the
	// same file in this process (see writers).
	writer chan struct{}
}

// writers hands out one turn per SQLite file and process: SQLite lets
// one transaction write a file at a time, and refill's own partitions
// queue here, each for as long as the others take, rather than in
// SQLite's busy handler, which gives up after its timeout (slow
// partitions, three at a time, used to fail on the lock).
var writers = struct {
	sync.Mutex
	byFile map[string]chan struct{}
}{byFile: map[string]chan struct{}{}}

func writerOf(path string) chan struct{} {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	writers.Lock()
	defer writers.Unlock()
	w := writers.byFile[path]
	if w == nil {
		w = make(chan struct{}, 1)
		writers.byFile[path] = w
	}
	return w
}

var _ refill.Warehouse = (*Warehouse)(nil)

// Open opens (and creates, if missing) the SQLite database at path and pings
// it. WAL lets refill read while a job writes, and the busy timeout makes a
// writer wait for a lock instead of failing at once. Callers that must not
// create a file, such as the configured warehouse, check it exists first.
func Open(path string) (*Warehouse, error) {
	if strings.ContainsRune(path, '?') {
		// The driver would read everything after '?' as its parameters.
		return nil, refill.BadInputf("sqlite path %q contains %q; rename the file", path, "?")
	}
	db, err := sql.Open("sqlite", path+"?"+dsn.SQLiteWAL)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	if err := db.Ping(); err != nil {
		db.Close()
		if code(err) == sqlite3.SQLITE_NOTADB {
			return nil, refill.BadInputf("%s is not a SQLite database", path)
		}
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	return &Warehouse{db: db, writer: writerOf(path)}, nil
}

// DB returns the underlying database, for tests and the demo to load data.
func (w *Warehouse) DB() *sql.DB { return w.db }

// Driver names the driver.
func (w *Warehouse) Driver() string { return "sqlite" }

// Ping checks the database file can still be read.
func (w *Warehouse) Ping(ctx context.Context) error { return w.db.PingContext(ctx) }

// Close closes the database.
func (w *Warehouse) Close() error { return w.db.Close() }

// querier is what reads and writes run on: the pool, or the one connection
// a rehearsal holds its transaction on.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Columns returns the table's columns in table order with their declared
// types lower-cased. A name schema.table looks in that attached schema.
// SQLite ignores the case of names, so Events, EVENTS and '"Events"' in
// the config all name the table events.
func (w *Warehouse) Columns(ctx context.Context, table string) ([]refill.Column, error) {
	return columns(ctx, w.db, table)
}

func columns(ctx context.Context, db querier, table string) ([]refill.Column, error) {
	schema, name := splitTable(table)
	q, args := "SELECT name, lower(type) FROM pragma_table_info(?1) ORDER BY cid", []any{name}
	if schema != "" {
		q, args = "SELECT name, lower(type) FROM pragma_table_info(?1, ?2) ORDER BY cid", []any{name, schema}
	}
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("columns of %s: %w", table, err)
	}
	defer rows.Close()
	var cols []refill.Column
	for rows.Next() {
		var c refill.Column
		if err := rows.Scan(&c.Name, &c.Type); err != nil {
			return nil, fmt.Errorf("columns of %s: %w", table, err)
		}
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("columns of %s: %w", table, err)
	}
	if len(cols) == 0 {
		return nil, &sqltext.NoTableError{Table: table}
	}
	return cols, nil
}

// splitTable returns the schema (or "") and the name of a table name from
// the config, as SQLite stores them: without quotes.
func splitTable(table string) (schema, name string) {
	parts := sqltext.SQLite.Resolve(table)
	if len(parts) == 1 {
		return "", parts[0]
	}
	return parts[0], strings.Join(parts[1:], ".")
}

// PartitionCounts counts the rows of every non-empty partition in [from, to]
// with one grouped query.
func (w *Warehouse) PartitionCounts(ctx context.Context, t refill.TableRef, from, to string) (map[string]int64, error) {
	cols, err := columns(ctx, w.db, t.Table)
	if err != nil {
		return nil, err // names the table already
	}
	f, err := partitionFilter(t, cols, from, to)
	if err != nil {
		return nil, fmt.Errorf("partition counts of %s: %w", t.Table, err)
	}
	q := fmt.Sprintf("SELECT %s AS p, count(*) FROM %s WHERE %s GROUP BY 1", f.key, sqltext.SQLite.QuoteName(t.Table), f.where)
	rows, err := w.db.QueryContext(ctx, q, f.args...)
	if err != nil {
		return nil, fmt.Errorf("partition counts of %s: %w", t.Table, err)
	}
	defer rows.Close()
	counts := map[string]int64{}
	for rows.Next() {
		var p string
		var n int64
		if err := rows.Scan(&p, &n); err != nil {
			return nil, fmt.Errorf("partition counts of %s: %w", t.Table, err)
		}
		counts[p] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("partition counts of %s: %w", t.Table, err)
	}
	return counts, nil
}

// filter selects the rows of a range of partitions: where is the predicate,
// with its arguments numbered ?1 to ?4, and key renders a row's partition.
type filter struct {
	key   string
	where string
	args  []any
}

// partitionFilter returns the filter for partitions [from, to] of t, whose
// columns are cols.
//
// The range is filtered twice: first on the raw column, with text bounds a
// day wider than the range on each side, which an index on the column can
// serve and which no timestamp's UTC offset can move a row across; then on
// the partition key itself, which is exact.
func partitionFilter(t refill.TableRef, cols []refill.Column, from, to string) (filter, error) {
	c, err := partitionColumn(t, cols)
	if err != nil {
		return filter{}, err
	}
	key, err := partitionKey(t, cols)
	if err != nil {
		return filter{}, err
	}
	lo, hi, err := sqltext.DayBounds(t.Grain, from, to)
	if err != nil {
		return filter{}, err
	}
	return filter{
		key:   key,
		where: fmt.Sprintf("%[1]s >= ?1 AND %[1]s < ?2 AND %[2]s BETWEEN ?3 AND ?4", sqltext.QuoteIdent(c.Name), key),
		args:  []any{lo, hi, from, to},
	}, nil
}

// partitionColumn finds t's partition column among cols, the table's
// columns, as the config names it.
func partitionColumn(t refill.TableRef, cols []refill.Column) (refill.Column, error) {
	c, ok := sqltext.SQLite.Column(cols, t.Column)
	if !ok {
		return c, sqltext.SQLite.NoColumn(t.Table, t.Column, "the partition column", cols)
	}
	return c, nil
}

// partitionKey returns the SQL expression that renders t's partition column
// as a partition key of t's grain. Values in key form ('2026-11-02',
// '2026-11-02T13') are cut, not parsed; anything else is read as a timestamp
// and converted to UTC by strftime, which yields NULL (no partition) for
// text that is not a time.
func partitionKey(t refill.TableRef, cols []refill.Column) (string, error) {
	return partitionKeyOf(t, cols, "")
}

// partitionKeyOf is partitionKey with the partition column read from row,
// as NEW."day" is in a trigger ("" for the table's own rows).
func partitionKeyOf(t refill.TableRef, cols []refill.Column, row string) (string, error) {
	c, err := partitionColumn(t, cols)
	if err != nil {
		return "", err
	}
	col := sqltext.QuoteIdent(c.Name)
	if row != "" {
		col = row + "." + col
	}
	typ := c.Type
	// Columns of INTEGER or REAL affinity hold numbers, not date text: a
	// text range over them would silently match nothing.
	if strings.Contains(typ, "int") || strings.Contains(typ, "real") || strings.Contains(typ, "floa") || strings.Contains(typ, "doub") {
		return "", refill.BadInputf("partition column %s.%s is %s; refill reads SQLite partition columns as text dates or timestamps", t.Table, t.Column, typ)
	}
	switch t.Grain {
	case refill.GrainDay, "":
		return fmt.Sprintf("CASE length(%[1]s) WHEN 10 THEN %[1]s WHEN 13 THEN substr(%[1]s, 1, 10) ELSE strftime('%%Y-%%m-%%d', %[1]s) END", col), nil
	case refill.GrainHour:
		if typ == "date" {
			return "", refill.BadInputf("partition column %s.%s is a date, which has no hours; use grain day or a timestamp column", t.Table, t.Column)
		}
		return fmt.Sprintf("CASE WHEN length(%[1]s) = 13 THEN %[1]s ELSE strftime('%%Y-%%m-%%dT%%H', %[1]s) END", col), nil
	default:
		return "", refill.BadInputf("dataset table %s has unknown partition grain %q (want day or hour)", t.Table, t.Grain)
	}
}

// QueryCounts counts the rows query yields for each partition, in one
// statement per batch of partitions, inside a transaction that is always
// rolled back, under the guard that lets a query only read (guard.go). The
// query is first checked to be a single statement so that it can be
// wrapped in a count; the guard, not that check, is what keeps it from
// writing or leaving the transaction.
func (w *Warehouse) QueryCounts(ctx context.Context, query string, partitions []string) (map[string]int64, error) {
	parts := sqltext.Unique(partitions)
	counts := make(map[string]int64, len(parts))
	if len(parts) == 0 {
		return counts, nil
	}
	if _, err := sqltext.SQLite.Subquery(query); err != nil {
		return nil, err
	}
	conn, err := w.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("query counts: %w", err)
	}
	tainted := false
	defer func() {
		if tainted {
			discard(conn)
		} else {
			conn.Close()
		}
	}()
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		return nil, fmt.Errorf("query counts: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK") // always: a count must leave nothing behind
	tainted, err = guarded(conn, newQueryGuard(""), parts[0], func() error {
		for start := 0; start < len(parts); start += queryBatch {
			batch := parts[start:min(start+queryBatch, len(parts))]
			if err := countBatch(ctx, conn, query, batch, counts); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return counts, nil
}

// countBatch runs one counting statement for batch and adds its counts.
func countBatch(ctx context.Context, conn *sql.Conn, query string, batch []string, counts map[string]int64) error {
	stmt, params, err := sqltext.SQLite.CountEach(query, len(batch))
	if err != nil {
		return err
	}
	args := make([]any, params)
	for i := range params {
		args[i] = batch[i]
	}
	rows, err := conn.QueryContext(ctx, stmt, args...)
	if err != nil {
		return queryError(ctx, err, batch[0])
	}
	defer rows.Close()
	for rows.Next() {
		var i int
		var n int64
		if err := rows.Scan(&i, &n); err != nil {
			return fmt.Errorf("query counts: %w", err)
		}
		counts[batch[i]] = n
	}
	if err := rows.Err(); err != nil {
		return queryError(ctx, err, batch[0])
	}
	return nil
}

// queryError classifies an error from a job query. A cancelled context and
// the errors of a busy, full or broken database are the environment's; any
// other failure (syntax, an unknown table or column, a parameter the query
// invents, an attempted write) is the query's, and so bad input.
func queryError(ctx context.Context, err error, partition string) error {
	if ctx.Err() != nil {
		return fmt.Errorf("query counts from partition %s: %w", partition, err)
	}
	switch code(err) {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_NOMEM, sqlite3.SQLITE_IOERR,
		sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_FULL, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PROTOCOL,
		sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_INTERRUPT, sqlite3.SQLITE_PERM, sqlite3.SQLITE_INTERNAL:
		return fmt.Errorf("query counts from partition %s: %w", partition, err)
	}
	return &sqltext.QueryError{Partition: partition, Err: err}
}

// code returns the primary SQLite result code of err, or 0.
func code(err error) int {
	var e *msqlite.Error
	if errors.As(err, &e) {
		return e.Code() & 0xff
	}
	return 0
}
