//go:build duckdb

package duckdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

var (
	_ refill.Rehearser   = (*Warehouse)(nil)
	_ refill.Transactor  = (*Warehouse)(nil)
	_ refill.WarehouseTx = (*tx)(nil)
)

// tx is a rehearsal's or a run's transaction, on a connection of its own.
type tx struct {
	conn *sql.Conn
	// failed is the first error that ended the transaction's usefulness:
	// DuckDB aborts a transaction at its first failed statement, and
	// refill never lets work go on after job text failed.
	failed error
	// kept are the content diff's copies, by table, keptN how many were
	// made (diff.go).
	kept  map[string][]*keptCopy
	keptN int
	// jobRan is set once job text ran on the connection, which is then
	// closed rather than pooled (guard.go).
	jobRan bool
}

// usable refuses more work once the transaction has failed.
func (t *tx) usable() error {
	if t.failed != nil {
		return fmt.Errorf("the transaction cannot go on after an earlier failure: %w", t.failed)
	}
	return nil
}

// fail records err (if any) as the transaction's failure.
func (t *tx) fail(err error) {
	if err != nil && t.failed == nil {
		t.failed = err
	}
}

// begin takes a connection and the file's turn to write, and begins a
// transaction on it. end rolls it back unless commit is set, and gives both
// back.
func (w *Warehouse) begin(ctx context.Context, what string) (t *tx, end func(commit bool) error, err error) {
	in := w.inst
	select {
	case in.writer <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("%s: waiting for its turn to write: %w", what, ctx.Err())
	}
	db, done, err := in.use()
	if err != nil {
		<-in.writer
		return nil, nil, err
	}
	release := func() { done(); <-in.writer }
	conn, err := db.Conn(ctx)
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := w.createTables(ctx, conn); err != nil {
		conn.Close()
		release()
		return nil, nil, err
	}
	if _, err := conn.ExecContext(ctx, "BEGIN TRANSACTION"); err != nil {
		conn.Close()
		release()
		return nil, nil, fmt.Errorf("%s: begin: %w", what, err)
	}
	t = &tx{conn: conn}
	end = func(commit bool) (err error) {
		defer release()
		defer func() {
			// The diff's copies are temporary tables, which would
			// outlive the transaction on its connection.
			if len(t.kept) > 0 {
				for _, kcs := range t.kept {
					for _, kc := range kcs {
						_, _ = conn.ExecContext(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS temp."+sqltext.QuoteIdent(kc.name))
					}
				}
			}
			if t.jobRan {
				discard(conn)
			} else {
				conn.Close()
			}
		}()
		if commit {
			if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
				_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
				return fmt.Errorf("%s: commit: %w", what, err)
			}
			return nil
		}
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		return nil
	}
	return t, end, nil
}

// discard closes conn for good instead of returning it to the pool.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}

// Rehearse runs fn inside one transaction and always rolls it back: when
// fn returns, fails, panics, or ctx is cancelled.
func (w *Warehouse) Rehearse(ctx context.Context, fn func(tx refill.WarehouseTx) error) error {
	t, end, err := w.begin(ctx, "rehearsal")
	if err != nil {
		return err
	}
	defer end(false)
	return fn(t)
}

// Transact runs fn in one transaction and commits when fn returns nil and
// no job text failed in it; on an error, a panic or a cancelled context it
// rolls back, so what fn wrote appears all at once or not at all. One
// transaction writes the file at a time, in this process.
func (w *Warehouse) Transact(ctx context.Context, fn func(tx refill.WarehouseTx) error) (err error) {
	t, end, err := w.begin(ctx, "transaction")
	if err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed {
			_ = end(false)
		}
	}()
	if err := fn(t); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := t.usable(); err != nil {
		return fmt.Errorf("transaction: %w", err)
	}
	committed = true
	return end(true)
}

