//go:build duckdb

package duckdb

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// CopyPartitions creates dst as a copy of t's rows in [from, to].
func (t *tx) CopyPartitions(ctx context.Context, ref refill.TableRef, dst, from, to string) (err error) {
	if err := t.usable(); err != nil {
		return err
	}
	defer func() { t.fail(err) }()
	cols, err := columns(ctx, t.conn, ref.Table)
	if err != nil {
		return err
	}
	f, err := partitionFilter(ref, cols, from, to)
	if err != nil {
		return fmt.Errorf("copy %s: %w", ref.Table, err)
	}
	_, err = t.conn.ExecContext(ctx, fmt.Sprintf("CREATE TABLE %s AS SELECT * FROM %s WHERE %s", d.QuoteName(dst), d.QuoteName(ref.Table), f.where), f.args...)
	if err != nil {
		return fmt.Errorf("copy %s %s..%s into %s: %w", ref.Table, from, to, dst, err)
	}
	return nil
}

// RestorePartition replaces a partition of t with the rows of src,
// matching columns by name. A column of src that t no longer has is
// refused, since restoring without it would lose data; a column t has
// gained is left to its default.
func (t *tx) RestorePartition(ctx context.Context, ref refill.TableRef, src, partition string) (n int64, err error) {
	if err := t.usable(); err != nil {
		return 0, err
	}
	defer func() { t.fail(err) }()
	cols, err := columns(ctx, t.conn, ref.Table)
	if err != nil {
		return 0, err
	}
	srcCols, err := columns(ctx, t.conn, src)
	if err != nil {
		return 0, err
	}
	into := make([]string, len(srcCols))
	from := make([]string, len(srcCols))
	for i, sc := range srcCols {
		c, ok := d.MatchColumn(cols, sc.Name)
		if !ok {
			return 0, refill.BadInputf("restore %s %s from %s: the snapshot has a column %s that %s no longer has; restoring would lose it, so add the column back first", ref.Table, partition, src, sc.Name, ref.Table)
		}
		into[i], from[i] = sqltext.QuoteIdent(c.Name), sqltext.QuoteIdent(sc.Name)
	}
	f, err := partitionFilter(refill.TableRef{Table: src, Column: ref.Column, Grain: ref.Grain}, srcCols, partition, partition)
	if err != nil {
		return 0, fmt.Errorf("restore %s %s: %w", ref.Table, partition, err)
	}
	if _, err := deletePartition(ctx, t.conn, ref, cols, partition); err != nil {
		return 0, err
	}
	res, err := t.conn.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s WHERE %s",
		d.QuoteName(ref.Table), strings.Join(into, ", "), strings.Join(from, ", "), d.QuoteName(src), f.where), f.args...)
	if err != nil {
		return 0, fmt.Errorf("restore %s %s from %s: %w", ref.Table, partition, src, err)
	}
	return res.RowsAffected()
}

// DropTable drops table name if it exists.
func (t *tx) DropTable(ctx context.Context, name string) (err error) {
	if err := t.usable(); err != nil {
		return err
	}
	defer func() { t.fail(err) }()
	if _, err := t.conn.ExecContext(ctx, "DROP TABLE IF EXISTS "+d.QuoteName(name)); err != nil {
		return fmt.Errorf("drop table %s: %w", name, err)
	}
	return nil
}

// MarkPublished records a plan's partition published in refill_published.
func (t *tx) MarkPublished(ctx context.Context, planID, dataset, partition string) (already bool, err error) {
	if err := t.usable(); err != nil {
		return false, err
	}
	defer func() { t.fail(err) }()
	var n int64
	if err := t.conn.QueryRowContext(ctx, `SELECT count(*) FROM refill_published WHERE plan_id = $1 AND dataset = $2 AND partition = $3`, planID, dataset, partition).Scan(&n); err != nil {
		return false, fmt.Errorf("publish mark: %w", err)
	}
	if n > 0 {
		return true, nil
	}
	if _, err := t.conn.ExecContext(ctx, `INSERT INTO refill_published (plan_id, dataset, partition) VALUES ($1, $2, $3)`, planID, dataset, partition); err != nil {
		return false, fmt.Errorf("publish mark: %w", err)
	}
	return false, nil
}

