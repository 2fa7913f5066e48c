//go:build duckdb

package duckdb

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// Spoil makes one partition of ref stale on purpose, so that a proof can
// tell a job that rebuilds its partition from one that depends on what was
// there: it deletes the partition's second row, changes the values of its
// first, and adds a changed copy of the first. Rows are taken in row id
// order, so the same partition is spoiled the same way every time.
//
// Values change by type: numbers by one (down when positive, so nothing
// overflows), booleans negated, dates a day later, timestamps and times a
// second later, text with '~' appended; NULLs and other types stay. The
// partition column stays; primary key columns stay in the changed row and
// change in the copy; columns a CHECK or FOREIGN KEY constraint names stay
// everywhere. DuckDB has no savepoints and ends a transaction at its first
// failed statement, so a change that a unique or primary key would refuse
// is found first and skipped, and a change refused as a whole is tried one
// column at a time.
func (t *tx) Spoil(ctx context.Context, ref refill.TableRef, partition string) (what string, changed bool, err error) {
	if err := t.usable(); err != nil {
		return "", false, err
	}
	defer func() { t.fail(err) }()
	fail := func(err error) (string, bool, error) {
		return "", false, fmt.Errorf("spoil %s %s: %w", ref.Table, partition, err)
	}
	cols, err := columns(ctx, t.conn, ref.Table)
	if err != nil {
		return "", false, err
	}
	f, err := partitionFilter(ref, cols, partition, partition)
	if err != nil {
		return fail(err)
	}
	pc, err := partitionColumn(ref, cols)
	if err != nil {
		return fail(err)
	}
	cons, err := constraints(ctx, t.conn, ref.Table)
	if err != nil {
		return fail(err)
	}
	table := d.QuoteName(ref.Table)
	rows, err := t.conn.QueryContext(ctx, fmt.Sprintf("SELECT rowid FROM %s WHERE %s ORDER BY rowid LIMIT 2", table, f.where), f.args...)
	if err != nil {
		return fail(err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fail(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	if len(ids) == 0 {
		return "the partition is empty", false, nil
	}
	var did []string
	if len(ids) == 2 {
		if _, err := t.conn.ExecContext(ctx, fmt.Sprintf("DELETE FROM %s WHERE rowid = $1", table), ids[1]); err != nil {
			return fail(err)
		}
		did = append(did, "deleted 1 row")
	}

	// changes: column -> its changed value, for the row and for the copy.
	rowChange, copyChange := map[string]string{}, map[string]string{}
	var order []string
	for _, c := range cols {
		v := changedValue(c)
		if c.Name == pc.Name || v == sqltext.QuoteIdent(c.Name) || cons.fixed[strings.ToLower(c.Name)] {
			continue
		}
		order = append(order, c.Name)
		copyChange[c.Name] = v
		if !cons.key[strings.ToLower(c.Name)] {
			rowChange[c.Name] = v
		}
	}
	first := ids[0]
	var sets []string
	for _, name := range order {
		if _, ok := rowChange[name]; ok {
			sets = append(sets, name)
		}
	}
	if len(sets) > 0 {
		update := func(names []string) (bool, error) {
			change := map[string]string{}
			for _, n := range names {
				change[n] = rowChange[n]
			}
			clash, err := cons.collides(ctx, t.conn, table, change, first, true)
			if err != nil || clash {
				return false, err
			}
			set := make([]string, len(names))
			for i, n := range names {
				set[i] = sqltext.QuoteIdent(n) + " = " + change[n]
			}
			res, err := t.conn.ExecContext(ctx, fmt.Sprintf("UPDATE %s SET %s WHERE rowid = $1", table, strings.Join(set, ", ")), first)
			if err != nil {
				return false, err
			}
			n, err := res.RowsAffected()
			return n > 0, err
		}
		ok, err := update(sets)
		if err != nil {
			return fail(err)
		}
		if !ok && len(sets) > 1 {
			for _, s := range sets {
				one, err := update([]string{s})
				if err != nil {
					return fail(err)
				}
				ok = ok || one
			}
		}
		if ok {
			did = append(did, "changed 1 row")
			// An update of an indexed column deletes the row and inserts
			// it anew, under the transaction's next (highest) row id.
			var still int64
			if err := t.conn.QueryRowContext(ctx, fmt.Sprintf("SELECT count(*) FROM %s WHERE rowid = $1", table), first).Scan(&still); err != nil {
				return fail(err)
			}
			if still == 0 {
				if err := t.conn.QueryRowContext(ctx, fmt.Sprintf("SELECT max(rowid) FROM %s WHERE %s", table, f.where), f.args...).Scan(&first); err != nil {
					return fail(err)
				}
			}
		}
	}
	// The copy is of the first row as it is now (changed or not).
	id := first
	{
		clash, err := cons.collides(ctx, t.conn, table, copyChange, id, false)
		if err != nil {
			return fail(err)
		}
		if !clash {
			into := make([]string, 0, len(cols))
			vals := make([]string, 0, len(cols))
			for _, c := range cols {
				into = append(into, sqltext.QuoteIdent(c.Name))
				if v, ok := copyChange[c.Name]; ok {
					vals = append(vals, v)
				} else {
					vals = append(vals, sqltext.QuoteIdent(c.Name))
				}
			}
			if _, err := t.conn.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s WHERE rowid = $1",
				table, strings.Join(into, ", "), strings.Join(vals, ", "), table), id); err != nil {
				return fail(err)
			}
			did = append(did, "added 1 row")
		}
	}
	if len(did) == 0 {
		return "nothing: the table's constraints refused every change", false, nil
	}
	return strings.Join(did, ", "), true, nil
}

// tableConstraints is what Spoil must respect of a table's constraints.
type tableConstraints struct {
	// unique are the column sets of its primary key and unique
	// constraints; key the primary key's columns; fixed the columns a
	// CHECK or FOREIGN KEY constraint names (lower-cased).
	unique     [][]string
	key, fixed map[string]bool
}

func constraints(ctx context.Context, db querier, table string) (tableConstraints, error) {
	c := tableConstraints{key: map[string]bool{}, fixed: map[string]bool{}}
	where, args := tableWhere(table)
	rows, err := db.QueryContext(ctx, "SELECT constraint_type, constraint_column_names FROM duckdb_constraints() WHERE "+where, args...)
	if err != nil {
		return c, err
	}
	defer rows.Close()
	for rows.Next() {
		var kind string
		var names []any
		if err := rows.Scan(&kind, &names); err != nil {
			return c, err
		}
		var set []string
		for _, n := range names {
			if s, ok := n.(string); ok {
				set = append(set, s)
			}
		}
		switch kind {
		case "PRIMARY KEY":
			for _, n := range set {
				c.key[strings.ToLower(n)] = true
			}
			c.unique = append(c.unique, set)
		case "UNIQUE":
			c.unique = append(c.unique, set)
		case "CHECK", "FOREIGN KEY":
			for _, n := range set {
				c.fixed[strings.ToLower(n)] = true
			}
		}
	}
	return c, rows.Err()
}

// collides reports whether the row id, with change applied, would share a
// unique key with another row (other rows only when replace: the row
// itself is being changed; every row, itself included, for a copy).
func (c tableConstraints) collides(ctx context.Context, db querier, table string, change map[string]string, id int64, replace bool) (bool, error) {
	for _, set := range c.unique {
		touched := slices.ContainsFunc(set, func(n string) bool { _, ok := change[n]; return ok })
		if replace && !touched {
			continue
		}
		var conds []string
		for _, n := range set {
			v := "n." + sqltext.QuoteIdent(n)
			if e, ok := change[n]; ok {
				v = strings.ReplaceAll(e, sqltext.QuoteIdent(n), "n."+sqltext.QuoteIdent(n))
			}
			conds = append(conds, fmt.Sprintf("o.%s = %s", sqltext.QuoteIdent(n), v))
		}
		other := ""
		if replace {
			other = " AND o.rowid <> n.rowid"
		}
		var k int64
		q := fmt.Sprintf("SELECT count(*) FROM %[1]s AS o, (SELECT rowid, * FROM %[1]s WHERE rowid = $1) AS n WHERE %[2]s%[3]s", table, strings.Join(conds, " AND "), other)
		if err := db.QueryRowContext(ctx, q, id).Scan(&k); err != nil {
			return false, err
		}
		if k > 0 {
			return true, nil
		}
	}
	return false, nil
}

// changedValue is the SQL for column c's value changed by its type, or the
// column itself when its type has no change Spoil makes.
func changedValue(c refill.Column) string {
	col := sqltext.QuoteIdent(c.Name)
	typ := c.Type
	switch {
	case numericType(typ):
		return fmt.Sprintf("CASE WHEN %[1]s > 0 THEN %[1]s - 1 ELSE %[1]s + 1 END", col)
	case typ == "boolean":
		return "NOT " + col
	case typ == "date":
		return col + " + 1"
	case strings.HasPrefix(typ, "timestamp") || strings.HasPrefix(typ, "time"):
		return col + " + INTERVAL 1 SECOND"
	case textType(typ):
		return col + " || '~'"
	}
	return col
}
