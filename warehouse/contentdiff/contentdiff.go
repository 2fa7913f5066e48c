// Package contentdiff compares a partition as it is with the partition as
// a rehearsal rebuilt it, in the warehouse: the drivers keep a copy of the
// partition before the build, and this package writes the statements that
// compare the copy with what the build left, for either engine. No row is
// pulled into refill except the few of a sample.
//
// With a key, rows are paired by it in one FULL JOIN that also counts,
// for each numeric column, the rows whose value changed and the sums
// before and after. The join shows whether the key held: a key shared by
// several rows on both sides multiplies the rows it pairs, and a NULL key
// pairs with nothing, so when the join's row counts differ from the
// sides' or a key is NULL, the rows are compared whole instead, by their
// hash (as without a key), and the diff's note says why.
package contentdiff

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// Dialect is what differs between the engines.
type Dialect struct {
	// Text renders an expression's value as text.
	Text func(expr string) string
	// Distinct is the NULL-safe "differs from" operator.
	Distinct string
	// Numeric reports whether a column holds numbers worth summing.
	Numeric func(c refill.Column) bool
	// Names matches a configured column name to the table's columns.
	Names sqltext.Dialect
	// IndexKept returns the statements that index the kept copy (old, a
	// quoted name) by the key's columns (quoted), and whatever else helps
	// the engine join on them (statistics): without them SQLite pairs the
	// rows by a nested loop, one partition scan per row.
	IndexKept func(old string, cols []string) []string
	// AfterJoin are statements that undo for the rest of the comparison
	// what IndexKept set for the join (a planner setting).
	AfterJoin []string
	// Number renders a sum as text, without a fixed scale's trailing
	// zeros where the engine prints them (DuckDB's DECIMAL); nil is Text.
	Number func(expr string) string
	// RowMark names a value every row of the kept copy has and no missing
	// row of an outer join does (a system column such as a row id), given
	// the table's columns, which it must not be one of.
	RowMark func(cols []refill.Column) string
}

// number renders a numeric sum as text.
func (d Dialect) number(expr string) string {
	if d.Number != nil {
		return d.Number(expr)
	}
	return d.Text(expr)
}

// Querier runs one statement and returns its rows, every value as text
// (nil for NULL).
type Querier interface {
	Rows(ctx context.Context, q string, args ...any) ([][]*string, error)
}

// Input is one partition to compare.
type Input struct {
	// Old is the copy of the partition before the build (a quoted name).
	Old string
	// New is the table the build wrote (quoted) and Where selects the
	// partition in it, with Args (numbered placeholders, which every
	// statement may use more than once).
	New, Where string
	Args       []any
	// Columns are the table's, in table order; Partition is the partition
	// column among them.
	Columns   []refill.Column
	Partition string
	// RowHash hashes a whole row, naming the columns unqualified.
	RowHash string
	// AsText compares and pairs values by their text (for types without
	// an equality, such as PostgreSQL's json).
	AsText bool
	Spec   refill.DiffSpec
}

// MaxValue is how much of one value a sample shows, in characters.
const MaxValue = 200

// Compare measures what changed between in.Old and the partition in
// in.New.
func Compare(ctx context.Context, q Querier, d Dialect, in Input) (*refill.PartitionDiff, error) {
	c, err := newComparison(d, in)
	if err != nil {
		return nil, err
	}
	if len(c.key) > 0 {
		diff, why, err := c.keyed(ctx, q)
		if err != nil {
			return nil, err
		}
		if why == "" {
			return diff, nil
		}
		diff, err = c.whole(ctx, q)
		if err != nil {
			return nil, err
		}
		diff.Note = why + ": rows were compared whole, by their hash"
		return diff, nil
	}
	return c.whole(ctx, q)
}

type comparison struct {
	d  Dialect
	in Input
	// key are the key's columns; other the columns compared for change
	// (neither key nor partition); numeric those of other to sum.
	key, other, numeric []refill.Column
	// shown are the columns a sample shows.
	shown   []refill.Column
	private map[string]bool
	mark    string // a column name no column has: "this side has the row"
	omark   string // the kept copy's row mark (Dialect.RowMark), unquoted
	sample  int
}

