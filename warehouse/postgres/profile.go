package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

var _ refill.Profiler = (*Warehouse)(nil)

// Profile measures partitions [from, to] of t with one grouped query, so one
// scan: count(*) per partition, count(*) - count(c) for each not-null
// column (cheaper than counting c IS NULL), and FILTERed counts for the
// time checks. It groups on the raw partition value where that is cheaper
// than the rendered key (a date, a truncated timestamp), and renders only
// the groups.
//
// Time checks compare natively: date, timestamp and timestamptz columns as
// they are, text columns cast to timestamptz. The query runs in a read-only
// transaction whose TimeZone is UTC, so that a timestamp without time zone,
// a date, or text without an offset means UTC, as partitions do, whatever
// the connection's TimeZone is. A text value that is not a timestamp fails
// the cast and the whole profile, with PostgreSQL's message naming the value.
// NULLs count as neither inversions nor future times.
func (w *Warehouse) Profile(ctx context.Context, t refill.TableRef, spec refill.ProfileSpec, from, to string) (map[string]refill.Profile, error) {
	return profile(ctx, w.pool, func(ctx context.Context) (pgx.Tx, error) {
		return w.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	}, t, spec, from, to)
}

// Profile is Warehouse.Profile inside the transaction, in a savepoint that
// is rolled back so its TimeZone setting ends with it.
func (t *tx) Profile(ctx context.Context, ref refill.TableRef, spec refill.ProfileSpec, from, to string) (map[string]refill.Profile, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	return profile(ctx, t.tx, t.tx.Begin, ref, spec, from, to)
}

func profile(ctx context.Context, db querier, begin func(context.Context) (pgx.Tx, error), t refill.TableRef, spec refill.ProfileSpec, from, to string) (map[string]refill.Profile, error) {
	cols, err := columns(ctx, db, t.Table)
	if err != nil {
		return nil, err // names the table already
	}
	p, err := partitionPlanFor(t, cols, from, to)
	if err != nil {
		return nil, err
	}
	args := append([]any(nil), p.args...)
	var sel strings.Builder
	fmt.Fprintf(&sel, "SELECT "+p.render+", count(*)", p.group)
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
		if textType(c.Type) {
			return sqltext.QuoteIdent(c.Name) + "::timestamptz", nil
		}
		return sqltext.QuoteIdent(c.Name), nil
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
		args = append(args, spec.Now)
	}
	for _, name := range spec.NoFuture {
		f, err := timeExpr(name, "no_future")
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&sel, ", count(*) FILTER (WHERE %s > $%d::timestamptz)", f, len(args))
	}
	for _, a := range spec.Accepted {
		c, err := checkColumn(t.Table, cols, a.Column, "accepted_values", false)
		if err != nil {
			return nil, err
		}
		args = append(args, a.Values)
		// Compared as text, as the config writes the values; NULL <> ALL
		// is NULL, so NULLs are neither accepted nor outside.
		q := sqltext.QuoteIdent(c.Name)
		fmt.Fprintf(&sel, ", count(%s), count(*) FILTER (WHERE %s::text <> ALL($%d::text[]))", q, q, len(args))
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
			fmt.Fprintf(&sel, ", count(%s), count(*) FILTER (WHERE %s = 0), coalesce(avg(%s)::float8, 0)", q, q, q)
		}
	}
	fmt.Fprintf(&sel, " FROM %s WHERE %s GROUP BY %s", sqltext.Postgres.QuoteName(t.Table), p.where, p.group)

	tx, err := begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("profile of %s: %w", t.Table, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if len(spec.TimeOrder)+len(spec.NoFuture) > 0 {
		if _, err := tx.Exec(ctx, "SET LOCAL TimeZone = 'UTC'"); err != nil {
			return nil, fmt.Errorf("profile of %s: %w", t.Table, err)
		}
	}
	rows, err := tx.Query(ctx, sel.String(), args...)
	if err != nil {
		return nil, profileError(t.Table, err)
	}
	n := 2 + len(spec.NotNull) + len(spec.TimeOrder) + len(spec.NoFuture) + 2*len(spec.Accepted) + 2*len(numeric)
	var key string
	counts := make([]int64, n-1)
	dest := make([]any, n)
	dest[0] = &key
	for i := range counts {
		dest[i+1] = &counts[i]
	}
	means := make([]float64, len(numeric))
	// Each numeric column's mean follows its two counts.
	for j := range numeric {
		at := 2 + len(spec.NotNull) + len(spec.TimeOrder) + len(spec.NoFuture) + 2*len(spec.Accepted) + 3*j + 2
		dest = slices.Insert(dest, at, any(&means[j]))
	}
	profiles := map[string]refill.Profile{}
	_, err = pgx.ForEachRow(rows, dest, func() error {
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
				pr.Numeric[name] = refill.NumericProfile{NonNull: counts[i], Zeros: counts[i+1], Mean: means[j]}
				i += 2
			}
		}
		profiles[key] = pr
		return nil
	})
	if err != nil {
		return nil, profileError(t.Table, err)
	}
	if err := values(ctx, tx, t.Table, cols, p, spec.Drift, profiles); err != nil {
		return nil, err
	}
	if err := duplicates(ctx, tx, t.Table, cols, p, spec.Unique, profiles); err != nil {
		return nil, err
	}
	return profiles, nil
}

// numericType reports whether a PostgreSQL type holds numbers, so that
// drift reads its mean and zero share.
func numericType(typ string) bool {
	switch typ {
	case "smallint", "integer", "bigint", "real", "double precision":
		return true
	}
	return strings.HasPrefix(typ, "numeric")
}

// profileError says what a failed profile query means: a text column
// holding something that is not a timestamp is the data's problem, named by
// PostgreSQL's message; anything else is passed on.
func profileError(table string, err error) error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) && (pg.Code == "22007" || pg.Code == "22008") {
		return fmt.Errorf("profile of %s: a text column checked as a timestamp holds a value that is not one: %w", table, err)
	}
	return fmt.Errorf("profile of %s: %w", table, err)
}

// checkColumn finds a column a check names, as the config names it, and
// for time checks makes sure it holds timestamps: date, timestamp,
// timestamptz, or text.
func checkColumn(table string, cols []refill.Column, name, check string, timestamp bool) (refill.Column, error) {
	c, found := sqltext.Postgres.Column(cols, name)
	if !found {
		return c, sqltext.Postgres.NoColumn(table, name, "named by its "+check+" check", cols)
	}
	if timestamp && !(c.Type == "date" || strings.HasPrefix(c.Type, "timestamp") || textType(c.Type)) {
		return c, refill.BadInputf("column %s of table %s is %s; time checks need a timestamp column (date, timestamp, timestamptz or text)", c.Name, table, c.Type)
	}
	return c, nil
}

// textType reports whether a column type holds text.
func textType(typ string) bool {
	return typ == "text" || strings.HasPrefix(typ, "character") || strings.HasPrefix(typ, "varchar")
}
