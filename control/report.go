package control

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
)

// PartitionReport compares one rewritten partition before and after, with
// the plan's expectation beside it.
type PartitionReport struct {
	Dataset        string                `json:"dataset"`
	Partition      string                `json:"partition"`
	Expected       *int64                `json:"expected_rows"`
	ExpectedMethod refill.ExpectedMethod `json:"expected_method"`
	Before         *refill.Digest        `json:"before"`
	After          *refill.Digest        `json:"after"`
	Published      bool                  `json:"published"`
	// Deviation is (after - expected) / expected; Flagged when it is beyond
	// the tolerance.
	Deviation *float64 `json:"deviation,omitempty"`
	Flagged   bool     `json:"flagged"`
	// DryRun says how the run's change differs from what the dry run's
	// content diff said it would be ("" when they agree, or the partition
	// had no diff); such a partition is flagged too.
	DryRun string `json:"dry_run,omitempty"`
}

// Report is the before/after comparison of a plan's run.
type Report struct {
	PlanID    string        `json:"plan_id"`
	Status    refill.Status `json:"status"`
	Tolerance float64       `json:"tolerance"`
	Total     int           `json:"partitions"`
	Published int           `json:"published"`
	Flagged   int           `json:"flagged"`
	// DryRunMismatches counts published partitions whose change is not
	// the one the dry run's content diff foresaw.
	DryRunMismatches int               `json:"dry_run_mismatches"`
	Partitions       []PartitionReport `json:"rows"`
}

// Tolerance is the run.tolerance a plan's report judges by: the one sealed
// with the plan, or the config's for a plan made before sealing.
func Tolerance(p *refill.Plan, cfg *refill.Config) float64 {
	if p.Run != nil {
		return p.Run.Tolerance
	}
	return cfg.Run.Tolerance
}

// BuildReport reads a plan's published partitions and compares them with
// its expectations.
func BuildReport(ctx context.Context, st *store.Store, p *refill.Plan, tolerance float64) (Report, error) {
	pubs, err := st.Published(ctx, p.ID)
	if err != nil {
		return Report{}, err
	}
	byKey := map[string]refill.Published{}
	for _, pb := range pubs {
		byKey[pb.Dataset+"\x00"+pb.Partition] = pb
	}
	rep := Report{PlanID: p.ID, Status: p.Status, Tolerance: tolerance, Partitions: []PartitionReport{}}
	for _, s := range p.Steps {
		for _, pp := range s.Partitions {
			r := PartitionReport{Dataset: s.Dataset, Partition: pp.Partition, Expected: pp.ExpectedRows, ExpectedMethod: pp.ExpectedMethod}
			rep.Total++
			if pb, ok := byKey[s.Dataset+"\x00"+pp.Partition]; ok {
				r.Published, r.Before, r.After = true, pb.Before, pb.After
				rep.Published++
				if r.After != nil && r.Expected != nil {
					dev := float64(r.After.Rows-*r.Expected) / math.Max(float64(*r.Expected), 1)
					dev = math.Round(dev*1e4) / 1e4
					r.Deviation = &dev
					if math.Abs(dev) > tolerance {
						r.Flagged = true
					}
				}
				if r.DryRun = foreseen(pp.Diff, r.Before, r.After); r.DryRun != "" {
					r.Flagged = true
					rep.DryRunMismatches++
				}
				if r.Flagged {
					rep.Flagged++
				}
			}
			rep.Partitions = append(rep.Partitions, r)
		}
	}
	return rep, nil
}

// foreseen compares a published partition's change with the dry run's
// content diff of it: "" when they agree or there was no diff, else what
// differs. Whether it changed is told by its checksums before and after
// the run; how many rows it holds, by the diff's rows after the rebuild.
func foreseen(d *refill.PartitionDiff, before, after *refill.Digest) string {
	if d == nil || d.Skipped != "" || after == nil {
		return ""
	}
	rows := d.Unchanged + d.OnlyNew
	if d.Changed != nil {
		rows += *d.Changed
	}
	changed := before == nil || before.Checksum != after.Checksum
	switch {
	case !d.Changes() && changed:
		return "the dry run foresaw no change, yet the run changed it: the partition or what it reads changed after planning, or the job is not deterministic"
	case d.Changes() && !changed:
		return "the dry run foresaw " + d.Summary() + ", yet the run left it as it was"
	case after.Rows != rows:
		return fmt.Sprintf("the dry run foresaw %d rows after the rebuild, the run left %d", rows, after.Rows)
	}
	return ""
}

// Trouble says what the report's flagged partitions are, for a refusal or
// an alert: "2 partition(s) differ from the plan's expectation by more
// than 10%; 1 changed otherwise than the dry run foresaw". "" when none is
// flagged.
func (r Report) Trouble() string {
	off := 0
	for _, p := range r.Partitions {
		if p.Flagged && p.Deviation != nil && math.Abs(*p.Deviation) > r.Tolerance {
			off++
		}
	}
	var parts []string
	if off > 0 {
		parts = append(parts, fmt.Sprintf("%d partition(s) differ from the plan's expectation by more than %.0f%%", off, 100*r.Tolerance))
	}
	if r.DryRunMismatches > 0 {
		parts = append(parts, fmt.Sprintf("%d partition(s) changed otherwise than the dry run's content diff foresaw", r.DryRunMismatches))
	}
	return strings.Join(parts, "; ")
}
