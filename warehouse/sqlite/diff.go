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

// A kept copy is the temporary table that holds a partition as it was
// before a rehearsal rebuilt it: one per table for the transaction, so
// that the statements comparing it are parsed once per table and not once
// per partition (parsing is most of what a small partition's diff costs
// in SQLite). Their names start with refill_, so job text may not read
// them (guard.go); they go with the transaction's connection.
//
// A diff made while another of the same table is open (a view's diff
// around its upstream's rebuild, say, or one partition's around
// another's) takes a copy of its own: busy marks the copy in use.
type keptCopy struct {
	name    string // unquoted, in the temp schema
	indexed map[string]bool
	busy    bool
}

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
	// The kept copy's row id, by the first of its names that no column
	// takes (the copy has no INTEGER PRIMARY KEY: it is made AS SELECT).
	RowMark: func(cols []refill.Column) string {
		for _, name := range []string{"rowid", "_rowid_", "oid"} {
			if _, taken := sqltext.SQLite.Column(cols, name); !taken {
				return name
			}
		}
		return ""
	},
}

// Diff keeps a copy of partition, runs build, and compares what build
// left with the copy (package contentdiff). It fails only when build
// does; a comparison that cannot be made is a diff skipped, and why.
func (t *tx) Diff(ctx context.Context, ref refill.TableRef, partition string, spec refill.DiffSpec, build func() error) (*refill.PartitionDiff, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	cols, err := columns(ctx, prepared{t}, ref.Table)
	if err != nil {
		return nil, err
	}
	f, err := partitionFilter(ref, cols, partition, partition)
	if err != nil {
		return nil, fmt.Errorf("diff of %s: %w", ref.Table, err)
	}
	table := sqltext.SQLite.QuoteName(ref.Table)
	kc, err := t.keptCopy(ctx, ref.Table, table)
	if err == nil {
		defer func() { kc.busy = false }()
		err = t.exec(ctx, "DELETE FROM temp."+sqltext.QuoteIdent(kc.name))
	}
	if err == nil {
		// Indexed by the key before the rows go in: the comparison then
		// finds it ready, and the copies of the table's later partitions
		// keep it up as they fill.
		var key []string
		for _, name := range spec.Key {
			if c, ok := dialect.Names.Column(cols, name); ok {
				key = append(key, sqltext.QuoteIdent(c.Name))
			}
		}
		if len(key) == len(spec.Key) && len(key) > 0 {
			for _, stmt := range kc.index("", key) {
				if err = t.exec(ctx, stmt); err != nil {
					break
				}
			}
		}
	}
	if err == nil {
		err = t.exec(ctx, fmt.Sprintf("INSERT INTO temp.%s SELECT * FROM %s WHERE %s", sqltext.QuoteIdent(kc.name), table, f.where), f.args...)
	}
	if err != nil {
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
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = sqltext.QuoteIdent(c.Name)
	}
	d := dialect
	d.IndexKept = kc.index
	diff, err := contentdiff.Compare(ctx, querierRows{t}, d, contentdiff.Input{
		Old: "temp." + sqltext.QuoteIdent(kc.name), New: table, Where: f.where, Args: f.args,
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
	return diff, nil
}

// index returns the statement that indexes the copy by key's columns
// (quoted), unless it is indexed by them already.
func (kc *keptCopy) index(_ string, key []string) []string {
	id := strings.Join(key, ",")
	if kc.indexed[id] {
		return nil
	}
	kc.indexed[id] = true
	return []string{fmt.Sprintf("CREATE INDEX temp.%s ON %s (%s)", sqltext.QuoteIdent(fmt.Sprintf("%s_key%d", kc.name, len(kc.indexed))), sqltext.QuoteIdent(kc.name), id)}
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
	kc := &keptCopy{name: fmt.Sprintf("refill_diff_kept_%d", t.keptN), indexed: map[string]bool{}, busy: true}
	// The copies outlive the transaction on its connection: it is not
	// given back to the pool.
	t.tainted = true
	if _, err := t.conn.ExecContext(ctx, fmt.Sprintf("DROP TABLE IF EXISTS temp.%[1]s; CREATE TEMP TABLE %[1]s AS SELECT * FROM %[2]s WHERE 0", sqltext.QuoteIdent(kc.name), table)); err != nil {
		return nil, err
	}
	if t.kept == nil {
		t.kept = map[string][]*keptCopy{}
	}
	t.kept[name] = append(t.kept[name], kc)
	return kc, nil
}

// stmt is the transaction's prepared statement for text, prepared once.
func (t *tx) stmt(ctx context.Context, text string) (*sql.Stmt, error) {
	if s := t.stmts[text]; s != nil {
		return s, nil
	}
	s, err := t.conn.PrepareContext(ctx, text)
	if err != nil {
		return nil, err
	}
	if t.stmts == nil {
		t.stmts = map[string]*sql.Stmt{}
	}
	t.stmts[text] = s
	return s, nil
}

func (t *tx) exec(ctx context.Context, text string, args ...any) error {
	s, err := t.stmt(ctx, text)
	if err != nil {
		return err
	}
	_, err = s.ExecContext(ctx, args...)
	return err
}

func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// querierRows reads every value as text.
type querierRows struct{ t *tx }

func (q querierRows) Rows(ctx context.Context, text string, args ...any) ([][]*string, error) {
	s, err := q.t.stmt(ctx, text)
	if err != nil {
		return nil, err
	}
	rows, err := s.QueryContext(ctx, args...)
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

// closeStmts closes the statements the transaction prepared.
func (t *tx) closeStmts() {
	for _, s := range t.stmts {
		_ = s.Close()
	}
	t.stmts = nil
}

// prepared runs refill's own statements of the transaction through the
// statements it prepared (stmt), so that each text is parsed once per
// transaction: a plan's rehearsal reads the same table's columns and
// digests for every partition.
type prepared struct{ t *tx }

func (p prepared) QueryContext(ctx context.Context, text string, args ...any) (*sql.Rows, error) {
	s, err := p.t.stmt(ctx, text)
	if err != nil {
		return nil, err
	}
	return s.QueryContext(ctx, args...)
}

func (p prepared) QueryRowContext(ctx context.Context, text string, args ...any) *sql.Row {
	s, err := p.t.stmt(ctx, text)
	if err != nil {
		return p.t.conn.QueryRowContext(ctx, text, args...) // fails the same way, as a row
	}
	return s.QueryRowContext(ctx, args...)
}

func (p prepared) ExecContext(ctx context.Context, text string, args ...any) (sql.Result, error) {
	s, err := p.t.stmt(ctx, text)
	if err != nil {
		return nil, err
	}
	return s.ExecContext(ctx, args...)
}