// Digest is Warehouse.Digest inside the transaction.
func (t *tx) Digest(ctx context.Context, ref refill.TableRef, partition string) (refill.Digest, error) {
	if err := t.usable(); err != nil {
		return refill.Digest{}, err
	}
	dg, err := digest(ctx, t.conn, ref, partition)
	t.fail(err)
	return dg, err
}

// Profile is Warehouse.Profile inside the transaction.
func (t *tx) Profile(ctx context.Context, ref refill.TableRef, spec refill.ProfileSpec, from, to string) (map[string]refill.Profile, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	p, err := profile(ctx, t.conn, ref, spec, from, to)
	if err != nil && !errors.Is(err, refill.ErrBadInput) {
		t.fail(err)
	}
	return p, err
}

// DeletePartition deletes one partition of ref, selected exactly as
// PartitionCounts counts it.
func (t *tx) DeletePartition(ctx context.Context, ref refill.TableRef, partition string) (n int64, err error) {
	if err := t.usable(); err != nil {
		return 0, err
	}
	defer func() { t.fail(err) }()
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
	res, err := db.ExecContext(ctx, fmt.Sprintf("DELETE FROM %s WHERE %s", d.QuoteName(ref.Table), f.where), f.args...)
	if err != nil {
		return 0, fmt.Errorf("delete partition %s of %s: %w", partition, ref.Table, err)
	}
	return res.RowsAffected()
}

// maxRowID is the highest row id of table now: every row inserted later in
// the transaction has a higher one (DuckDB numbers a transaction's new rows
// from far above any stored row, in order).
func maxRowID(ctx context.Context, db querier, table string) (int64, error) {
	var n int64
	err := db.QueryRowContext(ctx, "SELECT coalesce(max(rowid), -1) FROM "+table).Scan(&n)
	return n, err
}

// ReplaceFromQuery deletes the partition and inserts the rows of a query
// job, which must be one SELECT reading none of refill's tables (guard.go).
// Its output columns name the table's columns they fill. Every row must
// fall in the partition; if not, the error is an
// *refill.OutsidePartitionError and the transaction only rolls back.
func (t *tx) ReplaceFromQuery(ctx context.Context, ref refill.TableRef, query, partition string) (n int64, err error) {
	if err := t.usable(); err != nil {
		return 0, err
	}
	defer func() { t.fail(err) }()
	q, err := d.Subquery(query)
	if err != nil {
		return 0, err
	}
	bound, uses := d.BindPartition(q, "$1")
	var args []any
	if uses > 0 {
		args = []any{partition}
	}
	cols, err := columns(ctx, t.conn, ref.Table)
	if err != nil {
		return 0, err
	}
	f, err := partitionFilter(ref, cols, partition, partition)
	if err != nil {
		return 0, fmt.Errorf("query job for %s: %w", ref.Table, err)
	}
	g := guard{conn: t.conn, table: ref.Table, partition: partition, query: true}
	t.jobRan = true
	if err := g.check(ctx, bound, args); err != nil {
		return 0, err
	}
	rows, err := t.conn.QueryContext(ctx, "SELECT * FROM (\n"+bound+"\n) LIMIT 0", args...)
	if err != nil {
		return 0, fmt.Errorf("query job for partition %s of %s: %w", partition, ref.Table, err)
	}
	names, err := rows.Columns()
	rows.Close()
	if err != nil {
		return 0, fmt.Errorf("query job for partition %s of %s: %w", partition, ref.Table, err)
	}
	target, err := d.TargetColumns(ref.Table, cols, names)
	if err != nil {
		return 0, err
	}
	table := d.QuoteName(ref.Table)
	if _, err := deletePartition(ctx, t.conn, ref, cols, partition); err != nil {
		return 0, err
	}
	before, err := maxRowID(ctx, t.conn, table)
	if err != nil {
		return 0, fmt.Errorf("query job for partition %s of %s: %w", partition, ref.Table, err)
	}
	res, err := t.conn.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s)\n%s\n", table, target, bound), args...)
	if err != nil {
		return 0, fmt.Errorf("query job for partition %s of %s: %w", partition, ref.Table, err)
	}
	inserted, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	pc, _ := partitionColumn(ref, cols)
	var outside int64
	var value sql.NullString
	err = t.conn.QueryRowContext(ctx, fmt.Sprintf("SELECT count(*), min(CAST(%[1]s AS VARCHAR)) FROM %[2]s WHERE rowid > %[4]s AND NOT coalesce((%[3]s), false)",
		sqltext.QuoteIdent(pc.Name), table, f.where, f.next(1)), append(f.args, before)...).Scan(&outside, &value)
	if err != nil {
		return 0, fmt.Errorf("query job for partition %s of %s: counting its rows: %w", partition, ref.Table, err)
	}
	if outside > 0 {
		v := value.String
		if _, ok := d.Column(sqltext.Named(names), ref.Column); !ok {
			v = fmt.Sprintf("the column's default (the query has no output column %s)", ref.Column)
		} else if !value.Valid {
			v = "NULL"
		}
		return 0, &refill.OutsidePartitionError{Table: ref.Table, Partition: partition, Rows: outside, Value: v}
	}
	return inserted, nil
}

