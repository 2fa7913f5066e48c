//go:build duckdb

// Package duckdb is the DuckDB warehouse: one file, embedded through
// github.com/duckdb/duckdb-go (cgo), so an analytical engine needs no
// server. It is built only with the build tag duckdb.
//
// Partition columns may be DATE (day grain), TIMESTAMP or TIMESTAMPTZ
// (either grain; bucketed in UTC), or text holding partition keys
// ('2026-11-02', '2026-11-02T13') or timestamps DuckDB reads. Names from the
// config are matched ignoring case, as DuckDB matches them.
//
// DuckDB lets one process open a file at a time. refill holds it only while
// it uses it, and two seconds after; it lets go at once before a command
// job (which may open the file itself, as dbt-duckdb does). Another
// process that needs the file while refill holds it fails, and says so.
// Within a process every Warehouse of a file shares one database.
//
// The database is opened with external access off: no job can read or
// write files (read_csv, COPY), attach databases or load extensions, and
// the configuration is locked, so no statement can change a setting.
package duckdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// d is the dialect every statement here is written in.
var d = sqltext.DuckDB

// queryBatch is how many partitions one QueryCounts statement counts.
const queryBatch = 100

// Warehouse is a DuckDB database file used as a warehouse.
type Warehouse struct {
	inst   *instance
	closed atomic.Bool
}

var _ refill.Warehouse = (*Warehouse)(nil)

// instance is one database file, shared by every Warehouse of it in this
// process: DuckDB must not open one file twice. It is open only while
// refill uses it, and linger after: DuckDB lets one process hold a file,
// so an idle refill serve lets a refill command, or a command job, open it.
type instance struct {
	path string
	// mu guards db, users, pinned and idle.
	mu sync.Mutex
	// db is the open database, nil while the file is let go.
	db *sql.DB
	// users counts the operations using db now; pinned is set once DB()
	// handed it out, after which it stays open.
	users  int
	pinned bool
	idle   *time.Timer
	refs   int
	// writer is the file's turn to write: one refill transaction at a
	// time, so that two partitions of a table never conflict (DuckDB
	// would abort the second at its commit).
	writer    chan struct{}
	ownTables atomic.Bool
	creating  sync.Mutex
}

// linger is how long the file stays open after refill's last use of it,
// so that a plan's many reads do not each open it again (an open costs
// tens of milliseconds).
const linger = 2 * time.Second

var instances = struct {
	sync.Mutex
	byPath map[string]*instance
}{byPath: map[string]*instance{}}

// settings are the options every instance opens with.
const settings = "enable_external_access=false&autoload_known_extensions=false&autoinstall_known_extensions=false&allow_community_extensions=false"

// Open opens (and creates, if missing) the DuckDB database at path. Callers
// that must not create a file, such as the configured warehouse, check it
// exists first. The file is let go when idle and opened again on use.
func Open(path string) (*Warehouse, error) {
	if strings.ContainsRune(path, '?') {
		return nil, refill.BadInputf("duckdb path %q contains %q; rename the file", path, "?")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open duckdb %s: %w", path, err)
	}
	instances.Lock()
	defer instances.Unlock()
	in := instances.byPath[abs]
	if in == nil {
		in = &instance{path: abs, writer: make(chan struct{}, 1)}
	}
	// Opened now, so that a file that is no database, or one another
	// process holds, fails here.
	_, done, err := in.use()
	if err != nil {
		return nil, err
	}
	done()
	in.refs++
	instances.byPath[abs] = in
	return &Warehouse{inst: in}, nil
}

// use returns the open database, opening it if it was let go, and done,
// which the caller calls when it no longer uses it.
func (in *instance) use() (*sql.DB, func(), error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.idle != nil {
		in.idle.Stop()
		in.idle = nil
	}
	if in.db == nil {
		db, err := connect(in.path)
		if err != nil {
			return nil, nil, err
		}
		in.db = db
	}
	in.users++
	var once sync.Once
	return in.db, func() { once.Do(in.done) }, nil
}

func (in *instance) done() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.users--
	if in.users == 0 && !in.pinned && in.db != nil {
		in.idle = time.AfterFunc(linger, func() { in.letGo(false) })
	}
}

// letGo closes the database if nothing uses it; now closes it even if it
// was used a moment ago (Yield).
func (in *instance) letGo(bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.users > 0 || in.pinned || in.db == nil {
		return
	}
	if in.idle != nil {
		in.idle.Stop()
		in.idle = nil
	}
	_ = in.db.Close()
	in.db = nil
}

