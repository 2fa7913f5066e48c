package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"

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
	release, err := w.turn(ctx)
	if err != nil {
		return fmt.Errorf("rehearsal: %w", err)
	}
	defer release()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("rehearsal: begin: %w", err)
	}
	// Deferred calls run during a panic too: the rollback comes first, then
	// the panic goes on.
	defer func() {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
	}()
	t := &tx{conn: conn}
	defer t.closeStmts()
	if err := t.hook(); err != nil {
		return fmt.Errorf("rehearsal: %w", err)
	}
	return fn(t)
}

// discard closes conn for good instead of returning it to the pool.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}

// tx is a rehearsal's or a run's transaction, on a connection of its own.
type tx struct {
	conn *sql.Conn
	// kept are the content diff's copies, by table, keptN how many were
	// made; stmts the statements prepared for them (diff.go).
	kept  map[string][]*keptCopy
	keptN int
	stmts map[string]*sql.Stmt
	// committing is set just before refill's own COMMIT, the one commit
	// the commit hook lets through.
	committing bool
	// ended is set by the transaction hooks when the transaction ended
	// before refill ended it, and endedBy says how.
	ended   bool
	endedBy string
	// failed is set when job text failed in the transaction, which then
	// only rolls back.
	failed bool
	// guard is the guard of the job text running now (nil for none), and
	// authorizing whether the transaction's authorizer, which asks it, is
	// installed (guard.go).
	guard       *guard
	authorizing bool
	// fences are the partition triggers the transaction made.
	fences fences
	// tainted is set when state that outlives the transaction may be
	// left on the connection (a job's partition triggers or
	// recursive_triggers could not be taken back), or a guard could not
	// be removed: the connection is then closed rather than pooled.
	tainted bool
}

// Digest is Warehouse.Digest inside the transaction.
func (t *tx) Digest(ctx context.Context, ref refill.TableRef, partition string) (refill.Digest, error) {
	if err := t.usable(); err != nil {
		return refill.Digest{}, err
	}
	return digest(ctx, prepared{t}, ref, partition)
}

// DeletePartition deletes one partition of ref, selected exactly as
// PartitionCounts counts it.
func (t *tx) DeletePartition(ctx context.Context, ref refill.TableRef, partition string) (int64, error) {
	if err := t.usable(); err != nil {
		return 0, err
	}
	cols, err := columns(ctx, prepared{t}, ref.Table)
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
	res, err := db.ExecContext(ctx, fmt.Sprintf("DELETE FROM %s WHERE %s", sqltext.SQLite.QuoteName(ref.Table), f.where), f.args...)
	if err != nil {
		return 0, fmt.Errorf("delete partition %s of %s: %w", partition, ref.Table, err)
	}
	return res.RowsAffected()
}

