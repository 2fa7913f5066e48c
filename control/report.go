package control

import (
	"context"
	"math"

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
}

// Report is the before/after comparison of a plan's run.
type Report struct {
	PlanID     string            `json:"plan_id"`
	Status     refill.Status     `json:"status"`
	Tolerance  float64           `json:"tolerance"`
	Total      int               `json:"partitions"`
	Published  int               `json:"published"`
	Flagged    int               `json:"flagged"`
	Partitions []PartitionReport `json:"rows"`
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
						rep.Flagged++
					}
				}
			}
			rep.Partitions = append(rep.Partitions, r)
		}
	}
	return rep, nil
}
