package sqlite

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// An sql job may write only the partition it builds, and SQLite itself
// holds it to that: while the job's text runs, three temporary triggers on
// its table abort any statement that inserts, updates or deletes a row
// outside the partition, or moves a row across its edge. They test a
// row exactly as DeletePartition selects it (partitionFilter, with the
// column read from NEW or OLD), so they hold for every grain and column
// form refill reads.
//
// The triggers are made once per table and transaction, and read the
// partition they hold the job to from a temporary table (refill_fence),
// which refill sets before the job's text runs and clears after it: a
// trigger made and dropped for every partition would change the schema
// each time, and SQLite would parse every prepared statement of the
// transaction again (most of what a plan of thousands of small
// partitions cost). With the fence down (no partition set) the triggers
// let every row through, so refill's own writes are not held to it. Job
// text cannot read or write refill_fence (the authorizer refuses refill's
// tables, but for the triggers' own reads), nor drop the triggers (it may
// not change the schema). A transaction that commits drops them first; a
// rollback takes their creation with it; and a connection on which they
// might have been left is closed rather than pooled.
//
// SQLite fires delete triggers for rows that a REPLACE conflict clause
// removes (INSERT OR REPLACE of a key held by another partition's row)
// only with recursive_triggers on, so refill turns it on at the
// transaction's first sql job and back when the transaction ends. A
// trigger of the warehouse owner's that fires itself again then recurses,
// up to SQLite's limit, where before it did not, for the rest of that
// transaction.

// fenceTable holds the partition the running job is held to, as one row
// for its set of partition triggers (n, random); no row is the fence down. Its columns
// have no type, so that the triggers compare with the text in them as
// they would with literals.
const fenceTable = "refill_fence"

// outsideMarker starts the message the partition triggers raise; the
// offending row's partition column follows it.
const outsideMarker = "refill: a row outside the partition: "

// fence returns the statements that create set n of partition triggers
// on t's table, whose columns are cols, and the triggers' names.
func fence(t refill.TableRef, cols []refill.Column, n int) (create, names []string, err error) {
	c, err := partitionColumn(t, cols)
	if err != nil {
		return nil, nil, err
	}
	inside := func(row string) (string, error) {
		col := row + "." + sqltext.QuoteIdent(c.Name)
		key, err := partitionKeyOf(t, cols, row)
		if err != nil {
			return "", err
		}
		// As partitionFilter's predicate, the bounds read from the fence
		// table; IS 1 makes NULL outside.
		return fmt.Sprintf("(%[1]s >= f.lo AND %[1]s < f.hi AND %[2]s = f.part) IS 1", col, key), nil
	}
	newIn, err := inside("NEW")
	if err != nil {
		return nil, nil, err
	}
	oldIn, err := inside("OLD")
	if err != nil {
		return nil, nil, err
	}
	table := sqltext.SQLite.QuoteName(t.Table)
	if schema, _ := splitTable(t.Table); schema == "" {
		table = "main." + table
	}
	// up is true when the fence is up and cond holds.
	up := func(cond string) string {
		return fmt.Sprintf("(SELECT f.part IS NOT NULL AND (%s) FROM temp.%s AS f WHERE f.n = %d) IS 1", cond, fenceTable, n)
	}
	value := func(row string) string {
		return fmt.Sprintf("coalesce(CAST(%s.%s AS TEXT), 'NULL')", row, sqltext.QuoteIdent(c.Name))
	}
	raise := func(v string) string {
		return fmt.Sprintf("BEGIN SELECT RAISE(ABORT, %s || %s); END", literal(outsideMarker), v)
	}
	for _, op := range []string{"insert", "update", "delete"} {
		names = append(names, fmt.Sprintf("refill_fence_%d_%s", n, op))
	}
	create = []string{
		fmt.Sprintf("CREATE TEMP TRIGGER %s BEFORE INSERT ON %s WHEN %s %s", names[0], table, up("NOT "+newIn), raise(value("NEW"))),
		fmt.Sprintf("CREATE TEMP TRIGGER %s BEFORE UPDATE ON %s WHEN %s %s", names[1], table, up("NOT "+oldIn+" OR NOT "+newIn),
			raise(fmt.Sprintf("CASE WHEN %s THEN %s ELSE %s END", up(newIn), value("OLD"), value("NEW")))),
		fmt.Sprintf("CREATE TEMP TRIGGER %s BEFORE DELETE ON %s WHEN %s %s", names[2], table, up("NOT "+oldIn), raise(value("OLD"))),
	}
	return create, names, nil
}

