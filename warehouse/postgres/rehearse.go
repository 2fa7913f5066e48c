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

// tx is a rehearsal's or a run's transaction.
type tx struct {
	tx pgx.Tx
	// utc is set once job text's TimeZone (UTC) is set for the rest of
	// the transaction.
	utc bool
	// jobRan is set once job text has run: the session may then carry its
	// settings, and is cleaned before the connection is pooled again.
	jobRan bool
	// failed is set when job text failed in the transaction, which then
	// only rolls back.
	failed bool
	// fences are the partition fences put on tables in the transaction,
	// by table oid (guard.go).
	fences map[uint32]*partitionFence
	// diffs is how many content diffs are open (diff.go): one made inside
	// another's rebuild keeps its copy in a table of its own.
	diffs int
}

// Digest is Warehouse.Digest inside the transaction.
func (t *tx) Digest(ctx context.Context, ref refill.TableRef, partition string) (refill.Digest, error) {
	if err := t.usable(); err != nil {
		return refill.Digest{}, err
	}
	return digest(ctx, t.tx, ref, partition)
}

// DeletePartition deletes one partition of ref, selected exactly as
// PartitionCounts counts it.
func (t *tx) DeletePartition(ctx context.Context, ref refill.TableRef, partition string) (int64, error) {
	if err := t.usable(); err != nil {
		return 0, err
	}
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
	tag, err := db.Exec(ctx, fmt.Sprintf("DELETE FROM %s WHERE %s", sqltext.Postgres.QuoteName(ref.Table), p.where), p.args...)
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
// nothing. The query runs with TimeZone UTC, as partitions are cut.
//
// Every row must fall in the partition. The INSERT returns the partition
// column of the rows it wrote to a count in the same statement, so the
// check costs no extra round trip; a row outside is an
// *refill.OutsidePartitionError, and the caller's transaction, rolled
// back, takes the rows with it. The transaction's statistics around the
// INSERT must show no schema change and no use of refill's own tables
// (guard.go), or the query is refused.
func (t *tx) ReplaceFromQuery(ctx context.Context, ref refill.TableRef, query, partition string) (n int64, err error) {
	if err := t.usable(); err != nil {
		return 0, err
	}
	defer func() { t.fail(err) }()
	q, err := sqltext.Postgres.Subquery(query)
	if err != nil {
		return 0, err
	}
	cols, err := columns(ctx, t.tx, ref.Table)
	if err != nil {
		return 0, err
	}
	p, err := partitionPlanFor(ref, cols, partition, partition)
	if err != nil {
		return 0, fmt.Errorf("query job for %s: %w", ref.Table, err) // a malformed partition
	}
	t.jobRan = true
	if !t.utc {
		if _, err := t.tx.Exec(ctx, "SET LOCAL TIME ZONE 'UTC'"); err != nil {
			return 0, fmt.Errorf("query job for partition %s of %s: %w", partition, ref.Table, err)
		}
		t.utc = true
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
	target, err := sqltext.Postgres.TargetColumns(ref.Table, cols, names)
	if err != nil {
		return 0, err
	}
	if _, err := deletePartition(ctx, t.tx, ref, cols, partition); err != nil {
		return 0, err
	}
	// The partition predicate's arguments come first; the query's
	// :partition follows them.
	bound, uses := sqltext.Postgres.BindPartition(q, fmt.Sprintf("$%d", len(p.args)+1))
	args := append([]any{pgx.QueryExecModeDescribeExec}, p.args...)
	if uses > 0 {
		args = append(args, partition)
	}
	pc, err := partitionColumn(ref, cols)
	if err != nil {
		return 0, err
	}
	col := sqltext.QuoteIdent(pc.Name)
	// The newline after the query ends a trailing line comment.
	stmt := fmt.Sprintf(`WITH refill_inserted AS (
INSERT INTO %[1]s (%[2]s)
%[3]s
RETURNING %[4]s
)
SELECT count(*), count(*) FILTER (WHERE (%[5]s) IS NOT TRUE), min(coalesce(%[4]s::text, 'NULL')) FILTER (WHERE (%[5]s) IS NOT TRUE)
FROM refill_inserted`, sqltext.Postgres.QuoteName(ref.Table), target, bound, col, p.where)
	before, err := tableCounts(ctx, t.tx)
	if err != nil {
		return 0, err
	}
	var inserted, outside int64
	var value *string
	if err := t.tx.QueryRow(ctx, stmt, args...).Scan(&inserted, &outside, &value); err != nil {
		return 0, fmt.Errorf("query job for partition %s of %s: %w", partition, ref.Table, err)
	}
	after, err := tableCounts(ctx, t.tx)
	if err != nil {
		return 0, err
	}
	if err := judge(before, after, nil, false, ref.Table, partition); err != nil {
		return 0, err
	}
	if outside > 0 {
		e := &refill.OutsidePartitionError{Table: ref.Table, Partition: partition, Rows: outside}
		if value != nil {
			e.Value = *value
		}
		return 0, e
	}
	return inserted, nil
}

// ExecSQL runs an sql job's statements in order, each in a DO block of its
// own (job.go) with :partition inlined as a literal, after setting TimeZone
// to UTC for the rest of the transaction. Text holding transaction control
// is refused before any of it runs, and PostgreSQL refuses any attempt to
// end or control the transaction that the split missed: either is a
// *sqltext.RefusedError (bad input). While the statements run, ref's
// partition fence refuses rows outside the partition, as a
// *refill.OutsidePartitionError; afterwards the transaction's statistics
// must show no write to another table, no schema change and no use of
// refill's own tables, or the job is refused (guard.go). Any other
// statement the warehouse refuses is the job's failure: the error names the
// statement and carries PostgreSQL's message. After one fails, the
// transaction is aborted and refuses everything but the rollback.
// Afterwards the search_path is put back, so that refill's own statements
// find the tables they did before.
func (t *tx) ExecSQL(ctx context.Context, ref refill.TableRef, sql, partition string) (err error) {
	if err := t.usable(); err != nil {
		return err
	}
	defer func() { t.fail(err) }()
	lit, err := partitionLiteral(partition)
	if err != nil {
		return err
	}
	stmts, err := sqltext.Postgres.Statements(sql)
	if err != nil {
		return err
	}
	if err := sqltext.Postgres.RefuseTransactionControl(stmts, ref.Table, partition); err != nil {
		return err
	}
	cols, err := columns(ctx, t.tx, ref.Table)
	if err != nil {
		return err
	}
	f, err := t.fence(ctx, ref)
	if err != nil {
		return err
	}
	if err := t.arm(ctx, f, ref, cols, partition); err != nil {
		return err
	}
	state, err := t.jobSettings(ctx)
	if err != nil {
		return err
	}
	t.utc = true
	before, err := tableCounts(ctx, t.tx)
	if err != nil {
		return err
	}
	for i, s := range stmts {
		bound, _ := sqltext.Postgres.BindPartition(s, lit)
		if err := t.execDo(ctx, doBlock(bound)); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("sql job statement %d of %d for partition %s: %w", i+1, len(stmts), partition, ctx.Err())
			}
			if out := outsidePartition(err, ref, partition); out != nil {
				return out
			}
			return jobError(err, i+1, len(stmts), ref.Table, partition, s)
		}
	}
	if err := t.restoreSettings(ctx, state); err != nil {
		return err
	}
	after, err := tableCounts(ctx, t.tx)
	if err != nil {
		return err
	}
	if err := judge(before, after, f.own, true, ref.Table, partition); err != nil {
		return err
	}
	return t.disarm(ctx, f)
}
