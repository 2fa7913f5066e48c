package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// grouped runs the profile's grouped queries over one range: one for every
// drift column's value shape, one for duplicate keys. Each is one
// statement for the whole range, never one per partition, and its result
// is streamed: what refill holds is per partition, never per row or per
// value. The grouping itself is SQLite's (sorted in its own temporary
// store), exact, as a careful analyst's GROUP BY would be.
type grouped struct {
	db       querier
	table    string
	key      string // the partition key expression
	where    string // the range's raw bounds, ?1 and ?2
	lo, hi   string
	from, to string // the keys in range
}

// values fills Values for cols: per partition and column the non-NULL
// count, the distinct count and the count of the most frequent value, from
// one statement whose branches (one per column) count each value.
func (g grouped) values(ctx context.Context, all []refill.Column, cols []string, out map[string]refill.Profile) error {
	if len(cols) == 0 {
		return nil
	}
	branches := make([]string, len(cols))
	for i, name := range cols {
		c, err := checkColumn(g.table, all, name, "drift", false)
		if err != nil {
			return err
		}
		q := sqltext.QuoteIdent(c.Name)
		branches[i] = fmt.Sprintf("SELECT %s AS k, %d AS i, count(*) AS n FROM %s WHERE %s AND %s IS NOT NULL GROUP BY 1, %s",
			g.key, i, sqltext.SQLite.QuoteName(g.table), g.where, q, q)
	}
	q := "SELECT k, i, count(*), max(n), sum(n) FROM (" + strings.Join(branches, " UNION ALL ") + ") GROUP BY k, i"
	rows, err := g.db.QueryContext(ctx, q, g.lo, g.hi)
	if err != nil {
		return fmt.Errorf("value profile of %s: %w", g.table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var k sql.NullString
		var i int
		var v refill.ValueProfile
		if err := rows.Scan(&k, &i, &v.Distinct, &v.Top, &v.NonNull); err != nil {
			return fmt.Errorf("value profile of %s: %w", g.table, err)
		}
		pr, ok := out[k.String]
		if !k.Valid || k.String < g.from || k.String > g.to || !ok || i < 0 || i >= len(cols) {
			continue
		}
		if pr.Values == nil {
			pr.Values = make(map[string]refill.ValueProfile, len(cols))
			out[k.String] = pr
		}
		pr.Values[cols[i]] = v
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("value profile of %s: %w", g.table, err)
	}
	return nil
}

// duplicates fills Duplicates for the key cols: one grouped statement that
// returns only the keys more than one row shares, the most shared first in
// each partition, so the first is the example. Rows with a NULL in the key
// are left to not_null.
func (g grouped) duplicates(ctx context.Context, all []refill.Column, cols []string, out map[string]refill.Profile) error {
	if len(cols) == 0 {
		return nil
	}
	var sel, group, notNull []string
	for _, name := range cols {
		c, err := checkColumn(g.table, all, name, "unique", false)
		if err != nil {
			return err
		}
		q := sqltext.QuoteIdent(c.Name)
		sel = append(sel, "CAST("+q+" AS TEXT)")
		group = append(group, q)
		notNull = append(notNull, q+" IS NOT NULL")
	}
	q := fmt.Sprintf("SELECT %s, count(*), %s FROM %s WHERE %s AND %s GROUP BY 1, %s HAVING count(*) > 1 ORDER BY 1, 2 DESC, %s",
		g.key, strings.Join(sel, ", "), sqltext.SQLite.QuoteName(g.table), g.where, strings.Join(notNull, " AND "),
		strings.Join(group, ", "), strings.Join(group, ", "))
	rows, err := g.db.QueryContext(ctx, q, g.lo, g.hi)
	if err != nil {
		return fmt.Errorf("duplicate keys of %s: %w", g.table, err)
	}
	defer rows.Close()
	var k sql.NullString
	var n int64
	vals := make([]sql.NullString, len(cols))
	dest := []any{&k, &n}
	for i := range vals {
		dest = append(dest, &vals[i])
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("duplicate keys of %s: %w", g.table, err)
		}
		pr, ok := out[k.String]
		if !k.Valid || k.String < g.from || k.String > g.to || !ok {
			continue
		}
		addDuplicate(&pr, n, vals)
		out[k.String] = pr
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("duplicate keys of %s: %w", g.table, err)
	}
	return nil
}

// addDuplicate counts one key that n rows share.
func addDuplicate(pr *refill.Profile, n int64, vals []sql.NullString) {
	d := pr.Duplicates
	if d == nil {
		d = &refill.Duplicates{}
		pr.Duplicates = d
	}
	d.Keys++
	d.Rows += n
	if n > d.Max {
		d.Max = n
		d.Example = make([]string, len(vals))
		for i, v := range vals {
			d.Example[i] = v.String
		}
	}
}
