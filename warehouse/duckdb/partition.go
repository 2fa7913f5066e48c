//go:build duckdb

package duckdb

import (
	"fmt"
	"strings"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// filter selects the rows of a range of partitions: where is the predicate,
// with its arguments $1 onwards (args). key renders a row's partition; a
// grouped query groups by group, which is cheaper where it is the raw
// value (a date, a truncated timestamp), and renders each group's key with
// render.
type filter struct {
	key, group string
	render     func(group string) string
	where      string
	args       []any
}

// partitionFilter returns the filter for partitions [from, to] of t.
//
// A DATE, TIMESTAMP or TIMESTAMPTZ column is filtered on its raw value
// alone, exactly, which DuckDB's zone maps prune row groups by. A text
// column is filtered on the raw text a day wider than the range on each
// side (which no UTC offset can move a row across), then on the partition
// key itself.
func partitionFilter(t refill.TableRef, cols []refill.Column, from, to string) (filter, error) {
	return partitionFilterOf(t, cols, from, to, "")
}

// partitionFilterOf is partitionFilter on the rows of alias ("" for the
// table's own name).
func partitionFilterOf(t refill.TableRef, cols []refill.Column, from, to, alias string) (filter, error) {
	c, err := partitionColumn(t, cols)
	if err != nil {
		return filter{}, err
	}
	key, err := partitionKeyOf(t, c, alias)
	if err != nil {
		return filter{}, err
	}
	lo, hi, err := sqltext.DayBounds(t.Grain, from, to)
	if err != nil {
		return filter{}, err
	}
	col := qualified(alias, c.Name)
	f := filter{key: key, group: key, render: func(g string) string { return g }}
	typ, unit := rawType(c.Type), "day"
	if t.Grain == refill.GrainHour {
		unit = "hour"
	}
	if typ == "" {
		f.where = fmt.Sprintf("%[1]s >= $1 AND %[1]s < $2 AND %[2]s BETWEEN $3 AND $4", col, key)
		f.args = []any{lo, hi, from, to}
		return f, nil
	}
	start, _ := refill.PartitionTime(from, t.Grain)
	last, _ := refill.PartitionTime(to, t.Grain)
	end := last.AddDate(0, 0, 1)
	if t.Grain == refill.GrainHour {
		end = last.Add(time.Hour)
	}
	format := "%Y-%m-%d"
	if t.Grain == refill.GrainHour {
		format = "%Y-%m-%dT%H"
	}
	const ts = "2006-01-02 15:04:05+00"
	f.where = fmt.Sprintf("%[1]s >= CAST($1 AS %[2]s) AND %[1]s < CAST($2 AS %[2]s)", col, typ)
	f.args = []any{start.Format(ts), end.Format(ts)}
	switch typ {
	case "DATE":
		f.group = col
		f.render = func(g string) string { return fmt.Sprintf("strftime(%s, '%s')", g, format) }
		f.args = []any{start.Format(time.DateOnly), end.Format(time.DateOnly)}
	case "TIMESTAMPTZ":
		f.group = fmt.Sprintf("date_trunc('%s', %s)", unit, col)
		f.render = func(g string) string { return fmt.Sprintf("strftime(timezone('UTC', %s), '%s')", g, format) }
	default:
		f.group = fmt.Sprintf("date_trunc('%s', %s)", unit, col)
		f.render = func(g string) string { return fmt.Sprintf("strftime(%s, '%s')", g, format) }
		f.args = []any{start.Format(time.DateTime), end.Format(time.DateTime)}
	}
	return f, nil
}

// rawType is the type a column of type typ is filtered as, raw: "" for
// text, which is filtered by its key.
func rawType(typ string) string {
	switch {
	case typ == "date":
		return "DATE"
	case typ == "timestamp with time zone":
		return "TIMESTAMPTZ"
	case typ == "timestamp" || strings.HasPrefix(typ, "timestamp(") || typ == "timestamp_s" || typ == "timestamp_ms" || typ == "timestamp_ns":
		return "TIMESTAMP"
	}
	return ""
}

// next is the placeholder that follows f's arguments.
func (f filter) next(n int) string { return fmt.Sprintf("$%d", len(f.args)+n) }

func qualified(alias, name string) string {
	if alias == "" {
		return sqltext.QuoteIdent(name)
	}
	return alias + "." + sqltext.QuoteIdent(name)
}

// partitionColumn finds t's partition column among cols.
func partitionColumn(t refill.TableRef, cols []refill.Column) (refill.Column, error) {
	c, ok := d.Column(cols, t.Column)
	if !ok {
		return c, d.NoColumn(t.Table, t.Column, "the partition column", cols)
	}
	return c, nil
}

// partitionKey returns the SQL expression that renders t's partition column
// as a partition key of t's grain.
func partitionKey(t refill.TableRef, cols []refill.Column) (string, error) {
	c, err := partitionColumn(t, cols)
	if err != nil {
		return "", err
	}
	return partitionKeyOf(t, c, "")
}

// partitionKeyOf renders column c of alias's rows as a key of t's grain.
// Dates and timestamps are formatted (a TIMESTAMPTZ in UTC); text in key
// form is cut, not parsed, and any other text is read as a timestamp, NULL
// (no partition) when it is not one.
func partitionKeyOf(t refill.TableRef, c refill.Column, alias string) (string, error) {
	col := qualified(alias, c.Name)
	format, keyLen := "%Y-%m-%d", 10
	switch t.Grain {
	case refill.GrainDay, "":
	case refill.GrainHour:
		if c.Type == "date" {
			return "", refill.BadInputf("partition column %s.%s is a date, which has no hours; use grain day or a timestamp column", t.Table, t.Column)
		}
		format, keyLen = "%Y-%m-%dT%H", 13
	default:
		return "", refill.BadInputf("dataset table %s has unknown partition grain %q (want day or hour)", t.Table, t.Grain)
	}
	switch {
	case c.Type == "date" || c.Type == "timestamp" || strings.HasPrefix(c.Type, "timestamp(") || c.Type == "timestamp_s" || c.Type == "timestamp_ms" || c.Type == "timestamp_ns":
		return fmt.Sprintf("strftime(%s, '%s')", col, format), nil
	case c.Type == "timestamp with time zone":
		return fmt.Sprintf("strftime(timezone('UTC', %s), '%s')", col, format), nil
	case c.Type == "varchar":
		if keyLen == 10 {
			return fmt.Sprintf("CASE length(%[1]s) WHEN 10 THEN %[1]s WHEN 13 THEN left(%[1]s, 10) ELSE strftime(timezone('UTC', TRY_CAST(%[1]s AS TIMESTAMPTZ)), '%[2]s') END", col, format), nil
		}
		return fmt.Sprintf("CASE length(%[1]s) WHEN 13 THEN %[1]s ELSE strftime(timezone('UTC', TRY_CAST(%[1]s AS TIMESTAMPTZ)), '%[2]s') END", col, format), nil
	}
	return "", refill.BadInputf("partition column %s.%s is %s; refill reads DuckDB partition columns as DATE, TIMESTAMP, TIMESTAMPTZ or text", t.Table, t.Column, c.Type)
}
