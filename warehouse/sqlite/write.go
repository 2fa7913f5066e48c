package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

var _ refill.Transactor = (*Warehouse)(nil)

// Transact runs fn in one write transaction on a connection of its own and
// commits when fn returns nil; on an error, a panic or a cancelled context
// it rolls back, so what fn wrote appears all at once or not at all. Unlike
// a rehearsal's, the connection goes back to the pool: a run publishes many
// partitions and opening a connection each time would dominate its cost.
// It is closed instead when something that outlives the transaction may
// be left on it (a job's partition triggers that could not be dropped, a
// guard that could not be removed), so that nothing of a job reaches later
// work.
//
// Only Transact's own COMMIT commits: the transaction's commit hook turns
// any other into a rollback (see guard.go).
func (w *Warehouse) Transact(ctx context.Context, fn func(tx refill.WarehouseTx) error) (err error) {
	conn, err := w.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("transaction: %w", err)
	}
	t := &tx{conn: conn}
	defer func() {
		t.closeStmts()
		if t.tainted {
			discard(conn)
		} else {
			conn.Close()
		}
	}()
	// The turn comes first: creating refill's own tables writes too.
	release, err := w.turn(ctx)
	if err != nil {
		return fmt.Errorf("transaction: %w", err)
	}
	defer release()
	if err := w.createTables(ctx, conn); err != nil {
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
		if err := t.unhook(); err != nil {
			t.tainted = true
		}
		// Either sets t.tainted when it fails.
		_ = t.restoreRecursive(ctx)
		_ = t.unguard()
	}()
	if err := t.hook(); err != nil {
		return fmt.Errorf("transaction: %w", err)
	}
	if err := fn(t); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := t.usable(); err != nil {
		return fmt.Errorf("transaction: %w", err)
	}
	if err := t.dropFences(ctx); err != nil {
		return fmt.Errorf("transaction: %w", err)
	}
	t.committing = true
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("transaction: commit: %w", err)
	}
	committed = true
	return nil
}

// turn waits for this process's turn to write the file (writers): one
// writing transaction at a time, however long the others take.
func (w *Warehouse) turn(ctx context.Context) (release func(), err error) {
	if w.writer == nil {
		return func() {}, nil
	}
	select {
	case w.writer <- struct{}{}:
		return func() { <-w.writer }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for its turn to write: %w", ctx.Err())
	}
}

// CopyPartitions creates dst as a copy of t's rows in [from, to].
func (t *tx) CopyPartitions(ctx context.Context, ref refill.TableRef, dst, from, to string) error {
	if err := t.usable(); err != nil {
		return err
	}
	cols, err := columns(ctx, prepared{t}, ref.Table)
	if err != nil {
		return err
	}
	f, err := partitionFilter(ref, cols, from, to)
	if err != nil {
		return fmt.Errorf("copy %s: %w", ref.Table, err)
	}
	_, err = t.conn.ExecContext(ctx, fmt.Sprintf("CREATE TABLE %s AS SELECT * FROM %s WHERE %s",
		sqltext.SQLite.QuoteName(dst), sqltext.SQLite.QuoteName(ref.Table), f.where), f.args...)
	if err != nil {
		return fmt.Errorf("copy %s %s..%s into %s: %w", ref.Table, from, to, dst, err)
	}
	return nil
}

// RestorePartition replaces a partition of t with the rows of src,
// matching columns by name: the table may have been rebuilt with its
// columns in another order since the snapshot was taken. A column of src
// that t no longer has is refused, since restoring without it would lose
// data; a column t has gained is left to its default.
func (t *tx) RestorePartition(ctx context.Context, ref refill.TableRef, src, partition string) (int64, error) {
	if err := t.usable(); err != nil {
		return 0, err
	}
	cols, err := columns(ctx, prepared{t}, ref.Table)
	if err != nil {
		return 0, err
	}
	srcCols, err := columns(ctx, prepared{t}, src)
	if err != nil {
		return 0, err
	}
	into := make([]string, len(srcCols))
	from := make([]string, len(srcCols))
	for i, sc := range srcCols {
		c, ok := sqltext.SQLite.MatchColumn(cols, sc.Name)
		if !ok {
			return 0, refill.BadInputf("restore %s %s from %s: the snapshot has a column %s that %s no longer has; restoring would lose it, so add the column back first", ref.Table, partition, src, sc.Name, ref.Table)
		}
		into[i], from[i] = sqltext.QuoteIdent(c.Name), sqltext.QuoteIdent(sc.Name)
	}
	srcRef := refill.TableRef{Table: src, Column: ref.Column, Grain: ref.Grain}
	f, err := partitionFilter(srcRef, srcCols, partition, partition)
	if err != nil {
		return 0, fmt.Errorf("restore %s %s: %w", ref.Table, partition, err)
	}
	if _, err := deletePartition(ctx, t.conn, ref, cols, partition); err != nil {
		return 0, err
	}
	res, err := t.conn.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s WHERE %s",
		sqltext.SQLite.QuoteName(ref.Table), strings.Join(into, ", "), strings.Join(from, ", "), sqltext.SQLite.QuoteName(src), f.where), f.args...)
	if err != nil {
		return 0, fmt.Errorf("restore %s %s from %s: %w", ref.Table, partition, src, err)
	}
	return res.RowsAffected()
}

// DropTable drops table name if it exists.
func (t *tx) DropTable(ctx context.Context, name string) error {
	if err := t.usable(); err != nil {
		return err
	}
	if _, err := t.conn.ExecContext(ctx, "DROP TABLE IF EXISTS "+sqltext.SQLite.QuoteName(name)); err != nil {
		return fmt.Errorf("drop table %s: %w", name, err)
	}
	return nil
}

