package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// Spoil makes one partition of ref stale on purpose, so that a proof can
// tell a job that rebuilds its partition from one that depends on what was
// there: it deletes the partition's second row, changes the values of its
// first, and adds a changed copy of the first. Rows are taken in physical
// order (tableoid, ctid), so the same partition is spoiled the same way
// every time.
//
// Values change by type: numbers +1, booleans negated, dates a day later,
// timestamps and times a second later, text with '~' appended; NULLs and
// other types stay. The partition column stays, so every row stays in the
// partition; primary key columns stay in the changed row, so it is still
// the same row, and change in the copy, so it is a new one; identity,
// serial and generated columns are left to the table. A step that a
// constraint or a value's range refuses is skipped (inside a savepoint), and
// a change refused as a whole is tried one column at a time.
func (t *tx) Spoil(ctx context.Context, ref refill.TableRef, partition string) (what string, changed bool, err error) {
	if err := t.usable(); err != nil {
		return "", false, err
	}
	fail := func(err error) (string, bool, error) {
		return "", false, fmt.Errorf("spoil %s %s: %w", ref.Table, partition, err)
	}
	cols, err := columns(ctx, t.tx, ref.Table)
	if err != nil {
		return "", false, err
	}
	p, err := partitionPlanFor(ref, cols, partition, partition)
	if err != nil {
		return fail(err)
	}
	pc, err := partitionColumn(ref, cols)
	if err != nil {
		return fail(err)
	}
	kinds, err := columnKinds(ctx, t.tx, ref.Table)
	if err != nil {
		return fail(err)
	}
	table := sqltext.Postgres.QuoteName(ref.Table)
	type rowID struct {
		table uint32
		ctid  string
	}
	rows, err := t.tx.Query(ctx, fmt.Sprintf("SELECT tableoid::oid, ctid::text FROM %s WHERE %s ORDER BY tableoid, ctid LIMIT 2", table, p.where), p.args...)
	if err != nil {
		return fail(err)
	}
	ids, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (rowID, error) {
		var id rowID
		err := r.Scan(&id.table, &id.ctid)
		return id, err
	})
	if err != nil {
		return fail(err)
	}
	if len(ids) == 0 {
		return "the partition is empty", false, nil
	}
	const where = "tableoid = $1 AND ctid = $2::tid"

	var did []string
	if len(ids) == 2 {
		ctid, err := t.spoilStep(ctx, fmt.Sprintf("DELETE FROM %s WHERE %s RETURNING ctid::text", table, where), ids[1].table, ids[1].ctid)
		if err != nil {
			return fail(err)
		}
		if ctid != "" {
			did = append(did, "deleted 1 row")
		}
	}

	var sets, into, copies []string
	for _, c := range cols {
		name := sqltext.QuoteIdent(c.Name)
		k := kinds[c.Name]
		switch {
		case c.Name == pc.Name:
			into, copies = append(into, name), append(copies, name)
		case k.auto:
			// Left to the table: an identity, serial or generated column.
		case k.key:
			into, copies = append(into, name), append(copies, changedValue(c))
		default:
			v := changedValue(c)
			if v != name {
				sets = append(sets, name+" = "+v)
			}
			into, copies = append(into, name), append(copies, v)
		}
	}
	first := ids[0]
	if len(sets) > 0 {
		update := func(set string) (bool, error) {
			ctid, err := t.spoilStep(ctx, fmt.Sprintf("UPDATE %s SET %s WHERE %s RETURNING ctid::text", table, set, where), first.table, first.ctid)
			if err != nil || ctid == "" {
				return false, err
			}
			first.ctid = ctid // the updated row is a new tuple
			return true, nil
		}
		ok, err := update(strings.Join(sets, ", "))
		if err != nil {
			return fail(err)
		}
		if !ok && len(sets) > 1 {
			// Refused as a whole (a unique column would collide): the
			// columns one at a time, so that what can change does.
			for _, set := range sets {
				one, err := update(set)
				if err != nil {
					return fail(err)
				}
				ok = ok || one
			}
		}
		if ok {
			did = append(did, "changed 1 row")
		}
	}
	if len(into) > 0 {
		ctid, err := t.spoilStep(ctx, fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s WHERE %s RETURNING ctid::text",
			table, strings.Join(into, ", "), strings.Join(copies, ", "), table, where), first.table, first.ctid)
		if err != nil {
			return fail(err)
		}
		if ctid != "" {
			did = append(did, "added 1 row")
		}
	}
	if len(did) == 0 {
		return "nothing: the table's constraints refused every change", false, nil
	}
	return strings.Join(did, ", "), true, nil
}

// columnKind is what Spoil needs to know of a column beyond its type.
type columnKind struct {
	// key: part of the primary key.
	key bool
	// auto: an identity, serial or generated column, which the table
	// fills itself.
	auto bool
}

// columnKinds returns the kinds of table's columns, by name.
func columnKinds(ctx context.Context, db querier, table string) (map[string]columnKind, error) {
	rows, err := db.Query(ctx, `SELECT a.attname,
	coalesce(a.attnum = ANY (i.indkey), false),
	a.attidentity <> '' OR a.attgenerated <> '' OR coalesce(pg_get_expr(d.adbin, d.adrelid) LIKE 'nextval(%', false)
FROM pg_catalog.pg_attribute a
LEFT JOIN pg_catalog.pg_index i ON i.indrelid = a.attrelid AND i.indisprimary
LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`, sqltext.Postgres.QuoteName(table))
	if err != nil {
		return nil, err
	}
	kinds := map[string]columnKind{}
	var name string
	var k columnKind
	_, err = pgx.ForEachRow(rows, []any{&name, &k.key, &k.auto}, func() error {
		kinds[name] = k
		return nil
	})
	return kinds, err
}

// changedValue is the SQL for column c's value changed by its type, or the
// column itself when its type has no change Spoil makes.
func changedValue(c refill.Column) string {
	col := sqltext.QuoteIdent(c.Name)
	typ := c.Type
	switch {
	case typ == "smallint" || typ == "integer" || typ == "bigint" || typ == "real" || typ == "double precision" || strings.HasPrefix(typ, "numeric"):
		return col + " + 1"
	case typ == "boolean":
		return "NOT " + col
	case typ == "date":
		return col + " + 1"
	case strings.HasPrefix(typ, "timestamp") || strings.HasPrefix(typ, "time"):
		return col + " + interval '1 second'"
	case textType(typ):
		return col + " || '~'"
	}
	return col
}

// spoilStep runs one of Spoil's statements, which returns the ctid of the
// row it wrote, inside a savepoint. A row refused by a constraint (class
// 23) or a value out of its type's range (class 22) is rolled back to the
// savepoint and is not an error; ctid is then "".
func (t *tx) spoilStep(ctx context.Context, stmt string, args ...any) (ctid string, err error) {
	sp, err := t.tx.Begin(ctx)
	if err != nil {
		return "", err
	}
	err = sp.QueryRow(ctx, stmt, args...).Scan(&ctid)
	if err == nil {
		return ctid, sp.Commit(ctx)
	}
	if rerr := sp.Rollback(ctx); rerr != nil {
		return "", errors.Join(err, rerr)
	}
	var pg *pgconn.PgError
	if errors.Is(err, pgx.ErrNoRows) || errors.As(err, &pg) && (strings.HasPrefix(pg.Code, "23") || strings.HasPrefix(pg.Code, "22")) {
		return "", nil
	}
	return "", err
}
