package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// values fills Values for cols from one statement for the whole range:
// one branch per column counts each (partition, value) of that column, and
// an outer grouping turns those counts into each column's non-NULL,
// distinct and most-frequent counts per partition. The branches are a
// UNION ALL, which PostgreSQL runs as a Parallel Append, each branch
// grouped on its own; a single GROUPING SETS scan was measured slower (it
// sorts the whole range once per column in one process). Results are
// streamed; refill holds one entry per partition and column.
func values(ctx context.Context, tx pgx.Tx, table string, all []refill.Column, p partitionPlan, cols []string, out map[string]refill.Profile) error {
	if len(cols) == 0 {
		return nil
	}
	branches := make([]string, len(cols))
	for i, name := range cols {
		c, err := checkColumn(table, all, name, "drift", false)
		if err != nil {
			return err
		}
		q := sqltext.QuoteIdent(c.Name)
		branches[i] = fmt.Sprintf("SELECT %s AS refill_p, %d AS refill_i, count(*) AS refill_n FROM %s WHERE %s AND %s IS NOT NULL GROUP BY %s, %s",
			p.group, i, sqltext.Postgres.QuoteName(table), p.where, q, p.group, q)
	}
	q := fmt.Sprintf("SELECT %s, refill_i, count(*), max(refill_n), sum(refill_n)::bigint FROM (%s) s GROUP BY refill_p, refill_i",
		fmt.Sprintf(p.render, "refill_p"), strings.Join(branches, " UNION ALL "))
	rows, err := tx.Query(ctx, q, p.args...)
	if err != nil {
		return fmt.Errorf("value profile of %s: %w", table, err)
	}
	var k string
	var i int
	var v refill.ValueProfile
	_, err = pgx.ForEachRow(rows, []any{&k, &i, &v.Distinct, &v.Top, &v.NonNull}, func() error {
		pr, ok := out[k]
		if !ok || i < 0 || i >= len(cols) {
			return nil
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
