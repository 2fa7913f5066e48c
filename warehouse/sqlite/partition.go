package sqlite

import (
	"context"
	"errors"
	"fmt"
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
// form refill reads. refill creates them before it installs the job's
// authorizer, which then refuses the job any DDL that could drop them, and
// drops them as soon as the job's text is done, inside the transaction: a
// rollback takes their creation with it, and a connection on which they
// might have been left is closed rather than pooled.
//
// SQLite fires delete triggers for rows that a REPLACE conflict clause
// removes (INSERT OR REPLACE of a key held by another partition's row)
// only with recursive_triggers on, so refill turns it on for the job and
// back afterwards. A trigger of the warehouse owner's that fires itself
// again then recurses, up to SQLite's limit, where before it did not.

// fenceNames are the partition triggers, in the temp schema.
var fenceNames = []string{"refill_partition_insert", "refill_partition_update", "refill_partition_delete"}

// outsideMarker starts the message the partition triggers raise; the
// offending row's partition column follows it.
const outsideMarker = "refill: a row outside the partition: "

// fence returns the statements that create the partition triggers on t's
// table for partition, whose columns are cols.
func fence(t refill.TableRef, cols []refill.Column, partition string) ([]string, error) {
	c, err := partitionColumn(t, cols)
	if err != nil {
		return nil, err
	}
	inside := func(row string) (string, error) {
		col := row + "." + sqltext.QuoteIdent(c.Name)
		key, err := partitionKeyOf(t, cols, row)
		if err != nil {
			return "", err
		}
		lo, hi, err := dayBounds(t.Grain, partition, partition)
		if err != nil {
			return "", err
		}
		// As partitionFilter's predicate, with literals for parameters
		// (a trigger takes none); IS 1 makes NULL outside.
		return fmt.Sprintf("(%[1]s >= %[2]s AND %[1]s < %[3]s AND %[4]s = %[5]s) IS 1", col, literal(lo), literal(hi), key, literal(partition)), nil
	}
	newIn, err := inside("NEW")
	if err != nil {
		return nil, err
	}
	oldIn, err := inside("OLD")
	if err != nil {
		return nil, err
	}
	table := sqltext.SQLite.QuoteName(t.Table)
	if schema, _ := splitTable(t.Table); schema == "" {
		table = "main." + table
	}
	value := func(row string) string {
		return fmt.Sprintf("coalesce(CAST(%s.%s AS TEXT), 'NULL')", row, sqltext.QuoteIdent(c.Name))
	}
	raise := func(v string) string {
		return fmt.Sprintf("BEGIN SELECT RAISE(ABORT, %s || %s); END", literal(outsideMarker), v)
	}
	return []string{
		fmt.Sprintf("CREATE TEMP TRIGGER %s BEFORE INSERT ON %s WHEN NOT %s %s", fenceNames[0], table, newIn, raise(value("NEW"))),
		fmt.Sprintf("CREATE TEMP TRIGGER %s BEFORE UPDATE ON %s WHEN NOT %s OR NOT %s %s", fenceNames[1], table, oldIn, newIn,
			raise(fmt.Sprintf("CASE WHEN %s THEN %s ELSE %s END", newIn, value("OLD"), value("NEW")))),
		fmt.Sprintf("CREATE TEMP TRIGGER %s BEFORE DELETE ON %s WHEN NOT %s %s", fenceNames[2], table, oldIn, raise(value("OLD"))),
	}, nil
}

// literal quotes s as an SQL string literal.
func literal(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// raiseFence creates the partition triggers (fence's statements) and turns
// recursive_triggers on. It returns what lowerFence puts back.
func (t *tx) raiseFence(ctx context.Context, create []string) (recursive int, err error) {
	if err := t.conn.QueryRowContext(ctx, "PRAGMA recursive_triggers").Scan(&recursive); err != nil {
		return 0, fmt.Errorf("partition guard: %w", err)
	}
	for _, stmt := range create {
		if _, err := t.conn.ExecContext(ctx, stmt); err != nil {
			t.tainted = true // the triggers made so far are dropped with the connection
			return 0, fmt.Errorf("partition guard: %w", err)
		}
	}
	if _, err := t.conn.ExecContext(ctx, "PRAGMA recursive_triggers = ON"); err != nil {
		t.tainted = true
		return 0, fmt.Errorf("partition guard: %w", err)
	}
	return recursive, nil
}

// lowerFence drops the partition triggers and puts recursive_triggers back
// as it was. If it cannot, or the transaction ended early (its hooks turn
// the drop into a rollback), the connection is marked tainted, so that it
// is closed instead of going back to the pool with the triggers or the
// setting on it.
func (t *tx) lowerFence(ctx context.Context, recursive int) error {
	if t.ended {
		t.tainted = true
		return nil
	}
	ctx = context.WithoutCancel(ctx)
	var errs []error
	for _, name := range fenceNames {
		if _, err := t.conn.ExecContext(ctx, "DROP TRIGGER IF EXISTS temp."+name); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := t.conn.ExecContext(ctx, fmt.Sprintf("PRAGMA recursive_triggers = %d", recursive)); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		t.tainted = true
		return fmt.Errorf("partition guard: %w", err)
	}
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
