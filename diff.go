package refill

import (
	"encoding/json"
	"fmt"
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
