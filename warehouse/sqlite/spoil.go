package sqlite

import (
	"context"
	"fmt"
	"strings"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// Spoil makes one partition of ref stale on purpose, so that a proof can
// tell a job that rebuilds its partition from one that depends on what was
// there: it deletes the partition's second row, changes the values of its
// first, and adds a changed copy of the first. Rows are taken in rowid (or,
// without a rowid, primary key) order, so the same partition is spoiled the
// same way every time.
//
// Values change by what they hold: numbers +1, booleans negated, dates a day
// later, timestamps a second later, other text with '~' appended; NULLs and
// blobs stay. The partition column stays, so every row stays in the
// partition; primary key columns stay in the changed row, so it is still
// the same row, and change in the copy, so it is a new one. A step that a
// constraint refuses is skipped (inside a savepoint), and a change refused
// as a whole is tried one column at a time.
func (t *tx) Spoil(ctx context.Context, ref refill.TableRef, partition string) (what string, changed bool, err error) {
	if err := t.usable(); err != nil {
		return "", false, err
	}
	cols, err := columns(ctx, prepared{t}, ref.Table)
	if err != nil {
		return "", false, err
	}
	f, err := partitionFilter(ref, cols, partition, partition)
	if err != nil {
		return "", false, fmt.Errorf("spoil %s %s: %w", ref.Table, partition, err)
	}
	pc, err := partitionColumn(ref, cols)
	if err != nil {
		return "", false, fmt.Errorf("spoil %s %s: %w", ref.Table, partition, err)
	}
	id, err := t.rowIdentity(ctx, ref.Table, cols)
	if err != nil {
		return "", false, fmt.Errorf("spoil %s %s: %w", ref.Table, partition, err)
	}
	table := sqltext.SQLite.QuoteName(ref.Table)
	ids := strings.Join(id.exprs, ", ")
	rows, err := t.conn.QueryContext(ctx, fmt.Sprintf("SELECT %s FROM %s WHERE %s ORDER BY %s LIMIT 2", ids, table, f.where, ids), f.args...)
	if err != nil {
		return "", false, fmt.Errorf("spoil %s %s: %w", ref.Table, partition, err)
	}
	var keys [][]any
	for rows.Next() {
		k := make([]any, len(id.exprs))
		ptrs := make([]any, len(k))
		for i := range k {
			ptrs[i] = &k[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			rows.Close()
			return "", false, fmt.Errorf("spoil %s %s: %w", ref.Table, partition, err)
		}
		keys = append(keys, k)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", false, fmt.Errorf("spoil %s %s: %w", ref.Table, partition, err)
	}
	if len(keys) == 0 {
		return "the partition is empty", false, nil
	}
	match := make([]string, len(id.exprs))
	for i, e := range id.exprs {
		match[i] = fmt.Sprintf("%s IS ?%d", e, i+1)
	}
	where := strings.Join(match, " AND ")

	var did []string
	step := func(done, stmt string, args []any) (bool, error) {
		ok, err := t.spoilStep(ctx, stmt, args)
		if err != nil {
			return false, fmt.Errorf("spoil %s %s: %w", ref.Table, partition, err)
		}
		if ok {
			did = append(did, done)
		}
		return ok, nil
	}
	if len(keys) == 2 {
		if _, err := step("deleted 1 row", fmt.Sprintf("DELETE FROM %s WHERE %s", table, where), keys[1]); err != nil {
			return "", false, err
		}
	}

	var sets []string
	var into, copies []string
	for _, c := range cols {
		name := sqltext.QuoteIdent(c.Name)
		switch {
		case c.Name == pc.Name:
			into, copies = append(into, name), append(copies, name)
		case sqltext.SQLite.SameName(c.Name, id.auto):
			// A rowid alias: the copy gets a new one.
		case id.key[strings.ToLower(c.Name)]:
			into, copies = append(into, name), append(copies, changedValue(c))
		default:
			sets = append(sets, name+" = "+changedValue(c))
			into, copies = append(into, name), append(copies, changedValue(c))
		}
	}
	if len(sets) > 0 {
		update := func(set string) (bool, error) {
			ok, err := t.spoilStep(ctx, fmt.Sprintf("UPDATE %s SET %s WHERE %s", table, set, where), keys[0])
			if err != nil {
				return false, fmt.Errorf("spoil %s %s: %w", ref.Table, partition, err)
			}
			return ok, nil
		}
		ok, err := update(strings.Join(sets, ", "))
		if err != nil {
			return "", false, err
		}
		if !ok && len(sets) > 1 {
			// Refused as a whole (a unique column would collide): the
			// columns one at a time, so that what can change does.
			for _, set := range sets {
				one, err := update(set)
				if err != nil {
					return "", false, err
				}
				ok = ok || one
			}
		}
		if ok {
			did = append(did, "changed 1 row")
		}
	}
	if _, err := step("added 1 row", fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s WHERE %s",
		table, strings.Join(into, ", "), strings.Join(copies, ", "), table, where), keys[0]); err != nil {
		return "", false, err
	}
	if len(did) == 0 {
		return "nothing: the table's constraints refused every change", false, nil
	}
	return strings.Join(did, ", "), true, nil
}

// identity is how Spoil finds a row again.
type identity struct {
	// exprs select a row's identity: the rowid, or the primary key's
	// columns of a table without one.
	exprs []string
	// key holds the primary key's columns, lower-cased.
	key map[string]bool
	// auto names an INTEGER PRIMARY KEY, which is the rowid itself.
	auto string
}

// rowIdentity returns how to find one row of table again.
func (t *tx) rowIdentity(ctx context.Context, table string, cols []refill.Column) (identity, error) {
	schema, name := splitTable(table)
	qualified := schema != ""
	id := identity{key: map[string]bool{}}
	q, args := "SELECT name, lower(type) FROM pragma_table_info(?1) WHERE pk > 0 ORDER BY pk", []any{name}
	if qualified {
		q, args = "SELECT name, lower(type) FROM pragma_table_info(?1, ?2) WHERE pk > 0 ORDER BY pk", []any{name, schema}
	}
	rows, err := t.conn.QueryContext(ctx, q, args...)
	if err != nil {
		return id, err
	}
	var pk []refill.Column
	for rows.Next() {
		var c refill.Column
		if err := rows.Scan(&c.Name, &c.Type); err != nil {
			rows.Close()
			return id, err
		}
		pk = append(pk, c)
		id.key[strings.ToLower(c.Name)] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return id, err
	}
	var withoutRowid bool
	if err := t.conn.QueryRowContext(ctx, "SELECT coalesce(max(wr), 0) FROM pragma_table_list WHERE name = ?1 AND (?2 = '' OR schema = ?2)", name, schema).Scan(&withoutRowid); err != nil {
		return id, err
	}
	if withoutRowid {
		for _, c := range pk {
			id.exprs = append(id.exprs, sqltext.QuoteIdent(c.Name))
		}
		return id, nil
	}
	if len(pk) == 1 && pk[0].Type == "integer" {
		id.auto = pk[0].Name
	}
	for _, alias := range []string{"rowid", "_rowid_", "oid"} {
		if _, taken := sqltext.SQLite.MatchColumn(cols, alias); !taken {
			id.exprs = []string{alias}
			return id, nil
		}
	}
	return id, fmt.Errorf("its columns hide all three names of the rowid")
}

// changedValue is the SQL for column c's value changed, by what the value
// holds, and for text by what the column is declared to hold.
func changedValue(c refill.Column) string {
	col := sqltext.QuoteIdent(c.Name)
	text := col + " || '~'"
	switch {
	case c.Type == "date":
		text = fmt.Sprintf("coalesce(date(%s, '+1 day'), %s)", col, text)
	case strings.Contains(c.Type, "time") || strings.Contains(c.Type, "date"):
		text = fmt.Sprintf("coalesce(datetime(%s, '+1 second'), %s)", col, text)
	}
	number := col + " + 1"
	if strings.Contains(c.Type, "bool") {
		number = "NOT " + col
	}
	return fmt.Sprintf("CASE typeof(%[1]s) WHEN 'integer' THEN %[2]s WHEN 'real' THEN %[2]s WHEN 'text' THEN %[3]s ELSE %[1]s END", col, number, text)
}

// spoilStep runs one of Spoil's statements inside a savepoint, and reports
// whether it changed a row. A constraint's refusal is rolled back to the
// savepoint and is not an error.
func (t *tx) spoilStep(ctx context.Context, stmt string, args []any) (bool, error) {
	if _, err := t.conn.ExecContext(ctx, "SAVEPOINT refill_spoil"); err != nil {
		return false, err
	}
	res, err := t.conn.ExecContext(ctx, stmt, args...)
	if err != nil {
		if _, rerr := t.conn.ExecContext(ctx, "ROLLBACK TO refill_spoil; RELEASE refill_spoil"); rerr != nil || t.ended {
			// A conflict clause (ON CONFLICT ROLLBACK) ended the whole
			// transaction: nothing can go on in it.
			return false, errEnded
		}
		if code(err) == sqlite3.SQLITE_CONSTRAINT {
			return false, nil
		}
		return false, err
	}
	if _, err := t.conn.ExecContext(ctx, "RELEASE refill_spoil"); err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}
