package sqltext

import (
	"fmt"
	"strings"
	"time"

	"github.com/refill-dev/refill"
)

// The few pieces every driver needs around its SQL and would otherwise
// write out again: the INSERT column list of a query job's output, the
// raw text bounds of a range of partitions, the partitions without
// duplicates.

// TargetColumns matches a query's output column names, as the engine
// reports them, to the table's columns as the engine matches names
// (MatchColumn), and renders them as an INSERT's column list in output
// order. A name that matches nothing is bad input naming the table's
// columns; on PostgreSQL, where an unquoted AS name folds to lower case,
// it says when quoting would have matched.
func (d Dialect) TargetColumns(table string, cols []refill.Column, names []string) (string, error) {
	quoted := make([]string, len(names))
	seen := map[string]bool{}
	for i, n := range names {
		c, ok := d.MatchColumn(cols, n)
		if !ok {
			msg := fmt.Sprintf("the query's output column %q is not a column of table %s (its columns are %s): name each output column after the column it fills (SELECT expr AS name)", n, table, ColumnNames(cols))
			if d.foldLower {
				for _, c := range cols {
					if strings.EqualFold(c.Name, n) {
						msg += fmt.Sprintf(`; PostgreSQL folds an unquoted AS name to lower case, so the column %s needs AS "%s"`, c.Name, c.Name)
						break
					}
				}
			}
			return "", refill.BadInputf("%s", msg)
		}
		key := c.Name
		if d.caseInsensitive {
			key = strings.ToLower(key)
		}
		if seen[key] {
			return "", refill.BadInputf("the query has two output columns named %s", c.Name)
		}
		seen[key] = true
		quoted[i] = QuoteIdent(c.Name)
	}
	return strings.Join(quoted, ", "), nil
}

// Named makes column names into columns, to look them up with Column.
func Named(names []string) []refill.Column {
	cols := make([]refill.Column, len(names))
	for i, n := range names {
		cols[i] = refill.Column{Name: n}
	}
	return cols
}

// DayBounds checks from and to as partition keys of grain g and returns
// text bounds [lo, hi) on a raw text column: from's day minus one to to's
// day plus two. Every text form of a time in the range starts with a date
// in [lo, hi), whatever its UTC offset, so the bounds never drop a row.
func DayBounds(g refill.Grain, from, to string) (lo, hi string, err error) {
	f, err := refill.PartitionTime(from, g)
	if err != nil {
		return "", "", err
	}
	t, err := refill.PartitionTime(to, g)
	if err != nil {
		return "", "", err
	}
	if f.After(t) {
		return "", "", refill.BadInputf("partition range %s..%s is backwards", from, to)
	}
	return f.AddDate(0, 0, -1).Format(time.DateOnly), t.Truncate(24*time.Hour).AddDate(0, 0, 2).Format(time.DateOnly), nil
}

// Unique returns partitions without duplicates, in their first order.
func Unique(partitions []string) []string {
	seen := make(map[string]bool, len(partitions))
	out := make([]string, 0, len(partitions))
	for _, p := range partitions {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}
