//go:build duckdb

package duckdb

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// What job text may do is decided by DuckDB's own reading of it, before
// any of it runs, and by what it did to its table, after:
//
//   - Each statement is prepared alone (DuckDB refuses to prepare text
//     that holds two), and its kind, as DuckDB parsed it, must be SELECT,
//     or for an sql job INSERT, UPDATE or DELETE: never transaction
//     control, DDL, ATTACH, PRAGMA, SET, COPY, EXPORT, LOAD or CALL.
//   - Its plan, as EXPLAIN gives it, names every table it scans, through
//     views and query() included; none may be refill's own (refill_*).
//   - An INSERT, UPDATE or DELETE writes the table its text names after
//     INTO, UPDATE or DELETE FROM, which must be the job's own table; an
//     UPDATE or DELETE must also scan it in its plan, or the text was not
//     read as DuckDB reads it and the statement is refused.
//   - The partition fence: before the job runs, refill sums a hash of
//     every row of its table outside the partition (with its row id), by
//     partition; afterwards it sums them again, and any partition whose
//     count or sum moved was written by the job, which fails.
//
// The database is opened with external access off, so no statement reads
// or writes files, and with its configuration locked.
//
// What this does not catch: a job that reads DuckDB's catalogue functions
// (duckdb_tables() and the like), which tell that refill's tables exist
// and roughly how big they are; sequences moved by nextval; and two
// changes to rows outside the partition whose hashes cancel out in the
// sum (as likely as a 64-bit hash collision). The fence costs two scans
// of the job's table per partition built.

// guard checks job text against what a job may do.
type guard struct {
	conn *sql.Conn
	// table is the job's own table ("" when there is none, as for a
	// query being counted); partition the one it builds.
	table, partition string
	// query: a query job, which may only read.
	query bool
}

// refuse builds the refusal of a statement.
func (g guard) refuse(what, rule string, err error) error {
	if err == nil {
		err = errors.New("refused before any of the job's statements ran")
	}
	return &sqltext.RefusedError{Partition: g.partition, Table: g.table, What: what, Rule: rule, Err: err}
}

// check asks DuckDB what stmt, with args bound, is and what it reads, and
// refuses what a job may not do. An error that is not a refusal is
// DuckDB's own (syntax, a missing table).
func (g guard) check(ctx context.Context, stmt string, args []any) error {
	kind, err := statementType(g.conn, stmt)
	if err != nil {
		if strings.Contains(err.Error(), "PrepareContext") || strings.Contains(err.Error(), "multiple statements") {
			return g.refuse("run more than one statement where refill read one", "", err)
		}
		return err
	}
	write := false
	switch kind {
	case duckdb.STATEMENT_TYPE_SELECT:
	case duckdb.STATEMENT_TYPE_INSERT, duckdb.STATEMENT_TYPE_UPDATE, duckdb.STATEMENT_TYPE_DELETE:
		if g.query || g.table == "" {
			return g.refuse("write", sqltext.RuleQueryJob, nil)
		}
		write = true
	case duckdb.STATEMENT_TYPE_TRANSACTION:
		return g.refuse("control the transaction", "", nil)
	case duckdb.STATEMENT_TYPE_CREATE, duckdb.STATEMENT_TYPE_DROP, duckdb.STATEMENT_TYPE_ALTER, duckdb.STATEMENT_TYPE_CREATE_FUNC:
		return g.refuse("change the schema", sqltext.RuleSchema, nil)
	case duckdb.STATEMENT_TYPE_ATTACH, duckdb.STATEMENT_TYPE_DETACH:
		return g.refuse("attach a database", "", nil)
	case duckdb.STATEMENT_TYPE_PRAGMA, duckdb.STATEMENT_TYPE_SET, duckdb.STATEMENT_TYPE_VARIABLE_SET:
		return g.refuse("change the connection's settings", "", nil)
	case duckdb.STATEMENT_TYPE_LOAD, duckdb.STATEMENT_TYPE_EXTENSION:
		return g.refuse("load code into the warehouse", "", nil)
	case duckdb.STATEMENT_TYPE_COPY, duckdb.STATEMENT_TYPE_EXPORT:
		return g.refuse("read or write files", "", nil)
	default:
		return g.refuse(fmt.Sprintf("run a statement of kind %d (only SELECT, INSERT, UPDATE and DELETE are a job's)", kind), "", nil)
	}
	scans, err := scannedTables(ctx, g.conn, stmt, args)
	if err != nil {
		return err
	}
	for _, s := range scans {
		if ownTable(s) {
			return g.refuse("use refill's own table "+lastPart(s), sqltext.RuleOwnTables, nil)
		}
	}
	if !write {
		return nil
	}
	name, ok := d.WriteTarget(stmt)
	if !ok {
		return g.refuse("write a table refill could not name", sqltext.RuleOwnTable, nil)
	}
	if ownTable(name) {
		return g.refuse("use refill's own table "+lastPart(strings.ReplaceAll(name, `"`, "")), sqltext.RuleOwnTables, nil)
	}
	target, err := resolve(ctx, g.conn, name)
	if err != nil {
		return err
	}
	own, err := resolve(ctx, g.conn, g.table)
	if err != nil {
		return err
	}
	if !strings.EqualFold(target, own) {
		return g.refuse("write table "+lastPart(target), sqltext.RuleOwnTable, nil)
	}
	if kind != duckdb.STATEMENT_TYPE_INSERT && !slices.ContainsFunc(scans, func(s string) bool { return strings.EqualFold(unquote(s), unquote(target)) }) {
		return g.refuse("write a table refill could not name", sqltext.RuleOwnTable, fmt.Errorf("the plan does not scan %s", target))
	}
	return nil
}

