// Package postgres is the PostgreSQL warehouse, on a pgx connection pool.
//
// Tables are found through the connection's search_path, which a DSN can set
// (postgres://host/db?search_path=analytics), or by a schema-qualified
// schema.table name. Names from the config mean what they would in SQL:
// Events is the table events, and '"Events"' the table created as "Events"
// (sqltext.Postgres.QuoteName). Partition columns may be date (day grain),
// timestamp or timestamptz (either grain; timestamps are bucketed in UTC),
// or text holding keys or timestamps whose first characters are the UTC
// date and hour.
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dsnpkg "github.com/refill-dev/refill/dsn"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// queryBatch is how many partitions one QueryCounts statement counts: enough
// that a year of days is four round trips, few enough that the planner's
// work on the UNION stays small.
const queryBatch = 100

// Warehouse is a PostgreSQL database used as a warehouse.
type Warehouse struct {
	pool      *pgxpool.Pool
	db        *sql.DB
	ownTables atomic.Bool // refill_published and refill_audit_anchor are known to exist
	creating  sync.Mutex  // one createTables at a time
}

var _ refill.Warehouse = (*Warehouse)(nil)

// Open connects to the database at dsn (a postgres:// URL or key=value
// string) and pings it. A DSN that cannot be parsed is bad input; a server
// that cannot be reached is not, since the fix is in the environment. No
// error carries the DSN's password.
func Open(ctx context.Context, location string) (*Warehouse, error) {
	dsn := location
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, refill.BadInputf("postgres DSN %s is not valid: %s", dsnpkg.Redact(dsn), scrub(err.Error(), dsn))
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres %s: %w", Target(cfg), &redacted{err: err, dsn: dsn})
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("cannot connect to postgres %s: %w", Target(cfg), &redacted{err: err, dsn: dsn})
	}
	return &Warehouse{pool: pool, db: stdlib.OpenDBFromPool(pool)}, nil
}

// Target names the server and database a configuration connects to, as
// host:port/database, for messages that must say where without saying how
// to log in.
func Target(cfg *pgxpool.Config) string {
	c := cfg.ConnConfig
	host := c.Host
	if !strings.HasPrefix(host, "/") {
		host = net.JoinHostPort(host, strconv.Itoa(int(c.Port)))
	}
	return host + "/" + c.Database
}

// Pool returns the connection pool, for tests and the demo to load data.
func (w *Warehouse) Pool() *pgxpool.Pool { return w.pool }

// DB returns a database/sql handle on the same pool, for code written
// against database/sql.
func (w *Warehouse) DB() *sql.DB { return w.db }

// Driver names the driver.
func (w *Warehouse) Driver() string { return "postgres" }

// Ping checks the server answers.
func (w *Warehouse) Ping(ctx context.Context) error { return w.pool.Ping(ctx) }

// Close closes the pool.
func (w *Warehouse) Close() error {
	err := w.db.Close()
	w.pool.Close()
	return err
}

// Columns returns the table's columns in table order with their types as
// format_type writes them ("timestamp with time zone", "character
// varying(20)"). to_regclass resolves the name exactly as a query would:
// through search_path, or in the schema a dotted name gives, with a plain
// name folded to lower case and a quoted one kept.
func (w *Warehouse) Columns(ctx context.Context, table string) ([]refill.Column, error) {
	return columns(ctx, w.pool, table)
}

// querier is what reads and writes run on: the pool, or a rehearsal's
// transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func columns(ctx context.Context, db querier, table string) ([]refill.Column, error) {
	rows, err := db.Query(ctx, `SELECT a.attname, lower(format_type(a.atttypid, a.atttypmod))
FROM pg_catalog.pg_attribute a
WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`, sqltext.Postgres.QuoteName(table))
	if err != nil {
		return nil, fmt.Errorf("columns of %s: %w", table, err)
	}
	cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (refill.Column, error) {
		var c refill.Column
		err := r.Scan(&c.Name, &c.Type)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("columns of %s: %w", table, err)
	}
	if len(cols) == 0 {
		return nil, noTable(ctx, db, table)
	}
	return cols, nil
}

