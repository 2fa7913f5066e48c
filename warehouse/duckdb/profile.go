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

var _ refill.Profiler = (*Warehouse)(nil)

// Profile measures partitions [from, to] of t in one grouped statement,
// so one scan: count(*) per partition, count(*) - count(c) for each
// not-null column, and FILTERed counts for the time checks, accepted
// values and numeric drift. Time checks compare as TIMESTAMPTZ (dates,
// timestamps without a zone and text without an offset are UTC); a text
// value that is not a timestamp fails the profile, with DuckDB's message
// naming it. NULLs count as neither inversions nor future times. Value
// shapes and duplicate keys take one grouped statement each for the range.
func (w *Warehouse) Profile(ctx context.Context, t refill.TableRef, spec refill.ProfileSpec, from, to string) (map[string]refill.Profile, error) {
	db, done, err := w.inst.use()
	if err != nil {
		return nil, err
	}
	defer done()
	return profile(ctx, db, t, spec, from, to)
}

func profile(ctx context.Context, db querier, t refill.TableRef, spec refill.ProfileSpec, from, to string) (map[string]refill.Profile, error) {
	cols, err := columns(ctx, db, t.Table)
	if err != nil {
		return nil, err
	}
	f, err := partitionFilter(t, cols, from, to)
	if err != nil {
		return nil, err
	}
	args := append([]any(nil), f.args...)
	var sel strings.Builder
	fmt.Fprintf(&sel, "SELECT %s AS refill_p, count(*)", f.render(f.group))
	for _, name := range spec.NotNull {
		c, err := checkColumn(t.Table, cols, name, "not_null", false)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&sel, ", count(*) - count(%s)", sqltext.QuoteIdent(c.Name))
	}
	timeExpr := func(name, check string) (string, error) {
		c, err := checkColumn(t.Table, cols, name, check, true)
		if err != nil {
			return "", err
		}
		return "CAST(" + sqltext.QuoteIdent(c.Name) + " AS TIMESTAMPTZ)", nil
	}
	for _, to := range spec.TimeOrder {
		e, err := timeExpr(to.Earlier, "time_order")
		if err != nil {
			return nil, err
		}
		l, err := timeExpr(to.Later, "time_order")
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&sel, ", count(*) FILTER (WHERE %s > %s)", e, l)
	}
	if len(spec.NoFuture) > 0 {
		args = append(args, spec.Now.UTC().Format("2006-01-02 15:04:05.999999+00"))
	}
	for _, name := range spec.NoFuture {
		e, err := timeExpr(name, "no_future")
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&sel, ", count(*) FILTER (WHERE %s > CAST($%d AS TIMESTAMPTZ))", e, len(args))
	}
	for _, a := range spec.Accepted {
		c, err := checkColumn(t.Table, cols, a.Column, "accepted_values", false)
		if err != nil {
			return nil, err
		}
		marks := make([]string, len(a.Values))
		for i, v := range a.Values {
			args = append(args, v)
			marks[i] = fmt.Sprintf("$%d", len(args))
		}
		// Compared as text, as the config writes the values; NULLs are
		// neither accepted nor outside.
		q := sqltext.QuoteIdent(c.Name)
		fmt.Fprintf(&sel, ", count(%[1]s), count(*) FILTER (WHERE CAST(%[1]s AS VARCHAR) NOT IN (%[2]s))", q, strings.Join(marks, ", "))
	}
	var numeric []string
	for _, name := range spec.Drift {
		c, err := checkColumn(t.Table, cols, name, "drift", false)
		if err != nil {
			return nil, err
		}
		if numericType(c.Type) {
			numeric = append(numeric, name)
			q := sqltext.QuoteIdent(c.Name)
			fmt.Fprintf(&sel, ", count(%[1]s), count(*) FILTER (WHERE %[1]s = 0), coalesce(avg(CAST(%[1]s AS DOUBLE)), 0)", q)
		}
	}
	fmt.Fprintf(&sel, " FROM %s WHERE %s GROUP BY %s", d.QuoteName(t.Table), f.where, f.group)
	rows, err := db.QueryContext(ctx, sel.String(), args...)
	if err != nil {
		return nil, profileError(t.Table, err)
	}
	defer rows.Close()
	n := 1 + len(spec.NotNull) + len(spec.TimeOrder) + len(spec.NoFuture) + 2*len(spec.Accepted)
	profiles := map[string]refill.Profile{}
	for rows.Next() {
		var key string
		counts := make([]int64, n)
		means := make([]float64, len(numeric))
		ncounts := make([]int64, 2*len(numeric))
		dest := []any{&key}
		for i := range counts {
			dest = append(dest, &counts[i])
		}
		for j := range numeric {
			dest = append(dest, &ncounts[2*j], &ncounts[2*j+1], &means[j])
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, profileError(t.Table, err)
		}
		pr := refill.Profile{
			Rows:       counts[0],
			Nulls:      make(map[string]int64, len(spec.NotNull)),
			Inversions: make([]int64, len(spec.TimeOrder)),
			Future:     make(map[string]int64, len(spec.NoFuture)),
		}
		i := 1
		for _, name := range spec.NotNull {
			pr.Nulls[name] = counts[i]
			i++
		}
		for j := range spec.TimeOrder {
			pr.Inversions[j] = counts[i]
			i++
		}
		for _, name := range spec.NoFuture {
			pr.Future[name] = counts[i]
			i++
		}
		if len(spec.Accepted) > 0 {
			pr.Accepted = make(map[string]refill.AcceptedProfile, len(spec.Accepted))
			for _, a := range spec.Accepted {
				pr.Accepted[a.Column] = refill.AcceptedProfile{NonNull: counts[i], Outside: counts[i+1]}
				i += 2
			}
		}
		if len(spec.Drift) > 0 {
			pr.Numeric = make(map[string]refill.NumericProfile, len(numeric))
			for j, name := range numeric {
				pr.Numeric[name] = refill.NumericProfile{NonNull: ncounts[2*j], Zeros: ncounts[2*j+1], Mean: means[j]}
			}
		}
		profiles[key] = pr
	}
	if err := rows.Err(); err != nil {
		return nil, profileError(t.Table, err)
	}
	if err := values(ctx, db, t.Table, cols, f, spec.Drift, profiles); err != nil {
		return nil, err
	}
	if err := duplicates(ctx, db, t.Table, cols, f, spec.Unique, profiles); err != nil {
		return nil, err
	}
	return profiles, nil
}