// connect opens the file with refill's settings.
func connect(path string) (*sql.DB, error) {
	c, err := duckdb.NewConnector(path+"?"+settings, nil)
	if err != nil {
		return nil, openError(path, err)
	}
	db := sql.OpenDB(c)
	// Settings for every connection, then locked: timestamps without a
	// zone, and text read as timestamps, are UTC, as partitions are.
	// EXPLAIN gives the plan as bound, before the optimizer prunes a scan
	// it can prove empty (guard.go).
	for _, s := range []string{"SET GLOBAL TimeZone = 'UTC'", "SET GLOBAL explain_output = 'all'", "SET GLOBAL lock_configuration = true"} {
		if _, err := db.Exec(s); err != nil {
			db.Close()
			return nil, openError(path, err)
		}
	}
	return db, nil
}

// Yield lets go of the file now if refill is not using it, so that a
// command job refill starts next can open it (refill.Yielder).
func (w *Warehouse) Yield() { w.inst.letGo(true) }

func openError(path string, err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "Conflicting lock") || strings.Contains(msg, "Could not set lock"):
		return fmt.Errorf("open duckdb %s: another process has the file open (DuckDB lets one process at a time open a database file; refill lets go of it when idle, so wait for the other to finish, or stop it): %w", path, err)
	case strings.Contains(msg, "not a valid DuckDB database file") || strings.Contains(msg, "Serialization") || strings.Contains(msg, "Invalid Input Error: The file"):
		return refill.BadInputf("%s is not a DuckDB database: %v", path, err)
	}
	return fmt.Errorf("open duckdb %s: %w", path, err)
}

// DB returns the database, for tests and the demo to load data. The file
// then stays open for as long as this process has it.
func (w *Warehouse) DB() *sql.DB {
	db, done, err := w.inst.use()
	if err != nil {
		return nil
	}
	w.inst.mu.Lock()
	w.inst.pinned = true
	w.inst.mu.Unlock()
	done()
	return db
}

// Path is the database file.
func (w *Warehouse) Path() string { return w.inst.path }

// Driver names the driver.
func (w *Warehouse) Driver() string { return "duckdb" }

// Ping checks the database answers.
func (w *Warehouse) Ping(ctx context.Context) error {
	db, done, err := w.inst.use()
	if err != nil {
		return err
	}
	defer done()
	return db.PingContext(ctx)
}

// Close releases this handle; the last one closes the database.
func (w *Warehouse) Close() error {
	if w.closed.Swap(true) {
		return nil
	}
	instances.Lock()
	defer instances.Unlock()
	in := w.inst
	in.refs--
	if in.refs > 0 {
		return nil
	}
	delete(instances.byPath, in.path)
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.idle != nil {
		in.idle.Stop()
	}
	if in.db == nil {
		return nil
	}
	err := in.db.Close()
	in.db = nil
	return err
}

// querier is what reads and writes run on: the pool, or a transaction's
// connection.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Columns returns the table's (or view's) columns in table order, with
// DuckDB's type names lower-cased ("varchar", "decimal(18,3)", "timestamp
// with time zone").
func (w *Warehouse) Columns(ctx context.Context, table string) ([]refill.Column, error) {
	db, done, err := w.inst.use()
	if err != nil {
		return nil, err
	}
	defer done()
	return columns(ctx, db, table)
}

// tableWhere is the condition on duckdb_tables()/duckdb_columns() that
// finds a configured table name, and its arguments from $1: a plain name
// in the current database and schema, schema.table in the current
// database (or database.table in its main schema), and
// database.schema.table. Case is ignored, as DuckDB ignores it.
func tableWhere(table string) (string, []any) {
	p := d.Resolve(table)
	switch len(p) {
	case 1:
		return "lower(table_name) = lower($1) AND database_name = current_database() AND schema_name = current_schema()", []any{p[0]}
	case 2:
		return "lower(table_name) = lower($2) AND ((lower(schema_name) = lower($1) AND database_name = current_database()) OR (lower(database_name) = lower($1) AND schema_name = 'main'))", []any{p[0], p[1]}
	default:
		return "lower(table_name) = lower($3) AND lower(schema_name) = lower($2) AND lower(database_name) = lower($1)", []any{p[0], p[1], strings.Join(p[2:], ".")}
	}
}

