package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

var _ refill.Transactor = (*Warehouse)(nil)

// Transact runs fn in one transaction and commits when fn returns nil; on
// an error, a panic or a cancelled context it rolls back, so what fn wrote
// appears all at once or not at all.
//
// Unlike a rehearsal's, the connection goes back to the pool: a run
// publishes many partitions, and a new connection each time would dominate
// its cost. When job text ran on it, the session is first reset, because a
// job's SET outlives the transaction; if that fails, the connection is
// closed instead.
func (w *Warehouse) Transact(ctx context.Context, fn func(tx refill.WarehouseTx) error) error {
	if err := w.createTables(ctx); err != nil {
		return err
	}
	conn, err := w.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("transaction: %w", err)
	}
	var t *tx
	defer func() {
		if t != nil && t.jobRan {
			cleanCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
			defer cancel()
			if err := cleanSession(cleanCtx, conn.Conn()); err != nil {
				_ = conn.Hijack().Close(cleanCtx)
				return
			}
		}
		conn.Release()
	}()
	pt, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("transaction: begin: %w", err)
	}
	defer func() {
		rbCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		_ = pt.Rollback(rbCtx) // a no-op after Commit
	}()
	t = &tx{tx: pt}
	if err := fn(t); err != nil {
		return err
	}
	if err := t.usable(); err != nil {
		return fmt.Errorf("transaction: %w", err)
	}
	// A partition fence must not outlive the transaction: committed, it
	// would fire on other sessions' writes.
	if err := t.dropFences(ctx); err != nil {
		return fmt.Errorf("transaction: %w", err)
	}
	if err := pt.Commit(ctx); err != nil {
		return fmt.Errorf("transaction: commit: %w", err)
	}
	return nil
}

// CopyPartitions creates dst as a copy of t's rows in [from, to]. A
// schema-qualified dst (schema.table) is created in that schema, which is
// created first if need be. A name longer than PostgreSQL keeps (63 bytes)
// is refused rather than cut short, since a cut name can collide with
// another snapshot's.
func (t *tx) CopyPartitions(ctx context.Context, ref refill.TableRef, dst, from, to string) error {
	if err := t.usable(); err != nil {
		return err
	}
	dstParts := sqltext.Postgres.Resolve(dst)
	for _, part := range dstParts {
		if len(part) > maxIdentifier {
			return refill.BadInputf("snapshot table name %q is longer than PostgreSQL's %d bytes", part, maxIdentifier)
		}
	}
	cols, err := columns(ctx, t.tx, ref.Table)
	if err != nil {
		return err
	}
	p, err := partitionPlanFor(ref, cols, from, to)
	if err != nil {
		return fmt.Errorf("copy %s: %w", ref.Table, err)
	}
	if len(dstParts) == 2 {
		if _, err := t.tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+sqltext.QuoteIdent(dstParts[0])); err != nil {
			return fmt.Errorf("copy %s %s..%s into %s: %w", ref.Table, from, to, dst, err)
		}
	}
	_, err = t.tx.Exec(ctx, fmt.Sprintf("CREATE TABLE %s AS SELECT * FROM %s WHERE %s",
		sqltext.Postgres.QuoteName(dst), sqltext.Postgres.QuoteName(ref.Table), p.where), p.args...)
	if err != nil {
		return fmt.Errorf("copy %s %s..%s into %s: %w", ref.Table, from, to, dst, err)
	}
	return nil
}

// maxIdentifier is the longest identifier PostgreSQL keeps whole
// (NAMEDATALEN - 1).
const maxIdentifier = 63

// RestorePartition replaces a partition of t with the rows of src,
// matching columns by name: the table may have been rebuilt with its
// columns in another order since the snapshot was taken. A column of src
// that t no longer has is refused, since restoring without it would lose
// data; a column t has gained is left to its default.
func (t *tx) RestorePartition(ctx context.Context, ref refill.TableRef, src, partition string) (int64, error) {
	if err := t.usable(); err != nil {
		return 0, err
	}
	cols, err := columns(ctx, t.tx, ref.Table)
	if err != nil {
		return 0, err
	}
	srcCols, err := columns(ctx, t.tx, src)
	if err != nil {
		return 0, err
	}
	names := make([]string, len(srcCols))
	for i, c := range srcCols {
		if _, ok := sqltext.Postgres.MatchColumn(cols, c.Name); !ok {
			return 0, refill.BadInputf("restore %s %s from %s: the snapshot has a column %s that %s no longer has; restoring would lose it, so add the column back first", ref.Table, partition, src, c.Name, ref.Table)
		}
		names[i] = sqltext.QuoteIdent(c.Name)
	}
	p, err := partitionPlanFor(refill.TableRef{Table: src, Column: ref.Column, Grain: ref.Grain}, srcCols, partition, partition)
	if err != nil {
		return 0, fmt.Errorf("restore %s %s: %w", ref.Table, partition, err)
	}
	if _, err := deletePartition(ctx, t.tx, ref, cols, partition); err != nil {
		return 0, err
	}
	list := strings.Join(names, ", ")
	tag, err := t.tx.Exec(ctx, fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s WHERE %s",
		sqltext.Postgres.QuoteName(ref.Table), list, list, sqltext.Postgres.QuoteName(src), p.where), p.args...)
	if err != nil {
		return 0, fmt.Errorf("restore %s %s from %s: %w", ref.Table, partition, src, err)
	}
	return tag.RowsAffected(), nil
}

