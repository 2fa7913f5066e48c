package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// values fills Values for cols from one statement for the whole range: a
// GROUPING SETS query counts each (partition, value) of every column in one
// scan, and an outer grouping turns those counts into each column's
// non-NULL, distinct and most-frequent counts per partition. Results are
// streamed; refill holds one entry per partition and column.
func values(ctx context.Context, tx pgx.Tx, table string, all []refill.Column, p partitionPlan, cols []string, out map[string]refill.Profile) error {
	if len(cols) == 0 {
		return nil
	}
	var sets, which, nonNull []string
	for i, name := range cols {
		c, err := checkColumn(table, all, name, "drift", false)
		if err != nil {
			return err
		}
		q := sqltext.QuoteIdent(c.Name)
		sets = append(sets, "("+p.group+", "+q+")")
		which = append(which, fmt.Sprintf("WHEN GROUPING(%s) = 0 THEN %d", q, i))
		nonNull = append(nonNull, fmt.Sprintf("WHEN GROUPING(%s) = 0 THEN count(%s)", q, q))
	}
	inner := fmt.Sprintf("SELECT %s AS refill_p, CASE %s END AS refill_i, CASE %s END AS refill_n FROM %s WHERE %s GROUP BY GROUPING SETS (%s)",
		p.group, strings.Join(which, " "), strings.Join(nonNull, " "), sqltext.Postgres.QuoteName(table), p.where, strings.Join(sets, ", "))
	q := fmt.Sprintf("SELECT %s, refill_i, count(*) FILTER (WHERE refill_n > 0), coalesce(max(refill_n), 0), coalesce(sum(refill_n), 0)::bigint FROM (%s) s GROUP BY refill_p, refill_i",
		fmt.Sprintf(p.render, "refill_p"), inner)
	rows, err := tx.Query(ctx, q, p.args...)
	if err != nil {
		return fmt.Errorf("value profile of %s: %w", table, err)
	}
	var k string
	var i int
	var v refill.ValueProfile
	_, err = pgx.ForEachRow(rows, []any{&k, &i, &v.Distinct, &v.Top, &v.NonNull}, func() error {
		pr, ok := out[k]
		if !ok || i < 0 || i >= len(cols) || v.NonNull == 0 {
			return nil // an all-NULL column has no shape, as in SQLite
		}
		if pr.Values == nil {
			pr.Values = make(map[string]refill.ValueProfile, len(cols))
			out[k] = pr
		}
		pr.Values[cols[i]] = v
		return nil
	})
	if err != nil {
		return fmt.Errorf("value profile of %s: %w", table, err)
	}
	return nil
}

// duplicates fills Duplicates for the key cols: one grouped statement that
// returns only the keys more than one row shares, the most shared first in
// each partition, so the first is the example. Rows with a NULL in the key
// are left to not_null.
func duplicates(ctx context.Context, tx pgx.Tx, table string, all []refill.Column, p partitionPlan, cols []string, out map[string]refill.Profile) error {
	if len(cols) == 0 {
		return nil
	}
	var sel, group, notNull []string
	for _, name := range cols {
		c, err := checkColumn(table, all, name, "unique", false)
		if err != nil {
			return err
		}
		q := sqltext.QuoteIdent(c.Name)
		sel = append(sel, q+"::text")
		group = append(group, q)
		notNull = append(notNull, q+" IS NOT NULL")
	}
	q := fmt.Sprintf("SELECT %s, count(*), %s FROM %s WHERE %s AND %s GROUP BY %s, %s HAVING count(*) > 1 ORDER BY %s, 2 DESC, %s",
		fmt.Sprintf(p.render, p.group), strings.Join(sel, ", "), sqltext.Postgres.QuoteName(table), p.where, strings.Join(notNull, " AND "),
		p.group, strings.Join(group, ", "), p.group, strings.Join(group, ", "))
	rows, err := tx.Query(ctx, q, p.args...)
	if err != nil {
		return fmt.Errorf("duplicate keys of %s: %w", table, err)
	}
	var k string
	var n int64
	vals := make([]string, len(cols))
	dest := []any{&k, &n}
	for i := range vals {
		dest = append(dest, &vals[i])
	}
	_, err = pgx.ForEachRow(rows, dest, func() error {
		pr, ok := out[k]
		if !ok {
			return nil
		}
		d := pr.Duplicates
		if d == nil {
			d = &refill.Duplicates{}
			pr.Duplicates = d
			out[k] = pr
		}
		d.Keys++
		d.Rows += n
		if n > d.Max {
			d.Max = n
			d.Example = append([]string(nil), vals...)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("duplicate keys of %s: %w", table, err)
	}
	return nil
}
