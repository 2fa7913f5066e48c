package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/contentdiff"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// keptName is the temporary table that holds a partition as it was before
// a rehearsal rebuilt it, for the nth diff open at once (a view's diff
// around its upstream's rebuild holds one while the upstream's own is
// made). Its name starts with refill_, so job text that reads it is
// refused (guard.go).
func keptName(n int) string { return fmt.Sprintf(`pg_temp."refill_diff_kept_%d"`, n) }

var dialect = contentdiff.Dialect{
	Text:     func(e string) string { return "(" + e + ")::text" },
	Distinct: "IS DISTINCT FROM",
	Numeric: func(c refill.Column) bool {
		for _, p := range []string{"smallint", "integer", "bigint", "numeric", "real", "double precision"} {
			if c.Type == p || strings.HasPrefix(c.Type, p+"(") {
				return true
			}
		}
		return false
	},
	Names: sqltext.Postgres,
	// No index: the keyed join is hashed, which needs none, nor the
	// statistics a copy made a moment ago lacks (the planner would guess
	// it tiny and pair rows by a nested loop, one scan per row). Only for
	// that join: the whole-row comparison is slower without nested loops.
	IndexKept: func(string, []string) []string {
		return []string{"SELECT set_config('enable_nestloop', 'off', true)"}
	},
	AfterJoin: []string{"SELECT set_config('enable_nestloop', 'on', true)"},
	// A system column, which no table's column may be named.
	RowMark: func([]refill.Column) string { return "ctid" },
}

// undefinedFunction is the SQLSTATE of a type without the operator a
// comparison needs (json has no =).
const undefinedFunction = "42883"

// Diff keeps a copy of partition, runs build, and compares what build left
// with the copy (package contentdiff), inside a savepoint that is rolled
// back, with the settings values print with pinned. It fails only when
// build does; a comparison that cannot be made is a diff skipped, and why.
func (t *tx) Diff(ctx context.Context, ref refill.TableRef, partition string, spec refill.DiffSpec, build func() error) (*refill.PartitionDiff, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	cols, err := hashColumns(ctx, t.tx, ref.Table)
	if err != nil {
		return nil, err
	}
	plain := make([]refill.Column, len(cols))
	for i, c := range cols {
		plain[i] = c.Column
	}
	p, err := partitionPlanFor(ref, plain, partition, partition)
	if err != nil {
		return nil, fmt.Errorf("diff of %s: %w", ref.Table, err)
	}
	table := sqltext.Postgres.QuoteName(ref.Table)
	t.diffs++
	defer func() { t.diffs-- }()
	kept := keptName(t.diffs)
	if err := t.keep(ctx, kept, table, p); err != nil {
		if err := build(); err != nil {
			return nil, err
		}
		return refill.SkippedDiff("the partition could not be copied aside to compare: " + oneLine(err)), nil
	}
	defer t.tx.Exec(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+kept, pgx.QueryExecModeSimpleProtocol)
	if err := build(); err != nil {
		return nil, err
	}
	if err := t.usable(); err != nil {
		return nil, err
	}
	pc, err := partitionColumn(ref, plain)
	if err != nil {
		return nil, err
	}
	in := contentdiff.Input{
		Old: kept, New: table, Where: p.where, Args: p.args,
		Columns: plain, Partition: pc.Name, RowHash: rowHash(cols), Spec: spec,
	}
	d, err := t.compare(ctx, in)
	var pg *pgconn.PgError
	if errors.As(err, &pg) && pg.Code == undefinedFunction {
		in.AsText = true
		d, err = t.compare(ctx, in)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return refill.SkippedDiff("the comparison failed: " + oneLine(err)), nil
	}
	return d, nil
}

// keep copies the partition aside, into kept, inside a savepoint: a copy
// that fails leaves the transaction as it was.
func (t *tx) keep(ctx context.Context, kept, table string, p partitionPlan) error {
	if _, err := t.tx.Exec(ctx, "SAVEPOINT refill_keep", pgx.QueryExecModeSimpleProtocol); err != nil {
		return err
	}
	_, err := t.tx.Exec(ctx, fmt.Sprintf("DROP TABLE IF EXISTS %[1]s; CREATE TEMP TABLE %[1]s (LIKE %[2]s)", kept, table), pgx.QueryExecModeSimpleProtocol)
	if err == nil {
		_, err = t.tx.Exec(ctx, fmt.Sprintf("INSERT INTO %s SELECT * FROM %s WHERE %s", kept, table, p.where), append([]any{pgx.QueryExecModeExec}, p.args...)...)
	}
	if err != nil {
		_, _ = t.tx.Exec(context.WithoutCancel(ctx), "ROLLBACK TO SAVEPOINT refill_keep; RELEASE SAVEPOINT refill_keep", pgx.QueryExecModeSimpleProtocol)
		return err
	}
	_, err = t.tx.Exec(ctx, "RELEASE SAVEPOINT refill_keep", pgx.QueryExecModeSimpleProtocol)
	return err
}

// compare runs the comparison in a savepoint that is rolled back, so that
// a statement that fails leaves the transaction usable.
func (t *tx) compare(ctx context.Context, in contentdiff.Input) (*refill.PartitionDiff, error) {
	if _, err := t.tx.Exec(ctx, "SAVEPOINT refill_diff; "+pinSettings, pgx.QueryExecModeSimpleProtocol); err != nil {
		return nil, err
	}
	defer t.tx.Exec(context.WithoutCancel(ctx), "ROLLBACK TO SAVEPOINT refill_diff; RELEASE SAVEPOINT refill_diff", pgx.QueryExecModeSimpleProtocol)
	return contentdiff.Compare(ctx, txRows{t.tx}, dialect, in)
}

func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// txRows reads every value as text, unprepared so that each statement is
// planned for its partition.
type txRows struct{ tx pgx.Tx }

func (q txRows) Rows(ctx context.Context, stmt string, args ...any) ([][]*string, error) {
	rows, err := q.tx.Query(ctx, stmt, append([]any{pgx.QueryExecModeExec}, args...)...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) ([]*string, error) {
		vals := make([]*string, len(r.FieldDescriptions()))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		return vals, r.Scan(ptrs...)
	})
}