// ExecSQL runs an sql job's statements in order, each with :partition
// bound. Before any of them runs, each is checked by DuckDB itself
// (guard.go): one statement, of a kind a job may run, reading none of
// refill's tables and writing only ref's table. A row of ref written,
// moved or deleted outside the partition is found afterwards, by
// comparing the rest of the table with what it was (the partition fence),
// and is an *refill.OutsidePartitionError. A statement DuckDB refuses is
// the job's failure: the error names the statement.
func (t *tx) ExecSQL(ctx context.Context, ref refill.TableRef, sqlText, partition string) (err error) {
	if err := t.usable(); err != nil {
		return err
	}
	defer func() { t.fail(err) }()
	stmts, err := d.Statements(sqlText)
	if err != nil {
		return err
	}
	if err := d.RefuseTransactionControl(stmts, ref.Table, partition); err != nil {
		return err
	}
	cols, err := columns(ctx, t.conn, ref.Table)
	if err != nil {
		return err
	}
	g := guard{conn: t.conn, table: ref.Table, partition: partition}
	bound := make([]string, len(stmts))
	args := make([][]any, len(stmts))
	for i, s := range stmts {
		var uses int
		bound[i], uses = d.BindPartition(s, "$1")
		if uses > 0 {
			args[i] = []any{partition}
		}
		if err := g.check(ctx, bound[i], args[i]); err != nil {
			var refused *sqltext.RefusedError
			if errors.As(err, &refused) {
				refused.SQL = d.Excerpt(s)
				return err
			}
			return &sqltext.StatementError{N: i + 1, Of: len(stmts), Partition: partition, SQL: d.Excerpt(s), Err: err}
		}
	}
	t.jobRan = true
	fence, err := raiseFence(ctx, t.conn, ref, cols, partition)
	if err != nil {
		return err
	}
	for i := range stmts {
		// Again, just before it runs: what an earlier statement did
		// (rows it wrote) binds this one anew.
		if i > 0 {
			if err := g.check(ctx, bound[i], args[i]); err != nil {
				var refused *sqltext.RefusedError
				if errors.As(err, &refused) {
					refused.SQL = d.Excerpt(stmts[i])
					return err
				}
				return &sqltext.StatementError{N: i + 1, Of: len(stmts), Partition: partition, SQL: d.Excerpt(stmts[i]), Err: err}
			}
		}
		if _, err := t.conn.ExecContext(ctx, bound[i], args[i]...); err != nil {
			return &sqltext.StatementError{N: i + 1, Of: len(stmts), Partition: partition, SQL: d.Excerpt(stmts[i]), Err: err}
		}
	}
	return fence.check(ctx)
}
