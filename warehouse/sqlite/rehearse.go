package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

var (
	_ refill.Rehearser   = (*Warehouse)(nil)
	_ refill.WarehouseTx = (*tx)(nil)
)

// Rehearse runs fn inside one write transaction and always rolls it back:
// when fn returns, fails, panics, or ctx is cancelled in the middle of a
// statement.
//
// The transaction lives on a connection of its own, taken out of the pool
// and begun with BEGIN IMMEDIATE, so that it holds the write lock from the
// start (a deferred transaction could fail halfway when it first writes) and
// no other work of refill's shares it. Afterwards the connection is closed
// rather than returned to the pool. Closing rolls back whatever ROLLBACK
// could not (SQLite already ends the transaction itself when a statement in
// it is interrupted), and it drops connection state a job may have set that
// a rollback keeps, such as PRAGMAs, so nothing of the rehearsal reaches
// later work. Readers see the committed database throughout (WAL).
func (w *Warehouse) Rehearse(ctx context.Context, fn func(tx refill.WarehouseTx) error) (err error) {
	conn, err := w.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("rehearsal: %w", err)
	}
	defer discard(conn)
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("rehearsal: begin: %w", err)
	}
	// Deferred calls run during a panic too: the rollback comes first, then
	// the panic goes on.
	defer func() {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
	}()
	return fn(&tx{conn: conn})
}

// discard closes conn for good instead of returning it to the pool.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}

// tx is a rehearsal's transaction.
type tx struct {
	conn *sql.Conn
}

// Digest is Warehouse.Digest inside the transaction.
func (t *tx) Digest(ctx context.Context, ref refill.TableRef, partition string) (refill.Digest, error) {
	return digest(ctx, t.conn, ref, partition)
}

// DeletePartition deletes one partition of ref, selected exactly as
// PartitionCounts counts it.
func (t *tx) DeletePartition(ctx context.Context, ref refill.TableRef, partition string) (int64, error) {
	cols, err := columns(ctx, t.conn, ref.Table)
	if err != nil {
		return 0, err
	}
	return deletePartition(ctx, t.conn, ref, cols, partition)
}

func deletePartition(ctx context.Context, db querier, ref refill.TableRef, cols []refill.Column, partition string) (int64, error) {
	f, err := partitionFilter(ref, cols, partition, partition)
	if err != nil {
		return 0, fmt.Errorf("delete partition %s of %s: %w", partition, ref.Table, err)
	}
	res, err := db.ExecContext(ctx, fmt.Sprintf("DELETE FROM %s WHERE %s", sqltext.QuoteIdent(ref.Table), f.where), f.args...)
	if err != nil {
		return 0, fmt.Errorf("delete partition %s of %s: %w", partition, ref.Table, err)
	}
	return res.RowsAffected()
}

// ReplaceFromQuery deletes the partition and inserts the rows of a query
// job, which must be one SELECT. Its output columns name the table's
// columns they fill: INSERT INTO t (its output names) query, so that the
// warehouse, not refill, moves the rows.
func (t *tx) ReplaceFromQuery(ctx context.Context, ref refill.TableRef, query, partition string) (int64, error) {
	q, err := sqltext.SQLite.Subquery(query)
	if err != nil {
		return 0, err
	}
	bound, uses := sqltext.SQLite.BindPartition(q, "?1")
	var args []any
	if uses > 0 {
		args = []any{partition}
	}
	cols, err := columns(ctx, t.conn, ref.Table)
	if err != nil {
		return 0, err
	}
	// The newline before ) ends a trailing line comment in the query.
	rows, err := t.conn.QueryContext(ctx, "SELECT * FROM (\n"+bound+"\n) LIMIT 0", args...)
	if err != nil {
		return 0, fmt.Errorf("query job for partition %s of %s: %w", partition, ref.Table, err)
	}
	names, err := rows.Columns()
	rows.Close()
	if err != nil {
		return 0, fmt.Errorf("query job for partition %s of %s: %w", partition, ref.Table, err)
	}
	target, err := targetColumns(ref.Table, cols, names)
	if err != nil {
		return 0, err
	}
	if _, err := deletePartition(ctx, t.conn, ref, cols, partition); err != nil {
		return 0, err
	}
	res, err := t.conn.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s)\n%s\n", sqltext.QuoteIdent(ref.Table), target, bound), args...)
	if err != nil {
		return 0, fmt.Errorf("query job for partition %s of %s: %w", partition, ref.Table, err)
	}
	return res.RowsAffected()
}

// targetColumns matches a query's output column names to the table's
// columns, and renders them as an INSERT's column list in output order.
func targetColumns(table string, cols []refill.Column, names []string) (string, error) {
	quoted := make([]string, len(names))
	seen := map[string]bool{}
	for i, n := range names {
		c, ok := column(cols, n)
		if !ok {
			return "", refill.BadInputf("the query's output column %q is not a column of table %s: name each output column after the column it fills (SELECT expr AS name)", n, table)
		}
		key := strings.ToLower(c.Name)
		if seen[key] {
			return "", refill.BadInputf("the query has two output columns named %s", c.Name)
		}
		seen[key] = true
		quoted[i] = sqltext.QuoteIdent(c.Name)
	}
	return strings.Join(quoted, ", "), nil
}

// ExecSQL runs an sql job's statements in order, each with :partition
// bound. A statement the warehouse refuses is the job's failure, not bad
// input: the error names the statement and carries SQLite's message.
func (t *tx) ExecSQL(ctx context.Context, sql, partition string) error {
	stmts, err := sqltext.SQLite.Statements(sql)
	if err != nil {
		return err
	}
	for i, s := range stmts {
		bound, uses := sqltext.SQLite.BindPartition(s, "?1")
		var args []any
		if uses > 0 {
			args = []any{partition}
		}
		if _, err := t.conn.ExecContext(ctx, bound, args...); err != nil {
			return &sqltext.StatementError{N: i + 1, Of: len(stmts), Partition: partition, SQL: sqltext.SQLite.Excerpt(s), Err: err}
		}
	}
	return nil
}
