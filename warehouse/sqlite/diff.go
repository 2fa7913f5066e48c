package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"

	msqlite "modernc.org/sqlite"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/contentdiff"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// kept is the temporary table that holds a partition as it was before a
// rehearsal rebuilt it. Its name starts with refill_, so job text may not
// read it (guard.go).
const kept = `temp."refill_diff_kept"`

var dialect = contentdiff.Dialect{
	Text:     func(e string) string { return "CAST(" + e + " AS TEXT)" },
	Distinct: "IS NOT",
	Numeric: func(c refill.Column) bool {
		t := c.Type
		for _, s := range []string{"int", "real", "floa", "doub", "dec", "num"} {
			if strings.Contains(t, s) {
				return true
			}
		}
		return false
	},
	Names: sqltext.SQLite,
	IndexKept: func(old string, cols []string) []string {
		return []string{`CREATE INDEX temp."refill_diff_kept_key" ON "refill_diff_kept" (` + strings.Join(cols, ", ") + `)`}
	},
}

// Diff keeps a copy of partition, runs build, and compares what build
// left with the copy (package contentdiff). It fails only when build
// does; a comparison that cannot be made is a diff skipped, and why.
func (t *tx) Diff(ctx context.Context, ref refill.TableRef, partition string, spec refill.DiffSpec, build func() error) (*refill.PartitionDiff, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	cols, err := columns(ctx, t.conn, ref.Table)
	if err != nil {
		return nil, err
	}
	f, err := partitionFilter(ref, cols, partition, partition)
	if err != nil {
		return nil, fmt.Errorf("diff of %s: %w", ref.Table, err)
	}
	table := sqltext.SQLite.QuoteName(ref.Table)
	_, _ = t.conn.ExecContext(ctx, "DROP TABLE IF EXISTS "+kept)
	if _, err := t.conn.ExecContext(ctx, fmt.Sprintf("CREATE TEMP TABLE %s AS SELECT * FROM %s WHERE %s", "refill_diff_kept", table, f.where), f.args...); err != nil {
		if err := build(); err != nil {
			return nil, err
		}
		return refill.SkippedDiff("the partition could not be copied aside to compare: " + oneLine(err)), nil
	}
	defer func() { _, _ = t.conn.ExecContext(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+kept) }()
	if err := build(); err != nil {
		return nil, err
	}
	if err := t.usable(); err != nil {
		return nil, err
	}
	pc, err := partitionColumn(ref, cols)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = sqltext.QuoteIdent(c.Name)
	}
	d, err := contentdiff.Compare(ctx, querierRows{t.conn}, dialect, contentdiff.Input{
		Old: kept, New: table, Where: f.where, Args: f.args,
		Columns: cols, Partition: pc.Name,
		RowHash: "refill_rowhash(" + strings.Join(names, ", ") + ")",
		Spec:    spec,
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return refill.SkippedDiff("the comparison failed: " + oneLine(err)), nil
	}
	return d, nil
}

func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// querierRows reads every value as text.
type querierRows struct{ db querier }

func (q querierRows) Rows(ctx context.Context, stmt string, args ...any) ([][]*string, error) {
	rows, err := q.db.QueryContext(ctx, stmt, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out [][]*string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		r := make([]*string, len(cols))
		for i, v := range vals {
			if v.Valid {
				s := v.String
				r[i] = &s
			}
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func init() {
	// refill_rowhash(columns...) is one row's hash, as refill_checksum
	// adds them up: the content diff pairs rows compared whole by it.
	msqlite.MustRegisterFunction("refill_rowhash", &msqlite.FunctionImpl{
		NArgs:         -1,
		Deterministic: true,
		VolatileArgs:  true,
		Scalar: func(_ *msqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
			return int64(rowHash(args)), nil
		},
	})
}