// ReplaceFromQuery deletes the partition and inserts the rows of a query
// job, which must be one SELECT. Its output columns name the table's
// columns they fill: INSERT INTO t (its output names) query, so that the
// warehouse, not refill, moves the rows. The query runs under a guard that
// lets it only read, and refill's INSERT write into t.
//
// Every row must fall in the partition: the partition was emptied first,
// so one count afterwards tells whether all the rows inserted are in it.
// If not, the error is an *refill.OutsidePartitionError and the caller's
// transaction, rolled back, takes the rows with it.
func (t *tx) ReplaceFromQuery(ctx context.Context, ref refill.TableRef, query, partition string) (n int64, err error) {
	if err := t.usable(); err != nil {
		return 0, err
	}
	defer func() { t.fail(err) }()
	q, err := sqltext.SQLite.Subquery(query)
	if err != nil {
		return 0, err
	}
	bound, uses := sqltext.SQLite.BindPartition(q, "?1")
	var args []any
	if uses > 0 {
		args = []any{partition}
	}
	cols, err := columns(ctx, prepared{t}, ref.Table)
	if err != nil {
		return 0, err
	}
	f, err := partitionFilter(ref, cols, partition, partition)
	if err != nil {
		return 0, fmt.Errorf("query job for %s: %w", ref.Table, err) // a malformed partition
	}
	var names []string
	err = t.jobText(ctx, newQueryGuard(ref.Table), partition, func() error {
		// The newline before ) ends a trailing line comment in the query.
		rows, err := t.conn.QueryContext(ctx, "SELECT * FROM (\n"+bound+"\n) LIMIT 0", args...)
		if err != nil {
			return fmt.Errorf("query job for partition %s of %s: %w", partition, ref.Table, err)
		}
		names, err = rows.Columns()
		rows.Close()
		if err != nil {
			return fmt.Errorf("query job for partition %s of %s: %w", partition, ref.Table, err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	target, err := sqltext.SQLite.TargetColumns(ref.Table, cols, names)
	if err != nil {
		return 0, err
	}
	if _, err := deletePartition(ctx, t.conn, ref, cols, partition); err != nil {
		return 0, err
	}
	var inserted int64
	err = t.jobText(ctx, newQueryGuard(ref.Table), partition, func() error {
		res, err := t.conn.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s)\n%s\n", sqltext.SQLite.QuoteName(ref.Table), target, bound), args...)
		if err != nil {
			return fmt.Errorf("query job for partition %s of %s: %w", partition, ref.Table, err)
		}
		inserted, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, err
	}
	var inside int64
	if err := t.conn.QueryRowContext(ctx, fmt.Sprintf("SELECT count(*) FROM %s WHERE %s", sqltext.SQLite.QuoteName(ref.Table), f.where), f.args...).Scan(&inside); err != nil {
		return 0, fmt.Errorf("query job for partition %s of %s: counting its rows: %w", partition, ref.Table, err)
	}
	if inside != inserted {
		return 0, &refill.OutsidePartitionError{
			Table: ref.Table, Partition: partition, Rows: inserted - inside,
			Value: t.outsideValue(ctx, ref, names, f, q, partition),
		}
	}
	return inserted, nil
}

// outsideValue finds, for an error message, the partition column's value
// in one row of the query that is outside the partition, by running the
// query again: the failed job's rows are rolled back anyway. It never
// fails; at worst it says it does not know.
func (t *tx) outsideValue(ctx context.Context, ref refill.TableRef, names []string, f filter, q, partition string) string {
	out, ok := sqltext.SQLite.Column(sqltext.Named(names), ref.Column)
	if !ok {
		return fmt.Sprintf("the column's default (the query has no output column %s)", ref.Column)
	}
	// The filter's arguments are ?1 to ?4, so the query's :partition is ?5.
	bound, _ := sqltext.SQLite.BindPartition(q, "?5")
	col := sqltext.QuoteIdent(out.Name)
	stmt := fmt.Sprintf("SELECT coalesce(CAST(%[1]s AS TEXT), 'NULL') FROM (\n%[2]s\n) WHERE (%[3]s) IS NOT 1 LIMIT 1", col, bound, f.where)
	var v string
	err := t.jobText(ctx, newQueryGuard(""), partition, func() error {
		return t.conn.QueryRowContext(ctx, stmt, slices.Concat(f.args, []any{partition})...).Scan(&v)
	})
	if err != nil {
		return "(unknown)"
	}
	return v
}

// ExecSQL runs an sql job's statements in order, each with :partition
// bound, under the guard that refuses transaction control, ATTACH,
// PRAGMAs, schema changes, reads of refill's own tables and writes to any
// table but ref's, and with ref's partition triggers up (partition.go).
// Text holding transaction control is refused before any of it runs. The
// statements are split only to name the one that fails, and to spot
// transaction control early; the guard does not depend on the split being
// right. A statement the warehouse refuses is the job's failure, not bad
// input: the error names the statement and carries SQLite's message. One
// the guard refuses is a *sqltext.RefusedError, which is bad input; a row
// written, moved or deleted outside the partition is a
// *refill.OutsidePartitionError.
func (t *tx) ExecSQL(ctx context.Context, ref refill.TableRef, sql, partition string) (err error) {
	if err := t.usable(); err != nil {
		return err
	}
	defer func() { t.fail(err) }()
	stmts, err := sqltext.SQLite.Statements(sql)
	if err != nil {
		return err
	}
	if err := sqltext.SQLite.RefuseTransactionControl(stmts, ref.Table, partition); err != nil {
		return err
	}
	cols, err := columns(ctx, prepared{t}, ref.Table)
	if err != nil {
		return err
	}
	n, err := t.raiseFence(ctx, ref, cols, partition)
	if err != nil {
		return err
	}
	defer func() {
		if ferr := t.lowerFence(ctx, n); ferr != nil {
			err = errors.Join(err, ferr)
		}
	}()
	return t.jobText(ctx, newSQLGuard(ref.Table), partition, func() error {
		for i, s := range stmts {
			bound, uses := sqltext.SQLite.BindPartition(s, "?1")
			var args []any
			if uses > 0 {
				args = []any{partition}
			}
			if _, err := t.conn.ExecContext(ctx, bound, args...); err != nil {
				if v, ok := raisedOutside(err); ok {
					return &refill.OutsidePartitionError{Table: ref.Table, Partition: partition, Value: v}
				}
				return &sqltext.StatementError{N: i + 1, Of: len(stmts), Partition: partition, SQL: sqltext.SQLite.Excerpt(s), Err: err}
			}
		}
		return nil
	})
}
