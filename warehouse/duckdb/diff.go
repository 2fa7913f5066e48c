//go:build duckdb

package duckdb

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/contentdiff"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// keptCopy is the temporary table that holds a partition as it was before a
// rehearsal rebuilt it: one per table for the transaction. Its name starts
// with refill_, so job text may not read it (guard.go); it is dropped when
// the transaction ends.
//
// A diff made while another of the same table is open (a view's diff
// around its upstream's rebuild) takes a copy of its own: busy marks the
// copy in use.
type keptCopy struct {
	name string
	busy bool
}

var dialect = contentdiff.Dialect{
	Text:     func(e string) string { return "CAST(" + e + " AS VARCHAR)" },
	Distinct: "IS DISTINCT FROM",
	Numeric:  func(c refill.Column) bool { return numericType(c.Type) },
	// A DECIMAL(18,3) sums to 100.000: shown as 100.
	Number: func(e string) string {
		x := "CAST(" + e + " AS VARCHAR)"
		return fmt.Sprintf("CASE WHEN contains(%[1]s, '.') AND NOT contains(%[1]s, 'e') THEN rtrim(rtrim(%[1]s, '0'), '.') ELSE %[1]s END", x)
	},
	Names: sqltext.DuckDB,
	// Joins are hashed; the copy needs no index.
	IndexKept: func(string, []string) []string { return nil },
	// The copy's row id, unless a column takes the name.
	RowMark: func(cols []refill.Column) string {
		if _, taken := sqltext.DuckDB.Column(cols, "rowid"); taken {
			return ""
		}
		return "rowid"
	},
}

// Diff keeps a copy of partition, runs build, and compares what build
// left with the copy (package contentdiff). It fails only when build
// does; a comparison that cannot be made is a diff skipped, and why.
// DuckDB has no savepoints and aborts a transaction at a failed
// statement, so a comparison that fails also ends the rehearsal.
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
	table := d.QuoteName(ref.Table)
	kc, err := t.keptCopy(ctx, ref.Table, table)
	if err == nil {
		defer func() { kc.busy = false }()
		_, err = t.conn.ExecContext(ctx, "DELETE FROM temp."+sqltext.QuoteIdent(kc.name))
	}
	if err == nil {
		_, err = t.conn.ExecContext(ctx, fmt.Sprintf("INSERT INTO temp.%s SELECT * FROM %s WHERE %s", sqltext.QuoteIdent(kc.name), table, f.where), f.args...)
	}
	if err != nil {
		t.fail(err)
		if err := build(); err != nil {
			return nil, err
		}
		return refill.SkippedDiff("the partition could not be copied aside to compare: " + oneLine(err)), nil
	}
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
	diff, err := contentdiff.Compare(ctx, querierRows{t}, dialect, contentdiff.Input{
		Old: "temp." + sqltext.QuoteIdent(kc.name), New: table, Where: f.where, Args: f.args,
		Columns: cols, Partition: pc.Name, RowHash: rowHash(cols), Spec: spec,
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		t.fail(err)
		return refill.SkippedDiff("the comparison failed: " + oneLine(err)), nil
	}
	return diff, nil
}

// keptCopy returns a kept copy of table not in use, marked busy, creating
// it empty, with its columns, when each of the transaction's is in use.
func (t *tx) keptCopy(ctx context.Context, name, table string) (*keptCopy, error) {
	for _, kc := range t.kept[name] {
		if !kc.busy {
			kc.busy = true
			return kc, nil
		}
	}
	t.keptN++
	kc := &keptCopy{name: fmt.Sprintf("refill_diff_kept_%d", t.keptN), busy: true}
	if _, err := t.conn.ExecContext(ctx, fmt.Sprintf("CREATE OR REPLACE TEMP TABLE %s AS SELECT * FROM %s WHERE false", sqltext.QuoteIdent(kc.name), table)); err != nil {
		return nil, err
	}
	if t.kept == nil {
		t.kept = map[string][]*keptCopy{}
	}
	t.kept[name] = append(t.kept[name], kc)
	return kc, nil
}

// querierRows reads every value as text.
type querierRows struct{ t *tx }

func (q querierRows) Rows(ctx context.Context, text string, args ...any) ([][]*string, error) {
	rows, err := q.t.conn.QueryContext(ctx, text, args...)
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
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		r := make([]*string, len(cols))
		for i, v := range vals {
			if v != nil {
				s := textOf(v)
				r[i] = &s
			}
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// textOf renders a value DuckDB returned.
func textOf(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	case time.Time:
		return v.UTC().Format("2006-01-02 15:04:05.999999")
	case fmt.Stringer:
		return v.String()
	}
	return strings.TrimSpace(fmt.Sprint(v))
}
