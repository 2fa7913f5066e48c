package refill

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestReadable(t *testing.T) {
	for in, want := range map[string]string{
		"0":                  "0",
		"41230.50":           "41,230.50",
		"-1234567":           "-1,234,567",
		"426.70000000000005": "426.7",
		"915.66000000000008": "915.66",
		"0.000123":           "0.000123",
		"0.0000001":          "0",
		"999.9999999":        "1,000",
		"-999.9999999":       "-1,000",
		"1e+21":              "1e+21",
		"123":                "123",
		"1234.5":             "1,234.5",
	} {
		if got := Readable(json.Number(in)); got != want {
			t.Errorf("Readable(%s) = %q, want %q", in, got, want)
		}
	}
}

func TestSumNumber(t *testing.T) {
	text := func(s string) *string { return &s }
	for _, tt := range []struct {
		in   *string
		want string // "" for nil
	}{
		{nil, ""}, {text(""), ""}, {text("NaN"), ""}, {text("Infinity"), ""}, {text("$12.00"), ""},
		{text(" 12.50 "), "12.50"}, {text("-3"), "-3"}, {text("1e3"), "1e3"}, {text("12 13"), ""},
	} {
		got := SumNumber(tt.in)
		if (got == nil) != (tt.want == "") || got != nil && got.String() != tt.want {
			t.Errorf("SumNumber(%v) = %v, want %q", tt.in, got, tt.want)
		}
	}
}

func TestDiffSummaryAndCompared(t *testing.T) {
	n := func(i int64) *int64 { return &i }
	num := func(s string) *json.Number { j := json.Number(s); return &j }
	keyed := &PartitionDiff{OnlyOld: 1, OnlyNew: 2, Changed: n(5), Unchanged: 10, Key: []string{"id"},
		Columns: map[string]ColumnDiff{
			"amount": {OldSum: num("0"), NewSum: num("41230.50"), Changed: n(5)},
			"events": {OldSum: num("7"), NewSum: num("7"), Changed: n(0)},
		}}
	if got, want := keyed.Summary(), "5 rows changed, 1 row removed, 2 rows added, amount 0 → 41,230.50"; got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
	if got, want := keyed.Compared(), int64(2*15+1+2); got != want {
		t.Errorf("Compared = %d, want %d", got, want)
	}
	if got := keyed.MovedColumns(); !reflect.DeepEqual(got, []string{"amount"}) {
		t.Errorf("MovedColumns = %v", got)
	}
	// A private column's sums are withheld: what moved is told by count.
	private := &PartitionDiff{Changed: n(3), Unchanged: 1, Key: []string{"id"},
		Columns: map[string]ColumnDiff{"salary": {Changed: n(3)}}}
	if got, want := private.Summary(), "3 rows changed, salary changed in 3 rows"; got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
	same := &PartitionDiff{Unchanged: 4, Columns: map[string]ColumnDiff{"amount": {OldSum: num("1.5"), NewSum: num("1.5")}}}
	if same.Changes() || same.Summary() != "" || same.Compared() != 8 {
		t.Errorf("an unchanged partition: Changes=%v Summary=%q Compared=%d", same.Changes(), same.Summary(), same.Compared())
	}
	skipped := SkippedDiff("over budget")
	if skipped.Changes() || skipped.Compared() != 0 || skipped.Summary() != "" {
		t.Error("a skipped diff reports a change")
	}
}

// TestDiffJSON: a skipped diff is {"skipped": why} alone; a made one keeps
// "key" as a list even when rows were compared whole, and both read back
// to what was written, so a plan's hash survives the state store.
func TestDiffJSON(t *testing.T) {
	b, err := json.Marshal(SkippedDiff("a command job"))
	if err != nil || string(b) != `{"skipped":"a command job"}` {
		t.Fatalf("skipped = %s, %v", b, err)
	}
	whole := &PartitionDiff{OnlyOld: 1, Unchanged: 2}
	b, _ = json.Marshal(whole)
	if want := `{"only_old":1,"only_new":0,"unchanged":2,"key":[]}`; string(b) != want {
		t.Errorf("whole rows = %s, want %s", b, want)
	}
	num := json.Number("426.70000000000005")
	v := "x"
	keyed := &PartitionDiff{Changed: new(int64), Key: []string{"id"}, Columns: map[string]ColumnDiff{"a": {OldSum: &num, NewSum: &num}},
		Sample: []DiffRow{{Old: map[string]*string{"id": &v, "b": nil}}}}
	for _, d := range []*PartitionDiff{SkippedDiff("why"), whole, keyed} {
		b1, _ := json.Marshal(d)
		var back PartitionDiff
		if err := json.Unmarshal(b1, &back); err != nil {
			t.Fatal(err)
		}
		b2, _ := json.Marshal(&back)
		if string(b1) != string(b2) {
			t.Errorf("round trip changed it:\n%s\n%s", b1, b2)
		}
	}
}