// values fills Values for the drift columns from one statement for the
// whole range: one branch per column counts each (partition, value), and
// an outer grouping turns those into each column's non-NULL, distinct and
// most-frequent counts per partition.
func values(ctx context.Context, db querier, table string, all []refill.Column, f filter, cols []string, out map[string]refill.Profile) error {
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
			f.group, i, d.QuoteName(table), f.where, q, f.group, q)
	}
	q := fmt.Sprintf("SELECT %s, refill_i, count(*), max(refill_n), CAST(sum(refill_n) AS BIGINT) FROM (%s) s GROUP BY refill_p, refill_i",
		f.render("refill_p"), strings.Join(branches, " UNION ALL "))
	rows, err := db.QueryContext(ctx, q, f.args...)
	if err != nil {
		return fmt.Errorf("value profile of %s: %w", table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var i int
		var v refill.ValueProfile
		if err := rows.Scan(&k, &i, &v.Distinct, &v.Top, &v.NonNull); err != nil {
			return fmt.Errorf("value profile of %s: %w", table, err)
		}
		pr, ok := out[k]
		if !ok || i < 0 || i >= len(cols) {
			continue
		}
		if pr.Values == nil {
			pr.Values = make(map[string]refill.ValueProfile, len(cols))
			out[k] = pr
		}
		pr.Values[cols[i]] = v
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("value profile of %s: %w", table, err)
	}
	return nil
}

// duplicates fills Duplicates for the key cols: one grouped statement that
// returns only the keys more than one row shares, the most shared first in
// each partition, so the first is the example. Rows with a NULL in the key
// are left to not_null.
func duplicates(ctx context.Context, db querier, table string, all []refill.Column, f filter, cols []string, out map[string]refill.Profile) error {
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
		sel = append(sel, "CAST("+q+" AS VARCHAR)")
		group = append(group, q)
		notNull = append(notNull, q+" IS NOT NULL")
	}
	q := fmt.Sprintf("SELECT %s AS refill_p, count(*), %s FROM %s WHERE %s AND %s GROUP BY %s, %s HAVING count(*) > 1 ORDER BY refill_p, 2 DESC, %s",
		f.render(f.group), strings.Join(sel, ", "), d.QuoteName(table), f.where, strings.Join(notNull, " AND "),
		f.group, strings.Join(group, ", "), strings.Join(group, ", "))
	rows, err := db.QueryContext(ctx, q, f.args...)
	if err != nil {
		return fmt.Errorf("duplicate keys of %s: %w", table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var n int64
		vals := make([]sql.NullString, len(cols))
		dest := []any{&k, &n}
		for i := range vals {
			dest = append(dest, &vals[i])
		}
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("duplicate keys of %s: %w", table, err)
		}
		pr, ok := out[k]
		if !ok {
			continue
		}
		dup := pr.Duplicates
		if dup == nil {
			dup = &refill.Duplicates{}
			pr.Duplicates = dup
			out[k] = pr
		}
		dup.Keys++
		dup.Rows += n
		if n > dup.Max {
			dup.Max = n
			dup.Example = make([]string, len(vals))
			for i, v := range vals {
				dup.Example[i] = v.String
			}
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("duplicate keys of %s: %w", table, err)
	}
	return nil
}

// numericType reports whether a DuckDB type holds numbers, so that drift
// reads its mean and zero share.
func numericType(typ string) bool {
	switch typ {
	case "tinyint", "smallint", "integer", "bigint", "hugeint", "utinyint", "usmallint", "uinteger", "ubigint", "uhugeint", "float", "double":
		return true
	}
	return strings.HasPrefix(typ, "decimal")
}

// textType reports whether a DuckDB type holds text.
func textType(typ string) bool { return typ == "varchar" }

// profileError says what a failed profile query means: a text column
// holding something that is not a timestamp is the data's problem, named
// by DuckDB's message; anything else is passed on.
func profileError(table string, err error) error {
	if strings.Contains(err.Error(), "Conversion Error") {
		return fmt.Errorf("profile of %s: a text column checked as a timestamp holds a value that is not one: %w", table, err)
	}
	return fmt.Errorf("profile of %s: %w", table, err)
}

// checkColumn finds a column a check names, and for time checks makes
// sure it holds times: DATE, TIMESTAMP, TIMESTAMPTZ or text.
func checkColumn(table string, cols []refill.Column, name, check string, timestamp bool) (refill.Column, error) {
	c, ok := d.Column(cols, name)
	if !ok {
		return c, d.NoColumn(table, name, "named by its "+check+" check", cols)
	}
	if timestamp && !(c.Type == "date" || strings.HasPrefix(c.Type, "timestamp") || textType(c.Type)) {
		return c, refill.BadInputf("column %s of table %s is %s; time checks need a timestamp column (date, timestamp, timestamptz or text)", c.Name, table, c.Type)
	}
	return c, nil
}