// MarkPublished records a plan's partition published in refill_published,
// a table refill keeps in the warehouse for exactly this.
func (t *tx) MarkPublished(ctx context.Context, planID, dataset, partition string) (bool, error) {
	if err := t.usable(); err != nil {
		return false, err
	}
	res, err := t.conn.ExecContext(ctx, `INSERT INTO refill_published (plan_id, dataset, partition) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, planID, dataset, partition)
	if err != nil {
		return false, fmt.Errorf("publish mark: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 0, err
}

// Anchor records the audit log's head in refill_audit_anchor, keyed by the
// state store it belongs to, with whether the log was keyed and its MAC.
// An anchor already there for the same entry is kept as it was.
func (t *tx) Anchor(ctx context.Context, a refill.AuditAnchor) error {
	if err := t.usable(); err != nil {
		return err
	}
	var mac any
	if a.MAC != "" {
		mac = a.MAC
	}
	if _, err := t.conn.ExecContext(ctx, `INSERT INTO refill_audit_anchor (store, seq, hash, keyed, mac) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, a.Store, a.Seq, a.Hash, a.Keyed, mac); err != nil {
		return fmt.Errorf("audit anchor: %w", err)
	}
	return nil
}

var _ refill.Anchorer = (*Warehouse)(nil)

// LatestAnchor returns store's anchor with the highest sequence number; ok
// is false when refill_audit_anchor is missing or holds none of store's.
func (w *Warehouse) LatestAnchor(ctx context.Context, store string) (refill.AuditAnchor, bool, error) {
	as, err := w.anchors(ctx, `WHERE store = ? ORDER BY seq DESC LIMIT 1`, store)
	if err != nil || len(as) == 0 {
		return refill.AuditAnchor{}, false, err
	}
	return as[0], true, nil
}

// Anchors returns every anchor of store, oldest first.
func (w *Warehouse) Anchors(ctx context.Context, store string) ([]refill.AuditAnchor, error) {
	return w.anchors(ctx, `WHERE store = ? ORDER BY seq`, store)
}

// LatestAnchors returns the latest anchor of each store, ordered by store.
func (w *Warehouse) LatestAnchors(ctx context.Context) ([]refill.AuditAnchor, error) {
	return w.anchors(ctx, `a WHERE seq = (SELECT max(seq) FROM refill_audit_anchor b WHERE b.store = a.store) ORDER BY store`)
}

// anchors reads the anchors that the clause after FROM refill_audit_anchor
// selects. It only reads: a table from before anchors recorded keyed and
// mac reads them as unkeyed, without a MAC, until a publish upgrades it.
func (w *Warehouse) anchors(ctx context.Context, clause string, args ...any) ([]refill.AuditAnchor, error) {
	var n, upgraded int
	if err := w.db.QueryRowContext(ctx, `SELECT count(*), count(*) FILTER (WHERE name = 'mac') FROM pragma_table_info('refill_audit_anchor')`).Scan(&n, &upgraded); err != nil {
		return nil, fmt.Errorf("audit anchor: %w", err)
	}
	if n == 0 {
		return nil, nil
	}
	cols := `store, seq, hash, NULL, NULL`
	if upgraded > 0 {
		cols = `store, seq, hash, keyed, mac`
	}
	rows, err := w.db.QueryContext(ctx, `SELECT `+cols+` FROM refill_audit_anchor `+clause, args...)
	if err != nil {
		return nil, fmt.Errorf("audit anchor: %w", err)
	}
	defer rows.Close()
	var out []refill.AuditAnchor
	for rows.Next() {
		var (
			a     refill.AuditAnchor
			keyed sql.NullBool
			mac   sql.NullString
		)
		if err := rows.Scan(&a.Store, &a.Seq, &a.Hash, &keyed, &mac); err != nil {
			return nil, fmt.Errorf("audit anchor: %w", err)
		}
		a.Keyed, a.MAC = keyed.Bool, mac.String
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit anchor: %w", err)
	}
	return out, nil
}

// createTables makes sure refill's own tables, refill_published and
// refill_audit_anchor, exist: once per process and outside any transaction,
// so that a rolled-back publish cannot take a table with it.
func (w *Warehouse) createTables(ctx context.Context, conn *sql.Conn) error {
	if w.ownTables.Load() {
		return nil
	}
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS refill_published (
		plan_id TEXT NOT NULL, dataset TEXT NOT NULL, partition TEXT NOT NULL, published_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
		PRIMARY KEY (plan_id, dataset, partition))`); err != nil {
		return fmt.Errorf("publish mark: %w", err)
	}
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS refill_audit_anchor (
		store TEXT NOT NULL, seq INTEGER NOT NULL, hash TEXT NOT NULL, written_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
		keyed INTEGER, mac TEXT,
		PRIMARY KEY (store, seq))`); err != nil {
		return fmt.Errorf("audit anchor: %w", err)
	}
	// A table from before anchors recorded keyed and mac gains them; its
	// old rows keep NULL, read as unkeyed. Another process may add them
	// first.
	var upgraded int
	if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('refill_audit_anchor') WHERE name = 'mac'`).Scan(&upgraded); err != nil {
		return fmt.Errorf("audit anchor: %w", err)
	}
	if upgraded == 0 {
		for _, q := range []string{`ALTER TABLE refill_audit_anchor ADD COLUMN keyed INTEGER`, `ALTER TABLE refill_audit_anchor ADD COLUMN mac TEXT`} {
			if _, err := conn.ExecContext(ctx, q); err != nil && !strings.Contains(err.Error(), "duplicate column") {
				return fmt.Errorf("audit anchor: %w", err)
			}
		}
	}
	w.ownTables.Store(true)
	return nil
}