// noTable is the error for a table name that resolves to no table. When
// the schema it looks in (the one it names, or those on the search_path)
// has a table of that name in another case, it says how to write that
// one: a name folded to lower case, or quoted when it should not be, is
// the usual mistake.
func noTable(ctx context.Context, db querier, table string) error {
	e := &sqltext.NoTableError{Table: table}
	parts := sqltext.Postgres.Resolve(table)
	name, schema := parts[len(parts)-1], ""
	if len(parts) == 2 {
		schema = parts[0]
	}
	rows, err := db.Query(ctx, `SELECT n.nspname, c.relname
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE lower(c.relname) = lower($1) AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
  AND CASE WHEN $2 = '' THEN n.nspname = ANY (current_schemas(false)) ELSE lower(n.nspname) = lower($2) END
ORDER BY 1, 2 LIMIT 3`, name, schema)
	if err != nil {
		return e // the hint is a courtesy; the table is missing all the same
	}
	others, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([]string, error) {
		var nsp, rel string
		err := r.Scan(&nsp, &rel)
		if schema == "" {
			return []string{rel}, err
		}
		return []string{nsp, rel}, err
	})
	if err == nil {
		e.Hint = sqltext.Postgres.CaseHint(table, others)
	}
	return e
}

// partitionColumn finds t's partition column among cols, the table's
// columns, as the config names it.
func partitionColumn(t refill.TableRef, cols []refill.Column) (refill.Column, error) {
	c, ok := sqltext.Postgres.Column(cols, t.Column)
	if !ok {
		return c, sqltext.Postgres.NoColumn(t.Table, t.Column, "the partition column", cols)
	}
	return c, nil
}

// PartitionCounts counts the rows of every non-empty partition in [from, to]
// with one grouped query. The range is a predicate on the raw column, so an
// index on it serves the scan.
func (w *Warehouse) PartitionCounts(ctx context.Context, t refill.TableRef, from, to string) (map[string]int64, error) {
	cols, err := columns(ctx, w.pool, t.Table)
	if err != nil {
		return nil, err // names the table already
	}
	p, err := partitionPlanFor(t, cols, from, to)
	if err != nil {
		return nil, err
	}
	q := fmt.Sprintf("SELECT %s AS p, count(*) FROM %s WHERE %s GROUP BY 1", p.key, sqltext.Postgres.QuoteName(t.Table), p.where)
	rows, err := w.pool.Query(ctx, q, p.args...)
	if err != nil {
		return nil, fmt.Errorf("partition counts of %s: %w", t.Table, err)
	}
	counts := map[string]int64{}
	var key string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&key, &n}, func() error {
		counts[key] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("partition counts of %s: %w", t.Table, err)
	}
	return counts, nil
}

// partitionPlan is how one partition column is read: the expression that
// renders its partition key, and the range predicate with its arguments.
type partitionPlan struct {
	key   string
	where string
	args  []any
	// group is a cheaper expression than key that takes one value per
	// partition, and render turns it into the key (a format with one %s):
	// grouping on a date and formatting thirty of them beats formatting
	// every row.
	group, render string
}

// partitionPlanFor renders the key and range of t's partition column,
// whose type it finds in cols.
func partitionPlanFor(t refill.TableRef, cols []refill.Column, from, to string) (partitionPlan, error) {
	return partitionPlanOn(t, cols, from, to, "")
}

