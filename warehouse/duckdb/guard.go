//go:build duckdb

package duckdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
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
// each statement runs, and by what it did to its table, after:
//
//   - Each statement is prepared alone (DuckDB refuses to prepare text
//     that holds two), and its kind, as DuckDB parsed it, must be SELECT,
//     or for an sql job INSERT, UPDATE or DELETE: never transaction
//     control, DDL, ATTACH, PRAGMA, SET, COPY, EXPORT, LOAD or CALL.
//   - Its logical plan, as EXPLAIN gives it bound and before the optimizer
//     prunes anything, names every table it scans, through views included;
//     none may be refill's own (refill_*). Every operator of the plan must
//     be relational algebra, a table scan or one of a few table functions
//     that read nothing (range, generate_series, unnest): any other table
//     function (pragma_storage_info, enable_logging, the catalogue's
//     duckdb_* functions...) is refused until it is judged. So are calls to
//     query(), query_table() and json_execute_serialized_sql(), whose reads
//     the binder hides (found in the text by refill's lexer, which reads
//     comments, quotes and literals as DuckDB's scanner does), and scalar
//     functions that change state beyond the job's rows (setseed, nextval).
//   - An INSERT, UPDATE or DELETE writes the table its text names after
//     INTO, UPDATE or DELETE FROM, which must be the job's own table; an
//     UPDATE or DELETE must also scan it in its plan, or the text was not
//     read as DuckDB reads it and the statement is refused.
//   - The partition fence: before the job runs, refill sums a hash of
//     every row of its table outside the partition (its row id and values,
//     after a secret drawn for the job), by partition; afterwards it sums
//     them again, and any partition whose count or sum moved was written by
//     the job, which fails. The secret keeps a job from choosing values
//     that give a changed row its old hash.
//   - A connection that ran job text is closed, never pooled, so nothing a
//     job left on it reaches later work.
//
// The database is opened with external access off, so no statement reads
// or writes files, and with its configuration locked.
//
// What this does not catch: sequences moved some other way than nextval;
// a table function or operator a new DuckDB adds under a name on the list;
// and two changes to rows outside the partition whose salted hashes cancel
// out in the sum (a 64-bit collision the job cannot aim at). The fence
// costs two scans of the job's table per partition built.

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
	if name, ok := d.Calls(stmt, hiddenReads...); ok {
		return g.refuse("call "+name+"()", "a job reads tables by name, in its text, where refill can see which: "+name+"() reads whatever its argument names", nil)
	}
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
	scans, ops, exprs, err := explain(ctx, g.conn, stmt, args)
	if err != nil {
		return err
	}
	for _, op := range ops {
		if !planOperators[op] {
			return g.refuse("use "+strings.ToLower(op), "a job reads tables and computes; refill lets it use only the table functions it can see through ("+strings.Join(tableFunctions, ", ")+")", nil)
		}
	}
	for _, e := range exprs {
		for _, f := range sideEffects {
			if strings.Contains(strings.ToLower(e), f+"(") {
				return g.refuse("call "+f+"()", "a job's statements change rows of its own table, nothing else: "+f+"() changes the session or a sequence, and outlives the job", nil)
			}
		}
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

// hiddenReads are the functions whose reads DuckDB's binder replaces by
// the query they name, before a plan shows them, or runs as text.
var hiddenReads = []string{"query", "query_table", "json_execute_serialized_sql", "json_execute_serialized_sql_tf"}

// sideEffects are scalar functions that change state outside the job's
// rows (the session's random seed, a sequence), found in the plan's
// expressions as DuckDB renders them.
var sideEffects = []string{"setseed", "nextval", "currval"}

// tableFunctions are the table functions a job may call: they compute,
// and read nothing.
var tableFunctions = []string{"range", "generate_series", "unnest"}

// planOperators are the logical operators a job's plan may hold: relational
// algebra, scans of tables (SEQ_SCAN, which names its table) and the table
// functions above. Anything else (another table function, a pragma, an
// export) is refused, so that a new kind of read is refused until it is
// judged, not allowed until it is found.
var planOperators = func() map[string]bool {
	m := map[string]bool{}
	for _, op := range []string{
		"PROJECTION", "FILTER", "AGGREGATE", "WINDOW", "UNNEST", "ORDER_BY", "LIMIT", "TOP_N", "SAMPLE",
		"SEQ_SCAN", "DUMMY_SCAN", "EMPTY_RESULT", "EXPRESSION_GET", "CHUNK_GET", "DELIM_GET", "CTE_REF", "COLUMN_DATA_GET",
		"COMPARISON_JOIN", "ANY_JOIN", "CROSS_PRODUCT", "POSITIONAL_JOIN", "ASOF_JOIN", "DEPENDENT_JOIN", "DELIM_JOIN",
		"UNION", "EXCEPT", "INTERSECT", "DISTINCT", "CTE", "CTE_SCAN", "REC_CTE", "REC_CTE_SCAN", "MATERIALIZED_CTE",
		// MERGE_INTO is how DuckDB plans INSERT OR IGNORE, OR REPLACE and
		// ON CONFLICT: its statement is an INSERT, checked as one.
		"INSERT", "UPDATE", "DELETE", "MERGE_INTO", "PIVOT", "UNPIVOT",
	} {
		m[op] = true
	}
	for _, f := range tableFunctions {
		m[strings.ToUpper(f)] = true
	}
	return m
}()

// explain returns what stmt's logical plan, as bound before the optimizer
// prunes a scan it can prove reads nothing, holds: the tables it scans
// (database.schema.table), its operators, and its expressions as DuckDB
// renders them.
func explain(ctx context.Context, conn *sql.Conn, stmt string, args []any) (scans, ops, exprs []string, err error) {
	var plan string
	rows, err := conn.QueryContext(ctx, "EXPLAIN (FORMAT JSON) "+stmt, args...)
	if err != nil {
		return nil, nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var kind, text string
		if err := rows.Scan(&kind, &text); err != nil {
			return nil, nil, nil, err
		}
		if kind == "logical_plan" {
			plan = text
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, nil, err
	}
	if plan == "" {
		return nil, nil, nil, errors.New("reading the plan of a job's statement: EXPLAIN gave no logical plan")
	}
	var tree any
	if err := json.Unmarshal([]byte(plan), &tree); err != nil {
		return nil, nil, nil, fmt.Errorf("reading the plan of a job's statement: %w", err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			if name, ok := v["name"].(string); ok {
				ops = append(ops, name)
			}
			if info, ok := v["extra_info"].(map[string]any); ok {
				if s, ok := info["Table"].(string); ok {
					scans = append(scans, s)
				}
				for _, e := range info {
					switch e := e.(type) {
					case string:
						exprs = append(exprs, e)
					case []any:
						for _, x := range e {
							if s, ok := x.(string); ok {
								exprs = append(exprs, s)
							}
						}
					}
				}
			}
			walk(v["children"])
		}
	}
	walk(tree)
	return scans, ops, exprs, nil
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
	salt      uint64 // the secret first value of every row's hash
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
	// The row hash starts from a secret drawn for this job: DuckDB's hash()
	// chains its arguments, and without an unknown first link a job could
	// change a row and choose its last column's value to give the row its
	// old hash back.
	var salt [8]byte
	if _, err := rand.Read(salt[:]); err != nil {
		return nil, err
	}
	names := []string{"CAST($2 AS UBIGINT)", "rowid"}
	for _, c := range cols {
		names = append(names, sqltext.QuoteIdent(c.Name))
	}
	table := d.QuoteName(ref.Table)
	f := &fence{db: db, ref: ref, col: c, partition: partition, salt: binary.LittleEndian.Uint64(salt[:]) >> 1,
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
	rows, err := f.db.QueryContext(ctx, f.query, f.partition, f.salt)
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