func newComparison(d Dialect, in Input) (*comparison, error) {
	c := &comparison{d: d, in: in, private: map[string]bool{}, sample: in.Spec.Sample}
	if c.sample <= 0 {
		c.sample = refill.DiffSample
	}
	inKey := map[string]bool{}
	for _, name := range in.Spec.Key {
		col, ok := d.Names.Column(in.Columns, name)
		if !ok {
			return nil, fmt.Errorf("the key column %s is not a column of the table (its columns are %s)", name, sqltext.ColumnNames(in.Columns))
		}
		if !inKey[col.Name] {
			c.key = append(c.key, col)
		}
		inKey[col.Name] = true
	}
	for _, name := range in.Spec.Private {
		if col, ok := d.Names.Column(in.Columns, name); ok {
			c.private[col.Name] = true
		}
	}
	taken := map[string]bool{}
	for _, col := range in.Columns {
		taken[strings.ToLower(col.Name)] = true
		if col.Name == in.Partition {
			continue
		}
		if !c.private[col.Name] {
			c.shown = append(c.shown, col)
		}
		if inKey[col.Name] {
			continue
		}
		c.other = append(c.other, col)
		if d.Numeric(col) {
			c.numeric = append(c.numeric, col)
		}
	}
	c.mark = "refill_side"
	for taken[c.mark] {
		c.mark += "_"
	}
	c.omark = d.RowMark(in.Columns)
	return c, nil
}

func q(name string) string { return sqltext.QuoteIdent(name) }

// val is a column of one side of the join, as compared.
func (c *comparison) val(side string, col refill.Column) string {
	e := side + "." + q(col.Name)
	if c.in.AsText {
		return c.d.Text(e)
	}
	return e
}

// join is the FULL JOIN of the two sides on the key: the new partition,
// marked, on the left; the kept copy, indexed by the key, on the right,
// where SQLite looks each row up.
func (c *comparison) join() string {
	on := make([]string, len(c.key))
	for i, k := range c.key {
		on[i] = c.val("o", k) + " = " + c.val("n", k)
	}
	return fmt.Sprintf("(SELECT 1 AS %[1]s, * FROM %[2]s WHERE %[3]s) AS n FULL JOIN %[4]s AS o ON %[5]s",
		q(c.mark), c.in.New, c.in.Where, c.in.Old, strings.Join(on, " AND "))
}

// has is true where side has the row: the new side by its mark, the kept
// copy by its row mark.
func (c *comparison) has(side string) string {
	if side == "n" {
		return "n." + q(c.mark) + " = 1"
	}
	return "o." + c.omark + " IS NOT NULL"
}

// lacks is true where side does not have the row.
func (c *comparison) lacks(side string) string {
	if side == "n" {
		return "n." + q(c.mark) + " IS NULL"
	}
	return "o." + c.omark + " IS NULL"
}

// differs is true for a paired row some compared value of which changed.
func (c *comparison) differs(cols []refill.Column) string {
	if len(cols) == 0 {
		return "1 = 0"
	}
	parts := make([]string, len(cols))
	for i, col := range cols {
		parts[i] = fmt.Sprintf("%s %s %s", c.val("o", col), c.d.Distinct, c.val("n", col))
	}
	return "(" + strings.Join(parts, " OR ") + ")"
}

func (c *comparison) count(cond string) string {
	return c.d.Text(fmt.Sprintf("coalesce(sum(CASE WHEN %s THEN 1 ELSE 0 END), 0)", cond))
}

