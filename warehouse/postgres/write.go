package postgres

import (
	"context"
	"fmt"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

var _ refill.Transactor = (*Warehouse)(nil)

// Transact runs fn in one transaction and commits when fn returns nil; on
// an error, a panic or a cancelled context it rolls back, so what fn wrote
// appears all at once or not at all.
func (w *Warehouse) Transact(ctx context.Context, fn func(tx refill.WarehouseTx) error) error {
	if err := w.createMarks(ctx); err != nil {
		return err
	}
	// Unlike a rehearsal's, the connection goes back to the pool: a run
	// publishes many partitions, and a new connection each time would
	// dominate its cost.
	t, err := w.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("transaction: begin: %w", err)
	}
	defer func() {
		rbCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		_ = t.Rollback(rbCtx) // a no-op after Commit
	}()
	if err := fn(&tx{tx: t}); err != nil {
		return err
	}
	if err := t.Commit(ctx); err != nil {
		return fmt.Errorf("transaction: commit: %w", err)
	}
	return nil
}

// CopyPartitions creates dst as a copy of t's rows in [from, to].
func (t *tx) CopyPartitions(ctx context.Context, ref refill.TableRef, dst, from, to string) error {
	cols, err := columns(ctx, t.tx, ref.Table)
	if err != nil {
		return err
	}
	p, err := partitionPlanFor(ref, cols, from, to)
	if err != nil {
		return fmt.Errorf("copy %s: %w", ref.Table, err)
	}
	_, err = t.tx.Exec(ctx, fmt.Sprintf("CREATE TABLE %s AS SELECT * FROM %s WHERE %s",
		sqltext.QuoteIdent(dst), sqltext.QuoteIdent(ref.Table), p.where), p.args...)
	if err != nil {
		return fmt.Errorf("copy %s %s..%s into %s: %w", ref.Table, from, to, dst, err)
	}
	return nil
}

// RestorePartition replaces a partition of t with the rows of src.
func (t *tx) RestorePartition(ctx context.Context, ref refill.TableRef, src, partition string) (int64, error) {
	cols, err := columns(ctx, t.tx, ref.Table)
	if err != nil {
		return 0, err
	}
	if _, err := deletePartition(ctx, t.tx, ref, cols, partition); err != nil {
		return 0, err
	}
	srcCols, err := columns(ctx, t.tx, src)
	if err != nil {
		return 0, err
	}
	p, err := partitionPlanFor(refill.TableRef{Table: src, Column: ref.Column, Grain: ref.Grain}, srcCols, partition, partition)
	if err != nil {
		return 0, fmt.Errorf("restore %s %s: %w", ref.Table, partition, err)
	}
	tag, err := t.tx.Exec(ctx, fmt.Sprintf("INSERT INTO %s SELECT * FROM %s WHERE %s",
		sqltext.QuoteIdent(ref.Table), sqltext.QuoteIdent(src), p.where), p.args...)
	if err != nil {
		return 0, fmt.Errorf("restore %s %s from %s: %w", ref.Table, partition, src, err)
	}
	return tag.RowsAffected(), nil
}

// MarkPublished records a plan's partition published in refill_published,
// a table refill keeps in the warehouse for exactly this.
func (t *tx) MarkPublished(ctx context.Context, planID, dataset, partition string) (bool, error) {
	tag, err := t.tx.Exec(ctx, `INSERT INTO refill_published (plan_id, dataset, partition) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, planID, dataset, partition)
	if err != nil {
		return false, fmt.Errorf("publish mark: %w", err)
	}
	return tag.RowsAffected() == 0, nil
}

// createMarks makes sure refill_published exists, once per process and
// outside any transaction (so that a rolled-back publish cannot take the
// table with it).
func (w *Warehouse) createMarks(ctx context.Context) error {
	if w.marks.Load() {
		return nil
	}
	if _, err := w.pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS refill_published (
		plan_id text NOT NULL, dataset text NOT NULL, partition text NOT NULL, published_at timestamptz NOT NULL DEFAULT now(),
		PRIMARY KEY (plan_id, dataset, partition))`); err != nil {
		return fmt.Errorf("publish mark: %w", err)
	}
	w.marks.Store(true)
	return nil
}
