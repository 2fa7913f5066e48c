package refill

import (
	"encoding/json"
	"reflect"
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
