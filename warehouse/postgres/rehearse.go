package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

var (
	_ refill.Rehearser   = (*Warehouse)(nil)
	_ refill.WarehouseTx = (*tx)(nil)
)

// rollbackTimeout bounds the rollback a rehearsal ends with, which runs
// even when the caller's context is done. If it cannot finish, closing the
// connection rolls back on the server all the same.
const rollbackTimeout = 30 * time.Second

// Rehearse runs fn inside one transaction and always rolls it back: when fn
// returns, fails, panics, or ctx is cancelled in the middle of a statement
// (pgx then closes the connection, and the server rolls back).
//
// The connection is closed afterwards rather than returned to the pool,
// because some session state survives a rollback — prepared statements,
// session advisory locks, cursors WITH HOLD are not created until commit
// but PREPARE and pg_advisory_lock take effect at once — and none of a
// rehearsal's may reach later work. Sequences are not transactional in
// PostgreSQL: a job that draws from one (a serial column) advances it even
// though its rows are rolled back.
func (w *Warehouse) Rehearse(ctx context.Context, fn func(tx refill.WarehouseTx) error) error {
	conn, err := w.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("rehearsal: %w", err)
	}
	c := conn.Hijack() // ours alone, closed below
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		_ = c.Close(closeCtx)
	}()
	t, err := c.Begin(ctx)
	if err != nil {
		return fmt.Errorf("rehearsal: begin: %w", err)
	}
	// Deferred calls run during a panic too: the rollback comes first, then
	// the connection is closed, then the panic goes on.
	defer func() {
		rbCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		_ = t.Rollback(rbCtx)
	}()
	return fn(&tx{tx: t})
}

// tx is a rehearsal's transaction.
type tx struct {
	tx pgx.Tx
}

// Digest is Warehouse.Digest inside the transaction.
func (t *tx) Digest(ctx context.Context, ref refill.TableRef, partition string) (refill.Digest, error) {
	return digest(ctx, t.tx, ref, partition)
}

// DeletePartition deletes one partition of ref, selected exactly as
// PartitionCounts counts it.
func (t *tx) DeletePartition(ctx context.Context, ref refill.TableRef, partition string) (int64, error) {
	cols, err := columns(ctx, t.tx, ref.Table)
	if err != nil {
		return 0, err
	}
	return deletePartition(ctx, t.tx, ref, cols, partition)
}

func deletePartition(ctx context.Context, db querier, ref refill.TableRef, cols []refill.Column, partition string) (int64, error) {
	p, err := partitionPlanFor(ref, cols, partition, partition)
	if err != nil {
		return 0, fmt.Errorf("delete partition %s of %s: %w", partition, ref.Table, err)
	}
	tag, err := db.Exec(ctx, fmt.Sprintf("DELETE FROM %s WHERE %s", sqltext.QuoteIdent(ref.Table), p.where), p.args...)
	if err != nil {
		return 0, fmt.Errorf("delete partition %s of %s: %w", partition, ref.Table, err)
	}
	return tag.RowsAffected(), nil
}

// ReplaceFromQuery deletes the partition and inserts the rows of a query
// job, which must be one SELECT. Its output columns name the table's
// columns they fill: INSERT INTO t (its output names) query, so that the
// warehouse, not refill, moves the rows, and so that PostgreSQL gives
// :partition the type of the column it fills, as it would in the user's own
// INSERT. The output names come from preparing the query, which runs
// nothing.
func (t *tx) ReplaceFromQuery(ctx context.Context, ref refill.TableRef, query, partition string) (int64, error) {
	q, err := sqltext.Postgres.Subquery(query)
	if err != nil {
		return 0, err
	}
	bound, uses := sqltext.Postgres.BindPartition(q, "$1")
	args := []any{pgx.QueryExecModeDescribeExec}
	if uses > 0 {
		args = append(args, partition)
	}
	cols, err := columns(ctx, t.tx, ref.Table)
	if err != nil {
		return 0, err
	}
	if _, err := partitionPlanFor(ref, cols, partition, partition); err != nil {
		return 0, fmt.Errorf("query job for %s: %w", ref.Table, err) // a malformed partition
	}
	// Described with the partition as a literal: a parameter used both as
	// an output column and in a comparison (SELECT :partition AS day ...
	// WHERE order_date = :partition) has no one type in a SELECT of its
	// own, while in the INSERT it takes the type of the column it fills.
	literal, _ := sqltext.Postgres.BindPartition(q, "'"+strings.ReplaceAll(partition, "'", "''")+"'")
	sd, err := t.tx.Conn().PgConn().Prepare(ctx, "", literal, nil)
	if err != nil {
		return 0, fmt.Errorf("query job for partition %s of %s: %w", partition, ref.Table, err)
	}
	names := make([]string, len(sd.Fields))
	for i, f := range sd.Fields {
		names[i] = f.Name
	}
	target, err := targetColumns(ref.Table, cols, names)
	if err != nil {
		return 0, err
	}
	if _, err := deletePartition(ctx, t.tx, ref, cols, partition); err != nil {
		return 0, err
	}
	// The newline after the query ends a trailing line comment.
	tag, err := t.tx.Exec(ctx, fmt.Sprintf("INSERT INTO %s (%s)\n%s\n", sqltext.QuoteIdent(ref.Table), target, bound), args...)
	if err != nil {
		return 0, fmt.Errorf("query job for partition %s of %s: %w", partition, ref.Table, err)
	}
	return tag.RowsAffected(), nil
}

// targetColumns matches a query's output column names to the table's
// columns, exactly as PostgreSQL names are matched, and renders them as an
// INSERT's column list in output order.
func targetColumns(table string, cols []refill.Column, names []string) (string, error) {
	have := make(map[string]bool, len(cols))
	for _, c := range cols {
		have[c.Name] = true
	}
	quoted := make([]string, len(names))
	seen := map[string]bool{}
	for i, n := range names {
		if !have[n] {
			return "", refill.BadInputf("the query's output column %q is not a column of table %s: name each output column after the column it fills (SELECT expr AS name)", n, table)
		}
		if seen[n] {
			return "", refill.BadInputf("the query has two output columns named %s", n)
		}
		seen[n] = true
		quoted[i] = sqltext.QuoteIdent(n)
	}
	return strings.Join(quoted, ", "), nil
}

// ExecSQL runs an sql job's statements in order, each with :partition
// bound, through the extended protocol, so that each is exactly one
// statement whatever the DSN's exec mode. A statement the warehouse refuses
// is the job's failure, not bad input: the error names the statement and
// carries PostgreSQL's message. After one fails, the transaction is aborted
// and refuses everything but the rollback.
func (t *tx) ExecSQL(ctx context.Context, sql, partition string) error {
	stmts, err := sqltext.Postgres.Statements(sql)
	if err != nil {
		return err
	}
	for i, s := range stmts {
		bound, uses := sqltext.Postgres.BindPartition(s, "$1")
		args := []any{pgx.QueryExecModeDescribeExec}
		if uses > 0 {
			args = append(args, partition)
		}
		if _, err := t.tx.Exec(ctx, bound, args...); err != nil {
			return &sqltext.StatementError{N: i + 1, Of: len(stmts), Partition: partition, SQL: sqltext.Postgres.Excerpt(s), Err: err}
		}
	}
	return nil
}