// keyed pairs rows by the key. why is not "" when the key did not hold,
// and says how. It is one statement (two with the index, and one more for
// the sample when something changed): a plan diffs thousands of small
// partitions, where each statement's cost is most of it.
func (c *comparison) keyed(ctx context.Context, db Querier) (diff *refill.PartitionDiff, why string, err error) {
	names := columnNames(c.key)
	if c.omark == "" {
		return nil, "the table's columns take every name of the kept copy's row id", nil
	}
	if c.d.IndexKept != nil && !c.in.AsText {
		cols := make([]string, len(c.key))
		for i, k := range c.key {
			cols[i] = q(k.Name)
		}
		for _, stmt := range c.d.IndexKept(c.in.Old, cols) {
			if _, err := db.Rows(ctx, stmt); err != nil {
				return nil, "", err
			}
		}
		defer func() {
			for _, stmt := range c.d.AfterJoin {
				if _, e := db.Rows(ctx, stmt); e != nil && err == nil {
					err = e
				}
			}
		}()
	}
	// With the pairing, the sides' rows, and those with a NULL key, which
	// pair with nothing (so the join meets each of them once, on its own):
	// a key that is NULL anywhere is no key, and the counts the join made
	// with it are thrown away.
	anyNull := func(side string) string {
		nulls := make([]string, len(c.key))
		for i, k := range c.key {
			nulls[i] = side + "." + q(k.Name) + " IS NULL"
		}
		return "(" + strings.Join(nulls, " OR ") + ")"
	}
	both := c.has("o") + " AND " + c.has("n")
	sel := []string{
		c.d.Text(fmt.Sprintf("(SELECT count(*) FROM %s)", c.in.Old)),
		c.d.Text(fmt.Sprintf("(SELECT count(*) FROM %s WHERE %s)", c.in.New, c.in.Where)),
		c.count(c.has("o") + " AND " + anyNull("o")),
		c.count(c.has("n") + " AND " + anyNull("n")),
		c.d.Text("count(o." + c.omark + ")"), c.d.Text("count(n." + q(c.mark) + ")"),
		c.count(c.lacks("n")), c.count(c.lacks("o")),
		c.count(both + " AND " + c.differs(c.other)),
	}
	const fixed = 9
	for _, col := range c.numeric {
		sel = append(sel, c.count(both+" AND "+c.differs([]refill.Column{col})))
		sel = append(sel, c.d.number("sum(o."+q(col.Name)+")"), c.d.number("sum(n."+q(col.Name)+")"))
	}
	rows, err := db.Rows(ctx, "SELECT "+strings.Join(sel, ", ")+" FROM "+c.join(), c.in.Args...)
	if err != nil {
		return nil, "", err
	}

	r, err := one(rows, len(sel))
	if err != nil {
		return nil, "", err
	}
	n := make([]int64, fixed)
	for i := range n {
		if n[i], err = integer(r[i]); err != nil {
			return nil, "", err
		}
	}
	oldRows, newRows, oldNull, newNull := n[0], n[1], n[2], n[3]
	joinedOld, joinedNew, onlyOld, onlyNew, changed := n[4], n[5], n[6], n[7], n[8]
	switch {
	case oldNull+newNull > 0:
		return nil, fmt.Sprintf("the key (%s) is NULL in %d row(s)", names, oldNull+newNull), nil
	case joinedOld != oldRows || joinedNew != newRows:
		return nil, fmt.Sprintf("the key (%s) is shared by several rows", names), nil
	}
	paired := oldRows - onlyOld
	diff = &refill.PartitionDiff{OnlyOld: onlyOld, OnlyNew: onlyNew, Changed: &changed, Unchanged: paired - changed, Key: keyNames(c.key)}
	for i, col := range c.numeric {
		base := fixed + 3*i
		moved, err := integer(r[base])
		if err != nil {
			return nil, "", err
		}
		cd := refill.ColumnDiff{Changed: &moved}
		if !c.private[col.Name] {
			cd.OldSum, cd.NewSum = refill.SumNumber(r[base+1]), refill.SumNumber(r[base+2])
		}
		if diff.Columns == nil {
			diff.Columns = map[string]refill.ColumnDiff{}
		}
		diff.Columns[col.Name] = cd
	}
	if changed+onlyOld+onlyNew > 0 {
		if err := c.keyedSample(ctx, db, diff); err != nil {
			return nil, "", err
		}
	}
	return diff, "", nil
}