// partitionPlanOn is partitionPlanFor with the partition column read from
// row, as NEW."day" is in a trigger ("" for the table's own rows).
func partitionPlanOn(t refill.TableRef, cols []refill.Column, from, to, row string) (partitionPlan, error) {
	c, err := partitionColumn(t, cols)
	if err != nil {
		return partitionPlan{}, err
	}
	typ, col := c.Type, sqltext.QuoteIdent(c.Name)
	if row != "" {
		col = row + "." + col
	}
	grain := t.Grain
	if grain == "" {
		grain = refill.GrainDay
	}
	if grain != refill.GrainDay && grain != refill.GrainHour {
		return partitionPlan{}, refill.BadInputf("dataset table %s has unknown partition grain %q (want day or hour)", t.Table, t.Grain)
	}
	f, err := refill.PartitionTime(from, grain)
	if err != nil {
		return partitionPlan{}, fmt.Errorf("partition counts of %s: %w", t.Table, err)
	}
	l, err := refill.PartitionTime(to, grain)
	if err != nil {
		return partitionPlan{}, fmt.Errorf("partition counts of %s: %w", t.Table, err)
	}
	if f.After(l) {
		return partitionPlan{}, refill.BadInputf("partition range %s..%s is backwards", from, to)
	}
	// end is the first instant after the last partition.
	end := l.AddDate(0, 0, 1)
	keyFormat, truncUnit := "YYYY-MM-DD", "day"
	if grain == refill.GrainHour {
		end = l.Add(time.Hour)
		keyFormat, truncUnit = `YYYY-MM-DD"T"HH24`, "hour"
	}
	const stamp = "2006-01-02 15:04:05"
	switch {
	case typ == "date":
		if grain == refill.GrainHour {
			return partitionPlan{}, refill.BadInputf("partition column %s.%s is a date, which has no hours; use grain day or a timestamp column", t.Table, t.Column)
		}
		return partitionPlan{
			key:    fmt.Sprintf("to_char(%s, 'YYYY-MM-DD')", col),
			where:  fmt.Sprintf("%s BETWEEN $1::date AND $2::date", col),
			args:   []any{from, to},
			group:  col,
			render: "to_char(%s, 'YYYY-MM-DD')",
		}, nil
	case strings.HasPrefix(typ, "timestamp") && strings.HasSuffix(typ, " with time zone"):
		// Rendered in UTC whatever the session's TimeZone is.
		return partitionPlan{
			key:    fmt.Sprintf("to_char(%s AT TIME ZONE 'UTC', '%s')", col, keyFormat),
			where:  fmt.Sprintf("%[1]s >= $1::timestamptz AND %[1]s < $2::timestamptz", col),
			args:   []any{f.Format(stamp) + "+00", end.Format(stamp) + "+00"},
			group:  fmt.Sprintf("date_trunc('%s', %s AT TIME ZONE 'UTC')", truncUnit, col),
			render: "to_char(%s, '" + keyFormat + "')",
		}, nil
	case strings.HasPrefix(typ, "timestamp"):
		// A timestamp without time zone is taken to be UTC already.
		return partitionPlan{
			key:    fmt.Sprintf("to_char(%s, '%s')", col, keyFormat),
			where:  fmt.Sprintf("%[1]s >= $1::timestamp AND %[1]s < $2::timestamp", col),
			args:   []any{f.Format(stamp), end.Format(stamp)},
			group:  fmt.Sprintf("date_trunc('%s', %s)", truncUnit, col),
			render: "to_char(%s, '" + keyFormat + "')",
		}, nil
	case typ == "text" || strings.HasPrefix(typ, "character") || strings.HasPrefix(typ, "varchar"):
		// Text is cut, not parsed: a cast would fail the whole scan on one
		// bad value. The raw bounds are whole days, which any text starting
		// with a date in the range falls between; the key test is exact.
		key := fmt.Sprintf("left(%s, 10)", col)
		if grain == refill.GrainHour {
			key = fmt.Sprintf("(left(%[1]s, 10) || 'T' || substr(%[1]s, 12, 2))", col)
		}
		const day = "2006-01-02"
		return partitionPlan{
			key:    key,
			where:  fmt.Sprintf("%[1]s >= $1 AND %[1]s < $2 AND %[2]s BETWEEN $3 AND $4", col, key),
			args:   []any{f.Format(day), l.Truncate(24*time.Hour).AddDate(0, 0, 1).Format(day), from, to},
			group:  key,
			render: "%s",
		}, nil
	}
	return partitionPlan{}, refill.BadInputf("partition column %s.%s is %s; refill reads date, timestamp, timestamptz and text partition columns", t.Table, t.Column, typ)
}