// Anchor records the audit log's head in refill_audit_anchor. An anchor
// already there for the same entry is kept as it was.
func (t *tx) Anchor(ctx context.Context, a refill.AuditAnchor) (err error) {
	if err := t.usable(); err != nil {
		return err
	}
	defer func() { t.fail(err) }()
	var mac any
	if a.MAC != "" {
		mac = a.MAC
	}
	if _, err := t.conn.ExecContext(ctx, `INSERT INTO refill_audit_anchor (store, seq, hash, keyed, mac) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`, a.Store, a.Seq, a.Hash, a.Keyed, mac); err != nil {
		return fmt.Errorf("audit anchor: %w", err)
	}
	return nil
}

var _ refill.Anchorer = (*Warehouse)(nil)

// LatestAnchor returns store's anchor with the highest sequence number.
func (w *Warehouse) LatestAnchor(ctx context.Context, store string) (refill.AuditAnchor, bool, error) {
	as, err := w.anchors(ctx, `WHERE store = $1 ORDER BY seq DESC LIMIT 1`, store)
	if err != nil || len(as) == 0 {
		return refill.AuditAnchor{}, false, err
	}
	return as[0], true, nil
}

// Anchors returns every anchor of store, oldest first.
func (w *Warehouse) Anchors(ctx context.Context, store string) ([]refill.AuditAnchor, error) {
	return w.anchors(ctx, `WHERE store = $1 ORDER BY seq`, store)
}

// LatestAnchors returns the latest anchor of each store, ordered by store.
func (w *Warehouse) LatestAnchors(ctx context.Context) ([]refill.AuditAnchor, error) {
	return w.anchors(ctx, `a WHERE seq = (SELECT max(seq) FROM refill_audit_anchor b WHERE b.store = a.store) ORDER BY store`)
}

func (w *Warehouse) anchors(ctx context.Context, clause string, args ...any) ([]refill.AuditAnchor, error) {
	db, done, err := w.inst.use()
	if err != nil {
		return nil, err
	}
	defer done()
	var n, upgraded int
	if err := db.QueryRowContext(ctx, `SELECT count(*), count(*) FILTER (WHERE column_name = 'mac') FROM duckdb_columns() WHERE table_name = 'refill_audit_anchor' AND database_name = current_database() AND schema_name = current_schema()`).Scan(&n, &upgraded); err != nil {
		return nil, fmt.Errorf("audit anchor: %w", err)
	}
	if n == 0 {
		return nil, nil
	}
	// A table from before anchors recorded keyed and mac reads them as
	// unkeyed, without a MAC, until a publish upgrades it.
	cols := `store, seq, hash, NULL, NULL`
	if upgraded > 0 {
		cols = `store, seq, hash, keyed, mac`
	}
	rows, err := db.QueryContext(ctx, `SELECT `+cols+` FROM refill_audit_anchor `+clause, args...)
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

// createTables makes sure refill's own tables exist: once per instance and
// outside any transaction, so that a rolled-back publish cannot take a
// table with it.
func (w *Warehouse) createTables(ctx context.Context, conn *sql.Conn) error {
	in := w.inst
	if in.ownTables.Load() {
		return nil
	}
	in.creating.Lock()
	defer in.creating.Unlock()
	if in.ownTables.Load() {
		return nil
	}
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS refill_published (
			plan_id VARCHAR NOT NULL, dataset VARCHAR NOT NULL, partition VARCHAR NOT NULL,
			published_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
			PRIMARY KEY (plan_id, dataset, partition))`,
		`CREATE TABLE IF NOT EXISTS refill_audit_anchor (
			store VARCHAR NOT NULL, seq BIGINT NOT NULL, hash VARCHAR NOT NULL,
			written_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp, keyed BOOLEAN, mac VARCHAR,
			PRIMARY KEY (store, seq))`,
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("refill's tables in the warehouse: %w", err)
		}
	}
	var upgraded int
	if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM duckdb_columns() WHERE table_name = 'refill_audit_anchor' AND column_name = 'mac' AND database_name = current_database() AND schema_name = current_schema()`).Scan(&upgraded); err != nil {
		return fmt.Errorf("audit anchor: %w", err)
	}
	if upgraded == 0 {
		for _, q := range []string{`ALTER TABLE refill_audit_anchor ADD COLUMN keyed BOOLEAN`, `ALTER TABLE refill_audit_anchor ADD COLUMN mac VARCHAR`} {
			if _, err := conn.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("audit anchor: %w", err)
			}
		}
	}
	in.ownTables.Store(true)
	return nil
}