// literal quotes s as an SQL string literal.
func literal(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// fences are the partition triggers a transaction made.
type fences struct {
	// sets holds each set's number by the statements that made it, with
	// its number where "%d" stands (a table, its columns and grain).
	sets map[string]int
	// triggers are the names of every set's triggers, which alone may read
	// the fence table under a job's guard.
	triggers map[string]bool
	// recursive is recursive_triggers as it was before the first fence,
	// and set whether refill changed it.
	recursive int
	set       bool
}

// raiseFence holds the job that is about to run on ref's table to
// partition: it makes the table's partition triggers if the transaction
// has not yet (and the fence table, and turns recursive_triggers on), and
// sets the partition they read. It returns the set's number, for
// lowerFence.
func (t *tx) raiseFence(ctx context.Context, ref refill.TableRef, cols []refill.Column, partition string) (n int, err error) {
	lo, hi, err := sqltext.DayBounds(ref.Grain, partition, partition)
	if err == nil {
		_, err = partitionKeyOf(ref, cols, "NEW")
	}
	if err != nil {
		return 0, fmt.Errorf("sql job for %s: %w", ref.Table, err) // a malformed partition
	}
	shape, _, err := fence(ref, cols, -1)
	if err != nil {
		return 0, fmt.Errorf("sql job for %s: %w", ref.Table, err)
	}
	key := strings.Join(shape, ";")
	f := &t.fences
	n, ok := f.sets[key]
	if !ok {
		if f.sets == nil {
			if err := t.conn.QueryRowContext(ctx, "PRAGMA recursive_triggers").Scan(&f.recursive); err != nil {
				return 0, fmt.Errorf("partition guard: %w", err)
			}
			if _, err := t.conn.ExecContext(ctx, "PRAGMA recursive_triggers = ON"); err != nil {
				t.tainted = true
				return 0, fmt.Errorf("partition guard: %w", err)
			}
			f.set = true
			if _, err := t.conn.ExecContext(ctx, "CREATE TEMP TABLE "+fenceTable+" (n INTEGER PRIMARY KEY, lo, hi, part)"); err != nil {
				t.tainted = true
				return 0, fmt.Errorf("partition guard: %w", err)
			}
			f.sets, f.triggers = map[string]int{}, map[string]bool{}
		}
		// A random number names the set and its triggers, so that what
		// a job might glimpse of them says nothing of what else ran.
		n = int(rand.Int32N(1<<30)) + 1
		for slices.Contains(slices.Collect(maps.Values(f.sets)), n) {
			n = int(rand.Int32N(1<<30)) + 1
		}
		create, names, err := fence(ref, cols, n)
		if err != nil {
			return 0, err
		}
		for _, stmt := range create {
			if _, err := t.conn.ExecContext(ctx, stmt); err != nil {
				t.tainted = true // the triggers made so far are dropped with the connection
				return 0, fmt.Errorf("partition guard: %w", err)
			}
		}
		for _, name := range names {
			f.triggers[name] = true
		}
		f.sets[key] = n
	}
	// The table holds the running job's row alone: raised, the row is
	// there; lowered, it is gone, and the triggers find none (fence down).
	if err := t.exec(ctx, "INSERT OR REPLACE INTO temp."+fenceTable+" (n, lo, hi, part) VALUES (?, ?, ?, ?)", n, lo, hi, partition); err != nil {
		t.tainted = true
		return 0, fmt.Errorf("partition guard: %w", err)
	}
	return n, nil
}

// lowerFence takes set n's partition away, so that its triggers let every
// row through again. If it cannot, or the transaction ended early (its
// hooks turn the update into a rollback), the connection is marked
// tainted, so that it is closed instead of going back to the pool.
func (t *tx) lowerFence(ctx context.Context, n int) error {
	if t.ended {
		t.tainted = true
		return nil
	}
	if err := t.exec(context.WithoutCancel(ctx), "DELETE FROM temp."+fenceTable+" WHERE n = ?", n); err != nil {
		t.tainted = true
		return fmt.Errorf("partition guard: %w", err)
	}
	return nil
}

// dropFences drops the transaction's partition triggers and the fence
// table, inside the transaction, before it commits.
func (t *tx) dropFences(ctx context.Context) error {
	if t.fences.sets == nil {
		return nil
	}
	var errs []error
	for name := range t.fences.triggers {
		if _, err := t.conn.ExecContext(ctx, "DROP TRIGGER IF EXISTS temp."+name); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := t.conn.ExecContext(ctx, "DROP TABLE IF EXISTS temp."+fenceTable); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		t.tainted = true
		return fmt.Errorf("partition guard: %w", err)
	}
	t.fences.sets, t.fences.triggers = nil, nil
	return nil
}

// restoreRecursive puts recursive_triggers back as the transaction found
// it, once the transaction has ended.
func (t *tx) restoreRecursive(ctx context.Context) error {
	if !t.fences.set {
		return nil
	}
	if _, err := t.conn.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf("PRAGMA recursive_triggers = %d", t.fences.recursive)); err != nil {
		t.tainted = true
		return fmt.Errorf("partition guard: %w", err)
	}
	t.fences.set = false
	return nil
}

// raisedOutside returns the partition column's value that a partition
// trigger raised for, if err is such a raise.
func raisedOutside(err error) (string, bool) {
	var e *msqlite.Error
	if !errors.As(err, &e) || e.Code()&0xff != sqlite3.SQLITE_CONSTRAINT {
		return "", false
	}
	_, v, ok := strings.Cut(e.Error(), outsideMarker)
	if !ok {
		return "", false
	}
	return strings.TrimSuffix(v, fmt.Sprintf(" (%d)", e.Code())), true
}