// ownTable reports whether a table name (possibly qualified or quoted) is
// one of refill's own: its last part starts with refill_.
func ownTable(name string) bool {
	return strings.HasPrefix(strings.ToLower(lastPart(strings.ReplaceAll(name, `"`, ""))), "refill_")
}

// unquote drops the double quotes of a name as a plan prints it, to
// compare it with one as the catalogue holds it.
func unquote(name string) string { return strings.ReplaceAll(name, `"`, "") }

func lastPart(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[i+1:]
	}
	return name
}

// statementType prepares stmt alone and returns its kind.
func statementType(conn *sql.Conn, stmt string) (duckdb.StmtType, error) {
	var kind duckdb.StmtType
	err := conn.Raw(func(dc any) error {
		c, ok := dc.(*duckdb.Conn)
		if !ok {
			return fmt.Errorf("not a DuckDB connection: %T", dc)
		}
		st, err := c.Prepare(stmt)
		if err != nil {
			return err
		}
		defer st.Close()
		kind, err = st.(*duckdb.Stmt).StatementType()
		return err
	})
	return kind, err
}

// scannedTables returns the tables stmt's plan scans, each as
// database.schema.table: its logical plan as bound, before the optimizer
// removes a scan it can prove reads nothing.
func scannedTables(ctx context.Context, conn *sql.Conn, stmt string, args []any) ([]string, error) {
	var plan string
	rows, err := conn.QueryContext(ctx, "EXPLAIN (FORMAT JSON) "+stmt, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var kind, text string
		if err := rows.Scan(&kind, &text); err != nil {
			return nil, err
		}
		if kind == "logical_plan" {
			plan = text
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var tree any
	if plan == "" {
		return nil, errors.New("reading the plan of a job's statement: EXPLAIN gave no logical plan")
	}
	if err := json.Unmarshal([]byte(plan), &tree); err != nil {
		return nil, fmt.Errorf("reading the plan of a job's statement: %w", err)
	}
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for k, e := range v {
				if s, ok := e.(string); ok && k == "Table" {
					out = append(out, s)
				}
				walk(e)
			}
		}
	}
	walk(tree)
	return out, nil
}