func TestDescribeSampleRow(t *testing.T) {
	s := func(v string) *string { return &v }
	long := strings.Repeat("x", 60)
	for _, tt := range []struct {
		row  DiffRow
		want string
	}{
		{DiffRow{Old: map[string]*string{"id": s("2"), "amount": s("0"), "note": s("a")}, New: map[string]*string{"id": s("2"), "amount": s("20"), "note": s("a")}},
			"id=2: amount 0 → 20"},
		{DiffRow{Old: map[string]*string{"id": s("3"), "amount": s("30"), "note": nil}}, "removed: id=3, amount=30, note=NULL"},
		{DiffRow{New: map[string]*string{"id": s("4"), "note": s("bad\x1b[2Jline\n")}}, `added: id=4, note=bad\u001b[2Jline\u000a`},
		{DiffRow{Old: map[string]*string{"id": s("5"), "note": nil}, New: map[string]*string{"id": s("5"), "note": s(long)}},
			"id=5: note NULL → " + strings.Repeat("x", 39) + "…"},
		{DiffRow{Old: map[string]*string{"id": s("6"), "amount": s("0.1")}, New: map[string]*string{"id": s("6"), "amount": s("460.21000000000004")}}, "id=6: amount 0.1 → 460.21"},
		{DiffRow{Old: map[string]*string{"id": s("7"), "code": s("00012")}, New: map[string]*string{"id": s("7"), "code": s("0.12345678x")}}, "id=7: code 00012 → 0.12345678x"},
		// A key of the partition column alone: one row per partition.
		{DiffRow{Old: map[string]*string{"amount": s("0.0")}, New: map[string]*string{"amount": s("426.7")}}, "the row: amount 0.0 → 426.7"},
	} {
		if got := tt.row.Describe([]string{"id"}); got != tt.want {
			t.Errorf("Describe = %q, want %q", got, tt.want)
		}
	}
}

func TestPlanChanges(t *testing.T) {
	n := func(i int64) *int64 { return &i }
	num := func(s string) *json.Number { j := json.Number(s); return &j }
	keyed := func(changed int64, old, new string) *PartitionDiff {
		return &PartitionDiff{Changed: n(changed), Unchanged: 2, Key: []string{"id"},
			Columns: map[string]ColumnDiff{"amount": {OldSum: num(old), NewSum: num(new), Changed: n(changed)}}}
	}
	p := &Plan{Steps: []Step{
		{Dataset: "orders", Partitions: []PartitionPlan{
			{Partition: "2026-11-25", Diff: keyed(0, "10.5", "10.5")},
			{Partition: "2026-11-26", Diff: keyed(1, "0.1", "20.2")},
			{Partition: "2026-11-27", Diff: keyed(2, "0.2", "0.30")},
		}},
		{Dataset: "sessions", Partitions: []PartitionPlan{{Partition: "2026-11-25", Diff: &PartitionDiff{Unchanged: 4}}}},
		{Dataset: "feed", Partitions: []PartitionPlan{{Partition: "2026-11-25", Diff: SkippedDiff("a command job")}}},
	}}
	got := p.Changes()
	if len(got) != 3 {
		t.Fatalf("Changes = %+v", got)
	}
	o := got[0]
	if o.Changed != 2 || o.Unchanged != 1 || o.RowsChanged != 3 || o.First != "2026-11-26" {
		t.Errorf("orders = %+v", o)
	}
	if want := []ColumnMove{{Column: "amount", Old: "10.80", New: "31.00"}}; !reflect.DeepEqual(o.Moved, want) {
		t.Errorf("orders moved %+v, want %+v", o.Moved, want)
	}
	if got, want := p.ChangeHeadline(), "orders 2 of 3 partitions change (3 rows changed, amount 10.80 → 31.00) · unchanged: sessions · not diffed: feed"; got != want {
		t.Errorf("headline\n got %q\nwant %q", got, want)
	}
	if got, want := got[2].Summary(), "1 partition not diffed: a command job"; got != want {
		t.Errorf("feed = %q, want %q", got, want)
	}
	if (&Plan{Steps: []Step{{Dataset: "x", Partitions: []PartitionPlan{{Partition: "a"}}}}}).Changes() != nil {
		t.Error("a plan made before diffs has changes")
	}
}

// TestChangesOfFloatSums: sums that carry a float's noise add up to a
// number a person reads, not 1,788.310000.
func TestChangesOfFloatSums(t *testing.T) {
	num := func(s string) *json.Number { j := json.Number(s); return &j }
	p := &Plan{Steps: []Step{{Dataset: "events_daily", Partitions: []PartitionPlan{
		{Partition: "a", Diff: &PartitionDiff{OnlyOld: 1, OnlyNew: 5, Columns: map[string]ColumnDiff{"amount": {OldSum: num("0.0"), NewSum: num("426.70000000000005")}}}},
		{Partition: "b", Diff: &PartitionDiff{OnlyOld: 1, OnlyNew: 5, Columns: map[string]ColumnDiff{"amount": {OldSum: num("0.0"), NewSum: num("1361.61")}}}},
	}}}}
	if got, want := p.Changes()[0].Summary(), "2 of 2 partitions change (2 rows removed, 10 rows added, amount 0 → 1,788.31)"; got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
}