// keyedSample shows changed rows, then removed, then added, each kind in
// key order. Each kind is asked for only as many rows as it has and the
// sample has room for, in no order: the engine stops at the last one it
// needs instead of joining and sorting the whole partition again.
func (c *comparison) keyedSample(ctx context.Context, db Querier, diff *refill.PartitionDiff) error {
	if len(c.shown) == 0 {
		return nil
	}
	kinds := []struct {
		n         int64
		cond      string
		old, new  bool
		keySource string
	}{
		{*diff.Changed, c.has("o") + " AND " + c.has("n") + " AND " + c.differs(c.other), true, true, "o"},
		{diff.OnlyOld, c.lacks("n"), true, false, "o"},
		{diff.OnlyNew, c.lacks("o"), false, true, "n"},
	}
	sel := make([]string, 0, 2*len(c.shown))
	for _, side := range []string{"o", "n"} {
		for _, col := range c.shown {
			sel = append(sel, c.d.Text(side+"."+q(col.Name)))
		}
	}
	w := len(c.shown)
	for _, k := range kinds {
		left := int64(c.sample - len(diff.Sample))
		if k.n == 0 || left <= 0 {
			continue
		}
		rows, err := db.Rows(ctx, fmt.Sprintf("SELECT %s FROM %s WHERE %s LIMIT %d",
			strings.Join(sel, ", "), c.join(), k.cond, min(left, k.n)), c.in.Args...)
		if err != nil {
			return err
		}
		var got []refill.DiffRow
		for _, r := range rows {
			if len(r) != 2*w {
				return fmt.Errorf("the sample returned %d values, not %d", len(r), 2*w)
			}
			var row refill.DiffRow
			if k.old {
				row.Old = c.values(r[:w])
			}
			if k.new {
				row.New = c.values(r[w:])
			}
			got = append(got, row)
		}
		slices.SortStableFunc(got, func(a, b refill.DiffRow) int { return c.compareKeys(a, b) })
		diff.Sample = append(diff.Sample, got...)
	}
	return nil
}

// compareKeys orders two sample rows by their keys, as numbers where both
// are, else as text.
func (c *comparison) compareKeys(a, b refill.DiffRow) int {
	side := func(r refill.DiffRow) map[string]*string {
		if r.New != nil {
			return r.New
		}
		return r.Old
	}
	ra, rb := side(a), side(b)
	for _, k := range c.key {
		va, vb := ra[k.Name], rb[k.Name]
		switch {
		case va == nil && vb == nil:
			continue
		case va == nil:
			return -1
		case vb == nil:
			return 1
		}
		fa, ea := strconv.ParseFloat(*va, 64)
		fb, eb := strconv.ParseFloat(*vb, 64)
		if ea == nil && eb == nil && fa != fb {
			if fa < fb {
				return -1
			}
			return 1
		}
		if r := strings.Compare(*va, *vb); r != 0 {
			return r
		}
	}
	return 0
}

// whole compares rows whole, by hash: a row in the old partition more
// often than in the new is removed, the other way added. It is one
// statement: the hashes are grouped once (g), and the first row it returns
// holds the counts and the sums, the rest the sample, removed rows before
// added ones, asked for in no order, so that the engine stops at the last
// it needs, and sorted here. The sample's scans run only when some hash
// differs.
func (c *comparison) whole(ctx context.Context, db Querier) (*refill.PartitionDiff, error) {
	grouped := fmt.Sprintf(`SELECT u.h, sum(u.o) AS o, sum(u.n) AS n FROM (SELECT %[1]s AS h, 1 AS o, 0 AS n FROM %[2]s UNION ALL SELECT %[1]s AS h, 0 AS o, 1 AS n FROM %[3]s WHERE %[4]s) AS u GROUP BY u.h`,
		c.in.RowHash, c.in.Old, c.in.New, c.in.Where)
	sum := func(e string) string { return c.d.Text("coalesce(sum(" + e + "), 0)") }
	var sums []refill.Column
	for _, col := range c.numeric {
		if !c.private[col.Name] {
			sums = append(sums, col)
		}
	}
	head := []string{"0", "a.only_old", "a.only_new", "a.unchanged"}
	from := fmt.Sprintf("(SELECT %s AS only_old, %s AS only_new, %s AS unchanged FROM g) AS a",
		sum("CASE WHEN g.o > g.n THEN g.o - g.n ELSE 0 END"), sum("CASE WHEN g.n > g.o THEN g.n - g.o ELSE 0 END"),
		sum("CASE WHEN g.o < g.n THEN g.o ELSE g.n END"))
	if len(sums) > 0 {
		side := func(alias, table, where string) string {
			cols := make([]string, len(sums))
			for i, col := range sums {
				cols[i] = fmt.Sprintf("%s AS s%d", c.d.number("sum("+q(col.Name)+")"), i)
				head = append(head, fmt.Sprintf("%s.s%d", alias, i))
			}
			return fmt.Sprintf("(SELECT %s FROM %s WHERE %s) AS %s", strings.Join(cols, ", "), table, where, alias)
		}
		from += ", " + side("so", c.in.Old, "1 = 1") + ", " + side("sn", c.in.New, c.in.Where)
	}
	counts := len(head)
	shown := make([]string, len(c.shown))
	for i, col := range c.shown {
		shown[i] = c.d.Text(q(col.Name))
	}
	nulls := func(n int) []string { return slices.Repeat([]string{"NULL"}, n) }
	top := strings.Join(append(head, nulls(len(shown))...), ", ")
	text := fmt.Sprintf("WITH g AS (%s) SELECT %s FROM %s", grouped, top, from)
	if len(shown) > 0 {
		pad := strings.Join(nulls(counts-1), ", ")
		cols := strings.Join(shown, ", ")
		text += fmt.Sprintf(`
UNION ALL SELECT * FROM (SELECT 1, %[1]s, %[2]s FROM %[3]s WHERE EXISTS (SELECT 1 FROM g WHERE g.o > g.n) AND %[4]s IN (SELECT g.h FROM g WHERE g.o > g.n)
UNION ALL SELECT 2, %[1]s, %[2]s FROM %[5]s WHERE EXISTS (SELECT 1 FROM g WHERE g.n > g.o) AND (%[6]s) AND %[4]s IN (SELECT g.h FROM g WHERE g.n > g.o)
LIMIT %[7]d) AS s`, pad, cols, c.in.Old, c.in.RowHash, c.in.New, c.in.Where, c.sample)
	}
	rows, err := db.Rows(ctx, text, c.in.Args...)
	if err != nil {
		return nil, err
	}
	width := counts + len(shown)
	var r []*string
	var sample [][]*string
	for _, row := range rows {
		if len(row) != width {
			return nil, fmt.Errorf("the comparison returned %d values, not %d", len(row), width)
		}
		if k, _ := integer(row[0]); k == 0 && r == nil {
			r = row[1:counts]
		} else {
			sample = append(sample, append([]*string{row[0]}, row[counts:]...))
		}
	}
	if r == nil {
		return nil, fmt.Errorf("the comparison returned no counts")
	}
	diff := &refill.PartitionDiff{Key: []string{}}
	for i, p := range []*int64{&diff.OnlyOld, &diff.OnlyNew, &diff.Unchanged} {
		if *p, err = integer(r[i]); err != nil {
			return nil, err
		}
	}
	if len(sums) > 0 {
		diff.Columns = map[string]refill.ColumnDiff{}
		for i, col := range sums {
			diff.Columns[col.Name] = refill.ColumnDiff{OldSum: refill.SumNumber(r[3+i]), NewSum: refill.SumNumber(r[3+len(sums)+i])}
		}
	}
	slices.SortStableFunc(sample, func(a, b []*string) int {
		for i := range a {
			switch {
			case a[i] == nil && b[i] == nil:
				continue
			case a[i] == nil:
				return -1
			case b[i] == nil:
				return 1
			}
			if r := strings.Compare(*a[i], *b[i]); r != 0 {
				return r
			}
		}
		return 0
	})
	for _, r := range sample {
		if k, _ := integer(r[0]); k == 1 {
			diff.Sample = append(diff.Sample, refill.DiffRow{Old: c.values(r[1:])})
		} else {
			diff.Sample = append(diff.Sample, refill.DiffRow{New: c.values(r[1:])})
		}
	}
	return diff, nil
}

// values names a sample row's values by column, clipped to MaxValue
// characters of valid UTF-8.
func (c *comparison) values(r []*string) map[string]*string {
	out := make(map[string]*string, len(c.shown))
	for i, col := range c.shown {
		if i >= len(r) || r[i] == nil {
			out[col.Name] = nil
			continue
		}
		v := strings.ToValidUTF8(*r[i], "\uFFFD")
		if utf8.RuneCountInString(v) > MaxValue {
			v = string([]rune(v)[:MaxValue]) + "…"
		}
		out[col.Name] = &v
	}
	return out
}

func one(rows [][]*string, n int) ([]*string, error) {
	if len(rows) != 1 || len(rows[0]) != n {
		return nil, fmt.Errorf("the comparison returned %d rows, not one of %d values", len(rows), n)
	}
	return rows[0], nil
}

var errNull = errors.New("a count came back NULL")

func integer(s *string) (int64, error) {
	if s == nil {
		return 0, errNull
	}
	return strconv.ParseInt(strings.TrimSpace(*s), 10, 64)
}

func keyNames(cols []refill.Column) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.Name
	}
	return out
}

func columnNames(cols []refill.Column) string { return strings.Join(keyNames(cols), ", ") }
