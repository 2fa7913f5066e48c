package control

import (
	"strings"
	"testing"

	"github.com/refill-dev/refill"
)

// TestForeseen: the report holds the run's change against the dry run's
// diff: what changed, whether anything did, and the rows left.
func TestForeseen(t *testing.T) {
	n := func(i int64) *int64 { return &i }
	dg := func(rows int64, sum string) *refill.Digest { return &refill.Digest{Rows: rows, Checksum: sum} }
	same := &refill.PartitionDiff{Changed: n(0), Unchanged: 5, Key: []string{"id"}}
	change := &refill.PartitionDiff{Changed: n(1), Unchanged: 4, OnlyNew: 1, Key: []string{"id"}}
	whole := &refill.PartitionDiff{OnlyOld: 1, OnlyNew: 2, Unchanged: 3}
	for _, tt := range []struct {
		name          string
		d             *refill.PartitionDiff
		before, after *refill.Digest
		want          string // a part of the mismatch, "" for none
	}{
		{"no diff", nil, dg(5, "a"), dg(6, "b"), ""},
		{"skipped", refill.SkippedDiff("over budget"), dg(5, "a"), dg(6, "b"), ""},
		{"unchanged as foreseen", same, dg(5, "a"), dg(5, "a"), ""},
		{"changed as foreseen", change, dg(5, "a"), dg(6, "b"), ""},
		{"whole rows as foreseen", whole, dg(4, "a"), dg(5, "b"), ""},
		{"a change nobody foresaw", same, dg(5, "a"), dg(5, "b"), "the dry run foresaw no change, yet the run changed it"},
		{"a foreseen change that did not come", change, dg(5, "a"), dg(5, "a"), "the dry run foresaw 1 row changed, 1 row added, yet the run left it as it was"},
		{"other rows", change, dg(5, "a"), dg(7, "b"), "the dry run foresaw 6 rows after the rebuild, the run left 7"},
		{"a new partition", change, nil, dg(6, "b"), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := foreseen(tt.d, tt.before, tt.after)
			if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("foreseen = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReportTrouble(t *testing.T) {
	dev := 0.5
	r := Report{Tolerance: 0.1, DryRunMismatches: 1, Partitions: []PartitionReport{
		{Flagged: true, Deviation: &dev}, {Flagged: true, DryRun: "the dry run foresaw no change"}, {},
	}}
	if got, want := r.Trouble(), "1 partition(s) differ from the plan's expectation by more than 10%; 1 partition(s) changed otherwise than the dry run's content diff foresaw"; got != want {
		t.Errorf("Trouble = %q, want %q", got, want)
	}
	if (Report{Tolerance: 0.1}).Trouble() != "" {
		t.Error("a clean report has trouble")
	}
}