func columns(ctx context.Context, db querier, table string) ([]refill.Column, error) {
	where, args := tableWhere(table)
	rows, err := db.QueryContext(ctx, "SELECT column_name, lower(data_type) FROM duckdb_columns() WHERE "+where+" ORDER BY database_name = current_database() DESC, column_index", args...)
	if err != nil {
		return nil, fmt.Errorf("columns of %s: %w", table, err)
	}
	defer rows.Close()
	var cols []refill.Column
	seen := map[string]bool{}
	for rows.Next() {
		var c refill.Column
		if err := rows.Scan(&c.Name, &c.Type); err != nil {
			return nil, fmt.Errorf("columns of %s: %w", table, err)
		}
		if seen[strings.ToLower(c.Name)] {
			break // a second table the name could mean: the first wins, as in SQL
		}
		seen[strings.ToLower(c.Name)] = true
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

// PartitionCounts counts the rows of every non-empty partition in [from, to]
// with one grouped query.
func (w *Warehouse) PartitionCounts(ctx context.Context, t refill.TableRef, from, to string) (map[string]int64, error) {
	db, done, err := w.inst.use()
	if err != nil {
		return nil, err
	}
	defer done()
	return partitionCounts(ctx, db, t, from, to)
}

func partitionCounts(ctx context.Context, db querier, t refill.TableRef, from, to string) (map[string]int64, error) {
	cols, err := columns(ctx, db, t.Table)
	if err != nil {
		return nil, err
	}
	f, err := partitionFilter(t, cols, from, to)
	if err != nil {
		return nil, fmt.Errorf("partition counts of %s: %w", t.Table, err)
	}
	rows, err := db.QueryContext(ctx, fmt.Sprintf("SELECT %s AS p, count(*) FROM %s WHERE %s GROUP BY %s", f.render(f.group), d.QuoteName(t.Table), f.where, f.group), f.args...)
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

// QueryCounts counts the rows query yields for each partition, in one
// statement per batch of partitions, inside a transaction that is always
// rolled back. The query must be one SELECT that reads none of refill's
// tables, as DuckDB itself plans it (guard.go).
func (w *Warehouse) QueryCounts(ctx context.Context, query string, partitions []string) (map[string]int64, error) {
	parts := sqltext.Unique(partitions)
	counts := make(map[string]int64, len(parts))
	if len(parts) == 0 {
		return counts, nil
	}
	if _, err := d.Subquery(query); err != nil {
		return nil, err
	}
	db, done, err := w.inst.use()
	if err != nil {
		return nil, err
	}
	defer done()
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("query counts: %w", err)
	}
	defer discard(conn) // it ran job text (guard.go)
	if _, err := conn.ExecContext(ctx, "BEGIN TRANSACTION"); err != nil {
		return nil, fmt.Errorf("query counts: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK") // always: a count must leave nothing behind
	for start := 0; start < len(parts); start += queryBatch {
		batch := parts[start:min(start+queryBatch, len(parts))]
		stmt, params, err := d.CountEach(query, len(batch))
		if err != nil {
			return nil, err
		}
		args := make([]any, params)
		for i := range params {
			args[i] = batch[i]
		}
		g := guard{conn: conn, partition: batch[0], query: true}
		if start == 0 {
			// The query alone first, so that one that writes is refused
			// for what it is, not for failing to parse as a subquery.
			bound, uses := d.BindPartition(query, "$1")
			var one []any
			if uses > 0 {
				one = []any{batch[0]}
			}
			if err := g.check(ctx, bound, one); err != nil {
				return nil, guardError(ctx, err, batch[0])
			}
		}
		if err := g.check(ctx, stmt, args); err != nil {
			return nil, guardError(ctx, err, batch[0])
		}
		rows, err := conn.QueryContext(ctx, stmt, args...)
		if err != nil {
			return nil, queryError(ctx, err, batch[0])
		}
		for rows.Next() {
			var i int
			var n int64
			if err := rows.Scan(&i, &n); err != nil {
				rows.Close()
				return nil, fmt.Errorf("query counts: %w", err)
			}
			counts[batch[i]] = n
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, queryError(ctx, err, batch[0])
		}
	}
	return counts, nil
}

// queryError classifies an error from a job's query: the query's fault
// (syntax, names, types, values) is bad input; a cancelled context, a
// full disk, memory or an interrupted engine are the environment's.
func queryError(ctx context.Context, err error, partition string) error {
	if ctx.Err() != nil || environmental(err) {
		return fmt.Errorf("query counts from partition %s: %w", partition, err)
	}
	return &sqltext.QueryError{Partition: partition, Err: err}
}

// guardError is queryError for what the guard returned: a refusal as it is.
func guardError(ctx context.Context, err error, partition string) error {
	var refused *sqltext.RefusedError
	if errors.As(err, &refused) {
		return err
	}
	return queryError(ctx, err, partition)
}

// environmental reports whether err is DuckDB's trouble rather than the
// statement's.
func environmental(err error) bool {
	if errors.Is(err, driver.ErrBadConn) {
		return true
	}
	var e *duckdb.Error
	if !errors.As(err, &e) {
		return true
	}
	switch e.Type {
	case duckdb.ErrorTypeIO, duckdb.ErrorTypeOutOfMemory, duckdb.ErrorTypeInterrupt, duckdb.ErrorTypeConnection,
		duckdb.ErrorTypeFatal, duckdb.ErrorTypeInternal, duckdb.ErrorTypeTransaction, duckdb.ErrorTypeNetwork:
		return true
	}
	return false
}

func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }
