package refill

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"
)

// DiffSample is how many rows a content diff shows side by side, at most.
const DiffSample = 5

// DefaultDiffBudget is plan.diff_budget when the config does not say: the
// rows a plan's content diffs may compare in all.
const DefaultDiffBudget = 5_000_000

// DiffSpec is how one dataset's partitions are compared before and after
// a rehearsal rebuilds them.
type DiffSpec struct {
	// Key names the columns that identify a row within a partition: rows
	// are paired by it. Empty compares whole rows by their hash.
	Key []string
	// Private columns are never shown in a sample, and their sums are not
	// given.
	Private []string
	// Sample is how many rows to show (DiffSample when 0).
	Sample int
}

// PartitionDiff is what a rebuild changes in one partition, measured in
// the warehouse by comparing the partition as it is with the partition
// as the rehearsal built it. Skipped says why there is no diff.
type PartitionDiff struct {
	Skipped string `json:"skipped,omitempty"`
	// OnlyOld counts rows the rebuild removes, OnlyNew rows it adds.
	OnlyOld int64 `json:"only_old"`
	OnlyNew int64 `json:"only_new"`
	// Changed counts rows whose key stays and whose other values change;
	// nil when rows are compared whole (no key), where a changed row is
	// one only in the old and one only in the new.
	Changed   *int64 `json:"changed,omitempty"`
	Unchanged int64  `json:"unchanged"`
	// Key is the key rows were paired by, empty when compared whole.
	Key []string `json:"key"`
	// Columns holds the numeric columns outside the key: their sums
	// before and after (nil for a private column), and how many paired
	// rows' values changed (nil without a key).
	Columns map[string]ColumnDiff `json:"columns,omitempty"`
	// Sample shows up to DiffSample rows that change: changed rows first,
	// then removed, then added; values as text, private columns left out.
	Sample []DiffRow `json:"sample,omitempty"`
	// Note says how the comparison was made when not as configured (a key
	// that is not unique, say).
	Note string `json:"note,omitempty"`
}

// ColumnDiff is one numeric column's change across a partition.
type ColumnDiff struct {
	OldSum  *json.Number `json:"old_sum,omitempty"`
	NewSum  *json.Number `json:"new_sum,omitempty"`
	Changed *int64       `json:"changed,omitempty"`
}

// DiffRow is one row of a sample: Old is nil for a row the rebuild adds,
// New for one it removes. Values are the warehouse's text for them, nil
// for NULL.
type DiffRow struct {
	Old map[string]*string `json:"old,omitempty"`
	New map[string]*string `json:"new,omitempty"`
}

// MarshalJSON writes a skipped diff as {"skipped": "why"} alone.
func (d PartitionDiff) MarshalJSON() ([]byte, error) {
	if d.Skipped != "" {
		return json.Marshal(struct {
			Skipped string `json:"skipped"`
		}{d.Skipped})
	}
	type plain PartitionDiff
	if d.Key == nil {
		d.Key = []string{}
	}
	return json.Marshal(plain(d))
}

// SkippedDiff is a diff that was not made, and why.
func SkippedDiff(why string) *PartitionDiff { return &PartitionDiff{Skipped: why} }

// Changes reports whether the diff found any row the rebuild changes.
func (d *PartitionDiff) Changes() bool {
	return d != nil && d.Skipped == "" && (d.OnlyOld > 0 || d.OnlyNew > 0 || d.Changed != nil && *d.Changed > 0)
}

// Compared counts the rows the diff compared: the partition's rows before
// and after.
func (d *PartitionDiff) Compared() int64 {
	if d == nil || d.Skipped != "" {
		return 0
	}
	both := d.Unchanged
	if d.Changed != nil {
		both += *d.Changed
	}
	return 2*both + d.OnlyOld + d.OnlyNew
}

// SumNumber makes a warehouse's sum, as text, into a JSON number, or nil
// when it is none (NULL, NaN, Infinity, a currency).
func SumNumber(text *string) *json.Number {
	if text == nil {
		return nil
	}
	s := strings.TrimSpace(*text)
	if s == "" || !json.Valid([]byte(s)) {
		return nil
	}
	var f json.Number
	if err := json.Unmarshal([]byte(s), &f); err != nil {
		return nil
	}
	return &f
}

// Summary says the change in words for one partition, leading with the
// count of changed rows and the column that moved most: "5 rows changed,
// amount 0 → 41,230.50". It is "" for a diff that found no change or was
// skipped.
func (d *PartitionDiff) Summary() string {
	if !d.Changes() {
		return ""
	}
	var parts []string
	if d.Changed != nil && *d.Changed > 0 {
		parts = append(parts, plural(*d.Changed, "row")+" changed")
	}
	if d.OnlyOld > 0 {
		parts = append(parts, plural(d.OnlyOld, "row")+" removed")
	}
	if d.OnlyNew > 0 {
		parts = append(parts, plural(d.OnlyNew, "row")+" added")
	}
	for _, name := range d.MovedColumns() {
		c := d.Columns[name]
		if c.OldSum != nil && c.NewSum != nil {
			parts = append(parts, fmt.Sprintf("%s %s → %s", name, Readable(*c.OldSum), Readable(*c.NewSum)))
		} else if c.Changed != nil {
			parts = append(parts, fmt.Sprintf("%s changed in %s", name, plural(*c.Changed, "row")))
		}
		break // the first moved column leads; the rest are in the JSON and the page
	}
	return strings.Join(parts, ", ")
}

// MovedColumns lists, sorted, the numeric columns whose sum or values
// changed.
func (d *PartitionDiff) MovedColumns() []string {
	var out []string
	for name, c := range d.Columns {
		moved := c.Changed != nil && *c.Changed > 0
		if c.OldSum != nil && c.NewSum != nil && c.OldSum.String() != c.NewSum.String() {
			moved = true
		}
		if moved {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func plural(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return humanize.Comma(n) + " " + what + "s"
}

// Readable writes a warehouse's number with commas in its whole part and
// its decimals as the warehouse wrote them, rounded to six when it wrote
// more: "41230.50" reads "41,230.50", "426.70000000000005" "426.7".
// Exponents are left as they are.
func Readable(n json.Number) string {
	s := n.String()
	if strings.ContainsAny(s, "eE") {
		return s
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if len(frac) > 6 {
		// A float's sum carries its noise (426.70000000000005): rounded
		// to six decimals, trailing zeros dropped.
		if f, err := strconv.ParseFloat("0."+frac, 64); err == nil {
			r := strconv.FormatFloat(f, 'f', 6, 64)
			if strings.HasPrefix(r, "1") { // .9999996 rounds up into the whole part
				return Readable(json.Number(roundUp(n.String())))
			}
			frac = strings.TrimRight(strings.TrimPrefix(r, "0."), "0")
		}
	}
	if frac != "" {
		b.WriteString("." + frac)
	}
	return b.String()
}

// roundUp rounds a decimal's text to six decimals when they round up into
// its whole part: "1.9999999" is "2".
func roundUp(s string) string {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return s
	}
	return strconv.FormatFloat(f, 'f', 0, 64)
}

// DatasetChange is what a plan's content diffs found for one step, summed
// over its partitions: what the approver reads first.
type DatasetChange struct {
	Dataset string
	// View is set for a changed view: not rebuilt, but read before and
	// after the rehearsal rebuilt what it reads.
	View bool
	// Partitions is the step's count; Changed, Unchanged and Skipped
	// divide it by what their diffs found.
	Partitions, Changed, Unchanged, Skipped int
	// Rows removed, added and changed (by key) over the diffed partitions.
	OnlyOld, OnlyNew, RowsChanged int64
	// Moved lists the numeric columns whose sum moved, with their sums
	// before and after over the diffed partitions ("" where a partition
	// gave none: a private column).
	Moved []ColumnMove
	// First is the first changed partition, and its Summary.
	First, FirstSummary string
	// Why lists, once each, the reasons partitions were not diffed.
	Why []string
}

// ColumnMove is one column's sum over a step's diffed partitions.
type ColumnMove struct {
	Column   string
	Old, New string
}

// Changes sums the plan's content diffs step by step, in plan order, and
// then the changed views' (marked View). A plan made before content diffs
// has none and gives nil.
func (p *Plan) Changes() []DatasetChange {
	var out []DatasetChange
	any := false
	for _, st := range p.Steps {
		parts := make([]ViewPartition, len(st.Partitions))
		for i, pp := range st.Partitions {
			parts[i] = ViewPartition{Partition: pp.Partition, Diff: pp.Diff}
		}
		c, diffed := changeOf(st.Dataset, parts)
		any = any || diffed
		out = append(out, c)
	}
	for _, v := range p.Changed {
		switch {
		case v.Diff != nil:
			any = true
			why := v.Diff.Skipped
			if why == "" {
				why = "no diff"
			}
			out = append(out, DatasetChange{Dataset: v.Dataset, View: true, Why: []string{why}})
		case len(v.Partitions) > 0:
			c, diffed := changeOf(v.Dataset, v.Partitions)
			any = any || diffed
			c.View = true
			out = append(out, c)
		}
	}
	if !any {
		return nil
	}
	return out
}

// changeOf sums one dataset's partitions' diffs; diffed is false when no
// partition has one, not even a skipped one.
func changeOf(dataset string, parts []ViewPartition) (c DatasetChange, diffed bool) {
	c = DatasetChange{Dataset: dataset, Partitions: len(parts)}
	olds, news := map[string]*big.Rat{}, map[string]*big.Rat{}
	places := map[string]int{} // the most decimals a sum of the column was written with
	unknown := map[string]bool{}
	moved := map[string]bool{}
	for _, pp := range parts {
		d := pp.Diff
		switch {
		case d == nil:
			c.Skipped++
			continue
		case d.Skipped != "":
			diffed = true
			c.Skipped++
			if !slices.Contains(c.Why, d.Skipped) {
				c.Why = append(c.Why, d.Skipped)
			}
			continue
		}
		diffed = true
		if d.Changes() {
			c.Changed++
			if c.First == "" {
				c.First, c.FirstSummary = pp.Partition, d.Summary()
			}
		} else {
			c.Unchanged++
		}
		c.OnlyOld += d.OnlyOld
		c.OnlyNew += d.OnlyNew
		if d.Changed != nil {
			c.RowsChanged += *d.Changed
		}
		for _, name := range d.MovedColumns() {
			moved[name] = true
		}
		for name, col := range d.Columns {
			o, n := rat(col.OldSum), rat(col.NewSum)
			if o == nil || n == nil {
				unknown[name] = true
				continue
			}
			if olds[name] == nil {
				olds[name], news[name] = new(big.Rat), new(big.Rat)
			}
			olds[name].Add(olds[name], o)
			news[name].Add(news[name], n)
			places[name] = max(places[name], decimals(*col.OldSum), decimals(*col.NewSum))
		}
	}
	for name := range moved {
		m := ColumnMove{Column: name}
		if !unknown[name] && olds[name] != nil {
			m.Old, m.New = ratText(olds[name], places[name]), ratText(news[name], places[name])
		}
		c.Moved = append(c.Moved, m)
	}
	slices.SortFunc(c.Moved, func(a, b ColumnMove) int { return strings.Compare(a.Column, b.Column) })
	return c, diffed
}

// Name is the change's dataset as people read it: a view is marked so.
func (c DatasetChange) Name() string {
	if c.View {
		return c.Dataset + " (view)"
	}
	return c.Dataset
}

// ChangedFirst orders steps' changes as every door shows them: the steps
// that change first, then the rest, each in plan order.
func ChangedFirst(changes []DatasetChange) []DatasetChange {
	out := slices.Clone(changes)
	slices.SortStableFunc(out, func(a, b DatasetChange) int {
		switch {
		case a.Changed > 0 && b.Changed == 0:
			return -1
		case a.Changed == 0 && b.Changed > 0:
			return 1
		}
		return 0
	})
	return out
}

// Summary says a step's change in words: "3 of 3 partitions change (3 rows
// removed, 15 rows added, amount 0 → 1,788.31)", "unchanged (3 partitions
// compared)", and how many were not diffed and why.
func (c DatasetChange) Summary() string {
	var parts []string
	diffed := c.Changed + c.Unchanged
	switch {
	case c.Changed > 0:
		var rows []string
		if c.RowsChanged > 0 {
			rows = append(rows, plural(c.RowsChanged, "row")+" changed")
		}
		if c.OnlyOld > 0 {
			rows = append(rows, plural(c.OnlyOld, "row")+" removed")
		}
		if c.OnlyNew > 0 {
			rows = append(rows, plural(c.OnlyNew, "row")+" added")
		}
		for _, m := range c.Moved {
			if m.Old != "" {
				rows = append(rows, fmt.Sprintf("%s %s → %s", m.Column, Readable(json.Number(m.Old)), Readable(json.Number(m.New))))
			} else {
				rows = append(rows, m.Column+" changed")
			}
		}
		parts = append(parts, fmt.Sprintf("%d of %d %s change%s (%s)", c.Changed, diffed, partitionWord(diffed), verbS(c.Changed), strings.Join(rows, ", ")))
	case diffed > 0:
		parts = append(parts, fmt.Sprintf("unchanged (%d %s compared)", diffed, partitionWord(diffed)))
	}
	switch {
	case c.Skipped > 0:
		why := "no diff"
		if len(c.Why) > 0 {
			why = c.Why[0]
		}
		parts = append(parts, fmt.Sprintf("%d %s not diffed: %s", c.Skipped, partitionWord(c.Skipped), why))
	case c.Partitions == 0 && len(c.Why) > 0:
		// A view not compared at all.
		parts = append(parts, "not diffed: "+c.Why[0])
	}
	return strings.Join(parts, "; ")
}

// ChangeHeadline is a plan's content diffs in one line, changed datasets
// first: what the plan's summary and its Slack message lead with. It is
// "" for a plan made before content diffs.
func (p *Plan) ChangeHeadline() string {
	changes := p.Changes()
	if changes == nil {
		return ""
	}
	var changed, same, skipped []string
	for _, c := range changes {
		switch {
		case c.Changed > 0:
			changed = append(changed, c.Name()+" "+c.Summary())
		case c.Unchanged > 0 && c.Skipped == 0:
			same = append(same, c.Name())
		case c.Unchanged > 0:
			same = append(same, fmt.Sprintf("%s (%d not diffed)", c.Name(), c.Skipped))
		default:
			skipped = append(skipped, c.Name())
		}
	}
	var parts []string
	if len(changed) > 0 {
		parts = append(parts, strings.Join(changed, "; "))
	} else {
		parts = append(parts, "no diffed partition changes")
	}
	if len(same) > 0 {
		parts = append(parts, "unchanged: "+strings.Join(same, ", "))
	}
	if len(skipped) > 0 {
		parts = append(parts, "not diffed: "+strings.Join(skipped, ", "))
	}
	return strings.Join(parts, " · ")
}

func partitionWord(n int) string {
	if n == 1 {
		return "partition"
	}
	return "partitions"
}

func verbS(n int) string {
	if n == 1 {
		return "s"
	}
	return ""
}

// rat reads a sum exactly, or nil.
func rat(n *json.Number) *big.Rat {
	if n == nil {
		return nil
	}
	r, ok := new(big.Rat).SetString(n.String())
	if !ok {
		return nil
	}
	return r
}

// ratText writes a summed sum as a decimal with the places its parts were
// written with; past six (a float's noise), rounded to six and trailing
// zeros dropped.
func ratText(r *big.Rat, places int) string {
	s := r.FloatString(min(places, 6))
	if places > 6 {
		s = strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
	}
	if strings.Trim(s, "-0.") == "" {
		return strings.TrimPrefix(s, "-")
	}
	return s
}

// decimals counts the places after a number's decimal point, as written.
func decimals(n json.Number) int {
	s := n.String()
	if strings.ContainsAny(s, "eE") {
		return 7 // rounded as a float's noise is
	}
	if _, frac, ok := strings.Cut(s, "."); ok {
		return len(frac)
	}
	return 0
}

// sampleValue is how long a value in a sample line may run.
const sampleValue = 40

// Describe writes a sample row in one line: a changed row by its key and
// the values that change ("id=2: amount 0 → 20"), a removed or added row
// whole ("removed: id=3, amount=30"). Values are the warehouse's, clipped
// and escaped with OneLine: the line is safe to print.
func (r DiffRow) Describe(key []string) string {
	val := func(v *string) string {
		if v == nil {
			return "NULL"
		}
		s := roundNoise(*v)
		if n := []rune(s); len(n) > sampleValue {
			s = string(n[:sampleValue-1]) + "…"
		}
		return OneLine(s)
	}
	whole := func(row map[string]*string) string {
		names := make([]string, 0, len(row))
		for name := range row {
			names = append(names, name)
		}
		// The key first, as the diff lists it, then the rest by name.
		slices.SortFunc(names, func(a, b string) int {
			ia, ib := slices.Index(key, a), slices.Index(key, b)
			switch {
			case ia >= 0 && ib >= 0:
				return ia - ib
			case ia >= 0:
				return -1
			case ib >= 0:
				return 1
			}
			return strings.Compare(a, b)
		})
		parts := make([]string, len(names))
		for i, name := range names {
			parts[i] = OneLine(name) + "=" + val(row[name])
		}
		return strings.Join(parts, ", ")
	}
	switch {
	case r.Old != nil && r.New != nil:
		var ids, moved []string
		for _, k := range key {
			if v, ok := r.New[k]; ok { // the partition column is never shown
				ids = append(ids, OneLine(k)+"="+val(v))
			}
		}
		if len(ids) == 0 {
			ids = []string{"the row"}
		}
		var names []string
		for name := range r.New {
			if !slices.Contains(key, name) {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		for _, name := range names {
			o, n := r.Old[name], r.New[name]
			if (o == nil) != (n == nil) || o != nil && *o != *n {
				moved = append(moved, fmt.Sprintf("%s %s → %s", OneLine(name), val(o), val(n)))
			}
		}
		return strings.Join(ids, ", ") + ": " + strings.Join(moved, ", ")
	case r.Old != nil:
		return "removed: " + whole(r.Old)
	case r.New != nil:
		return "added: " + whole(r.New)
	}
	return ""
}

// roundNoise rounds a number written with more than six decimals (a
// float's noise: 426.70000000000005) to six, trailing zeros dropped; any
// other text is kept as it is.
func roundNoise(s string) string {
	if !json.Valid([]byte(s)) || decimals(json.Number(s)) <= 6 || strings.ContainsAny(s, "eE\"") {
		return s
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return s
	}
	return strconv.FormatFloat(math.Round(f*1e6)/1e6, 'f', -1, 64)
}