// resolve returns the table a name means, as database.schema.table.
func resolve(ctx context.Context, db querier, name string) (string, error) {
	where, args := tableWhere(name)
	var out string
	err := db.QueryRowContext(ctx, "SELECT database_name || '.' || schema_name || '.' || table_name FROM duckdb_tables() WHERE "+where+" ORDER BY database_name = current_database() DESC LIMIT 1", args...).Scan(&out)
	if errors.Is(err, sql.ErrNoRows) {
		return "", &sqltext.NoTableError{Table: name}
	}
	return out, err
}

// fence is the partition fence of one job: the rest of its table, by
// partition, as it was before the job ran.
type fence struct {
	db        querier
	ref       refill.TableRef
	col       refill.Column
	partition string
	query     string // the grouped sum of the rows outside the partition
	before    map[string][2]string
	maxRowID  int64
}

// raiseFence records ref's rows outside partition before a job runs.
func raiseFence(ctx context.Context, db querier, ref refill.TableRef, cols []refill.Column, partition string) (*fence, error) {
	c, err := partitionColumn(ref, cols)
	if err != nil {
		return nil, err
	}
	key, err := partitionKeyOf(ref, c, "")
	if err != nil {
		return nil, err
	}
	if _, err := refill.PartitionTime(partition, ref.Grain); err != nil {
		return nil, err
	}
	names := []string{"rowid"}
	for _, c := range cols {
		names = append(names, sqltext.QuoteIdent(c.Name))
	}
	table := d.QuoteName(ref.Table)
	f := &fence{db: db, ref: ref, col: c, partition: partition,
		query: fmt.Sprintf("SELECT coalesce(%[1]s, 'NULL'), count(*), CAST(sum(hash(%[2]s)::HUGEINT) AS VARCHAR) FROM %[3]s WHERE (%[1]s) IS DISTINCT FROM $1 GROUP BY 1",
			key, strings.Join(names, ", "), table)}
	if f.before, err = f.sums(ctx); err != nil {
		return nil, fmt.Errorf("partition fence on %s: %w", ref.Table, err)
	}
	if f.maxRowID, err = maxRowID(ctx, db, table); err != nil {
		return nil, fmt.Errorf("partition fence on %s: %w", ref.Table, err)
	}
	return f, nil
}

func (f *fence) sums(ctx context.Context) (map[string][2]string, error) {
	rows, err := f.db.QueryContext(ctx, f.query, f.partition)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][2]string{}
	for rows.Next() {
		var k, n, s string
		if err := rows.Scan(&k, &n, &s); err != nil {
			return nil, err
		}
		out[k] = [2]string{n, s}
	}
	return out, rows.Err()
}

// check compares the rest of the table with what it was, and names the
// first partition the job changed: by the partition column's value in a
// row the job wrote there, or by the partition's key when it only
// deleted or changed rows in place.
func (f *fence) check(ctx context.Context) error {
	after, err := f.sums(ctx)
	if err != nil {
		return fmt.Errorf("partition fence on %s: %w", f.ref.Table, err)
	}
	var changed []string
	for k, v := range after {
		if f.before[k] != v {
			changed = append(changed, k)
		}
	}
	for k := range f.before {
		if _, ok := after[k]; !ok {
			changed = append(changed, k)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	slices.Sort(changed)
	k := changed[0]
	value := k
	key, _ := partitionKeyOf(f.ref, f.col, "")
	var v sql.NullString
	err = f.db.QueryRowContext(ctx, fmt.Sprintf("SELECT min(CAST(%s AS VARCHAR)) FROM %s WHERE rowid > $1 AND coalesce(%s, 'NULL') = $2",
		sqltext.QuoteIdent(f.col.Name), d.QuoteName(f.ref.Table), key), f.maxRowID, k).Scan(&v)
	if err == nil && v.Valid {
		value = v.String
	}
	return &refill.OutsidePartitionError{Table: f.ref.Table, Partition: f.partition, Value: value}
}