// DropTable drops table name, which may be schema-qualified, if it exists.
func (t *tx) DropTable(ctx context.Context, name string) error {
	if err := t.usable(); err != nil {
		return err
	}
	if _, err := t.tx.Exec(ctx, "DROP TABLE IF EXISTS "+sqltext.Postgres.QuoteName(name)); err != nil {
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
	tag, err := t.tx.Exec(ctx, `INSERT INTO refill_published (plan_id, dataset, partition) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, planID, dataset, partition)
	if err != nil {
		return false, fmt.Errorf("publish mark: %w", err)
	}
	return tag.RowsAffected() == 0, nil
}

// Anchor records the audit log's head in refill_audit_anchor, keyed by the
// state store it belongs to, with whether the log was keyed and its MAC.
// An anchor already there for the same entry is kept as it was.
func (t *tx) Anchor(ctx context.Context, a refill.AuditAnchor) error {
	if err := t.usable(); err != nil {
		return err
	}
	var mac *string
	if a.MAC != "" {
		mac = &a.MAC
	}
	if _, err := t.tx.Exec(ctx, `INSERT INTO refill_audit_anchor (store, seq, hash, keyed, mac) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`, a.Store, a.Seq, a.Hash, a.Keyed, mac); err != nil {
		return fmt.Errorf("audit anchor: %w", err)
	}
	return nil
}

var _ refill.Anchorer = (*Warehouse)(nil)

// LatestAnchor returns store's anchor with the highest sequence number; ok
// is false when refill_audit_anchor is missing or holds none of store's.
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

// anchors reads the anchors that the clause after FROM refill_audit_anchor
// selects. It only reads: a table from before anchors recorded keyed and
// mac reads them as unkeyed, without a MAC, until a publish upgrades it.
func (w *Warehouse) anchors(ctx context.Context, clause string, args ...any) ([]refill.AuditAnchor, error) {
	var exists, upgraded bool
	err := w.pool.QueryRow(ctx, `SELECT to_regclass('refill_audit_anchor') IS NOT NULL,
		EXISTS (SELECT FROM pg_attribute WHERE attrelid = to_regclass('refill_audit_anchor') AND attname = 'mac' AND NOT attisdropped)`).Scan(&exists, &upgraded)
	if err != nil {
		return nil, fmt.Errorf("audit anchor: %w", err)
	}
	if !exists {
		return nil, nil
	}
	cols := `store, seq, hash, NULL::boolean, NULL::text`
	if upgraded {
		cols = `store, seq, hash, keyed, mac`
	}
	rows, err := w.pool.Query(ctx, `SELECT `+cols+` FROM refill_audit_anchor `+clause, args...)
	if err != nil {
		return nil, fmt.Errorf("audit anchor: %w", err)
	}
	defer rows.Close()
	var out []refill.AuditAnchor
	for rows.Next() {
		var (
			a     refill.AuditAnchor
			keyed *bool
			mac   *string
		)
		if err := rows.Scan(&a.Store, &a.Seq, &a.Hash, &keyed, &mac); err != nil {
			return nil, fmt.Errorf("audit anchor: %w", err)
		}
		if keyed != nil {
			a.Keyed = *keyed
		}
		if mac != nil {
			a.MAC = *mac
		}
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
//
// Two sessions creating the same table at once can collide in
// PostgreSQL's catalog (a unique violation on pg_type, though IF NOT
// EXISTS): this process creates them one at a time, and a collision with
// another process is tried again, finding the table there.
func (w *Warehouse) createTables(ctx context.Context) error {
	if w.ownTables.Load() {
		return nil
	}
	w.creating.Lock()
	defer w.creating.Unlock()
	if w.ownTables.Load() {
		return nil
	}
	create := func(what, stmt string) error {
		for try := 0; ; try++ {
			_, err := w.pool.Exec(ctx, stmt)
			var pgErr *pgconn.PgError
			if err != nil && try < 3 && errors.As(err, &pgErr) && (pgErr.Code == "23505" || pgErr.Code == "42P07") {
				continue
			}
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			return nil
		}
	}
	if err := create("publish mark", `CREATE TABLE IF NOT EXISTS refill_published (
		plan_id text NOT NULL, dataset text NOT NULL, partition text NOT NULL, published_at timestamptz NOT NULL DEFAULT now(),
		PRIMARY KEY (plan_id, dataset, partition))`); err != nil {
		return err
	}
	if err := create("audit anchor", `CREATE TABLE IF NOT EXISTS refill_audit_anchor (
		store text NOT NULL, seq bigint NOT NULL, hash text NOT NULL, written_at timestamptz NOT NULL DEFAULT now(),
		keyed boolean, mac text,
		PRIMARY KEY (store, seq))`); err != nil {
		return err
	}
	// A table from before anchors recorded keyed and mac gains them; its
	// old rows keep NULL, read as unkeyed. The ALTER runs only then: its
	// lock would wait for every publish in flight.
	var upgraded bool
	if err := w.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_attribute WHERE attrelid = to_regclass('refill_audit_anchor') AND attname = 'mac' AND NOT attisdropped)`).Scan(&upgraded); err != nil {
		return fmt.Errorf("audit anchor: %w", err)
	}
	if !upgraded {
		if _, err := w.pool.Exec(ctx, `ALTER TABLE refill_audit_anchor ADD COLUMN IF NOT EXISTS keyed boolean, ADD COLUMN IF NOT EXISTS mac text`); err != nil {
			return fmt.Errorf("audit anchor: %w", err)
		}
	}
	w.ownTables.Store(true)
	return nil
}
