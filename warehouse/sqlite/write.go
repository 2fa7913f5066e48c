package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

var _ refill.Transactor = (*Warehouse)(nil)

// Transact runs fn in one write transaction on a connection of its own and
// commits when fn returns nil; on an error, a panic or a cancelled context
// it rolls back, so what fn wrote appears all at once or not at all. Unlike
// a rehearsal's, the connection goes back to the pool: a run publishes many
// partitions and opening a connection each time would dominate its cost.
func (w *Warehouse) Transact(ctx context.Context, fn func(tx refill.WarehouseTx) error) (err error) {
	conn, err := w.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("transaction: %w", err)
	}
	defer conn.Close()
	if err := w.createMarks(ctx, conn); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("transaction: begin: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	if err := fn(&tx{conn: conn}); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("transaction: commit: %w", err)
	}
	committed = true
	return nil
}

// CopyPartitions creates dst as a copy of t's rows in [from, to].
func (t *tx) CopyPartitions(ctx context.Context, ref refill.TableRef, dst, from, to string) error {
	cols, err := columns(ctx, t.conn, ref.Table)
	if err != nil {
		return err
	}
	f, err := partitionFilter(ref, cols, from, to)
	if err != nil {
		return fmt.Errorf("copy %s: %w", ref.Table, err)
	}
	_, err = t.conn.ExecContext(ctx, fmt.Sprintf("CREATE TABLE %s AS SELECT * FROM %s WHERE %s",
		sqltext.QuoteIdent(dst), sqltext.QuoteIdent(ref.Table), f.where), f.args...)
	if err != nil {
		return fmt.Errorf("copy %s %s..%s into %s: %w", ref.Table, from, to, dst, err)
	}
	return nil
}

// RestorePartition replaces a partition of t with the rows of src.
func (t *tx) RestorePartition(ctx context.Context, ref refill.TableRef, src, partition string) (int64, error) {
	cols, err := columns(ctx, t.conn, ref.Table)
	if err != nil {
		return 0, err
	}
	if _, err := deletePartition(ctx, t.conn, ref, cols, partition); err != nil {
		return 0, err
	}
	srcRef := refill.TableRef{Table: src, Column: ref.Column, Grain: ref.Grain}
	srcCols, err := columns(ctx, t.conn, src)
	if err != nil {
		return 0, err
	}
	f, err := partitionFilter(srcRef, srcCols, partition, partition)
	if err != nil {
		return 0, fmt.Errorf("restore %s %s: %w", ref.Table, partition, err)
	}
	res, err := t.conn.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s SELECT * FROM %s WHERE %s",
		sqltext.QuoteIdent(ref.Table), sqltext.QuoteIdent(src), f.where), f.args...)
	if err != nil {
		return 0, fmt.Errorf("restore %s %s from %s: %w", ref.Table, partition, src, err)
	}
	return res.RowsAffected()
}

// MarkPublished records a plan's partition published in refill_published,
// a table refill keeps in the warehouse for exactly this.
func (t *tx) MarkPublished(ctx context.Context, planID, dataset, partition string) (bool, error) {
	res, err := t.conn.ExecContext(ctx, `INSERT INTO refill_published (plan_id, dataset, partition) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, planID, dataset, partition)
	if err != nil {
		return false, fmt.Errorf("publish mark: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 0, err
}

// createMarks makes sure refill_published exists, once per process and
// outside any transaction (so that a rolled-back publish cannot take the
// table with it).
func (w *Warehouse) createMarks(ctx context.Context, conn *sql.Conn) error {
	if w.marks.Load() {
		return nil
	}
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS refill_published (
		plan_id TEXT NOT NULL, dataset TEXT NOT NULL, partition TEXT NOT NULL, published_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
		PRIMARY KEY (plan_id, dataset, partition))`); err != nil {
		return fmt.Errorf("publish mark: %w", err)
	}
	w.marks.Store(true)
	return nil
}