// QueryCounts counts the rows query yields for each partition, in one
// statement per batch of partitions, inside a READ ONLY transaction that is
// rolled back: whatever the query calls, PostgreSQL refuses to write. The
// query runs with TimeZone UTC, as it does when the job runs. A query that
// reads refill's own tables is refused, as when it runs (guard.go).
//
// Statements are sent with the extended protocol even if the DSN asks for
// the simple one, because the simple protocol would run a second statement
// smuggled into the query text.
func (w *Warehouse) QueryCounts(ctx context.Context, query string, partitions []string) (map[string]int64, error) {
	parts := sqltext.Unique(partitions)
	counts := make(map[string]int64, len(parts))
	if len(parts) == 0 {
		return counts, nil
	}
	if _, err := sqltext.Postgres.Subquery(query); err != nil {
		return nil, err
	}
	tx, err := w.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("query counts: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // always: a count must leave nothing behind
	// As when the job runs: in UTC, as partitions are cut.
	if _, err := tx.Exec(ctx, "SET LOCAL TIME ZONE 'UTC'"); err != nil {
		return nil, fmt.Errorf("query counts: %w", err)
	}
	before, err := tableCounts(ctx, tx)
	if err != nil {
		return nil, err
	}
	for start := 0; start < len(parts); start += queryBatch {
		batch := parts[start:min(start+queryBatch, len(parts))]
		if err := countBatch(ctx, tx, query, batch, counts); err != nil {
			return nil, err
		}
	}
	after, err := tableCounts(ctx, tx)
	if err != nil {
		return nil, err
	}
	if err := judge(before, after, nil, false, "", parts[0]); err != nil {
		return nil, err
	}
	return counts, nil
}

// countBatch runs one counting statement for batch and adds its counts.
func countBatch(ctx context.Context, tx pgx.Tx, query string, batch []string, counts map[string]int64) error {
	stmt, params, err := sqltext.Postgres.CountEach(query, len(batch))
	if err != nil {
		return err
	}
	args := make([]any, 0, params+1)
	args = append(args, pgx.QueryExecModeDescribeExec)
	for i := range params {
		args = append(args, batch[i])
	}
	rows, err := tx.Query(ctx, stmt, args...)
	if err != nil {
		return queryError(err, batch[0])
	}
	var i int
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&i, &n}, func() error {
		counts[batch[i]] = n
		return nil
	})
	if err != nil {
		return queryError(err, batch[0])
	}
	return nil
}

// queryError classifies an error from a job query by its SQLSTATE class:
// syntax and access rules (42), data exceptions (22), cardinality (21),
// unsupported features (0A), an attempted write in the read-only
// transaction (25) and errors raised by functions the query calls (2F, 38,
// 39, P0) are the query's fault, and so bad input. Connection failures,
// cancellation, resource limits and server errors are not.
func queryError(err error, partition string) error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) && len(pg.Code) == 5 {
		switch pg.Code[:2] {
		case "42", "22", "21", "0A", "25", "2F", "38", "39", "P0":
			return &sqltext.QueryError{Partition: partition, Err: fmt.Errorf("%s (SQLSTATE %s)", pg.Message, pg.Code)}
		}
	}
	return fmt.Errorf("query counts from partition %s: %w", partition, err)
}

// redacted is an error whose text has the DSN's passwords removed, while
// errors.Is and errors.As still reach the cause.
type redacted struct {
	err error
	dsn string
}

func (e *redacted) Error() string { return scrub(e.err.Error(), e.dsn) }

// scrub removes dsn's passwords from msg (the dsn package's Scrub).
var scrub = dsnpkg.Scrub

func (e *redacted) Unwrap() error { return e.err }
