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
	n := 2 + len(spec.NotNull) + len(spec.TimeOrder) + len(spec.NoFuture)
	var key string
	counts := make([]int64, n-1)
	dest := make([]any, n)
	dest[0] = &key
	for i := range counts {
		dest[i+1] = &counts[i]
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
		profiles[key] = pr
		return nil
	})
	if err != nil {
		return nil, profileError(t.Table, err)
	}
	return profiles, nil
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
