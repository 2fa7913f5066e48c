package control

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
)

// Touch is one plan's dealings with one partition: the answer to "why was
// this date reprocessed?".
type Touch struct {
	PlanID      string        `json:"plan_id"`
	Status      refill.Status `json:"status"`
	Tier        refill.Tier   `json:"tier"`
	RequestedBy string        `json:"requested_by"`
	Reason      string        `json:"reason"`
	Range       string        `json:"range"`
	PlannedAt   time.Time     `json:"planned_at"`
	ApprovedBy  []string      `json:"approved_by"`
	// RowsPlanned are the plan's current and expected counts.
	RowsNow      *int64 `json:"rows_now"`
	RowsExpected *int64 `json:"rows_expected"`
	// Events are the audit entries of this plan for this partition (runs,
	// publishes, snapshots, rollbacks), in order.
	Events []refill.Event `json:"events"`
	// Ran, RowsBefore and RowsAfter come from the run, when it published
	// the partition.
	Ran        *time.Time `json:"ran,omitempty"`
	RowsBefore *int64     `json:"rows_before,omitempty"`
	RowsAfter  *int64     `json:"rows_after,omitempty"`
}

// History lists every plan that touched a dataset's partition, oldest first.
func (c *Control) History(ctx context.Context, dataset, partition string) ([]Touch, error) {
	d, ok := c.Config.Datasets[dataset]
	if !ok {
		return nil, refill.NotFoundf("unknown dataset %q", dataset)
	}
	if _, err := refill.PartitionTime(partition, d.Ref().Grain); err != nil {
		return nil, err
	}
	ids, err := c.Store.Touching(ctx, dataset, partition)
	if err != nil {
		return nil, err
	}
	evs, err := c.Store.Audit(ctx, store.AuditFilter{Dataset: dataset, Partition: partition})
	if err != nil {
		return nil, err
	}
	// Plans whose gate flagged the partition changed what later gates
	// accept (a flagged partition leaves volume history): they belong in
	// its history too, with who asked for them and why.
	for _, f := range evs {
		if f.Kind == refill.EventGateResult && f.PlanID != "" && !slices.Contains(ids, f.PlanID) {
			ids = append(ids, f.PlanID)
		}
	}
	// Four queries whatever the number of plans: the plans, the
	// partition's audit entries, their bodies and their decisions.
	plans, err := c.Store.PlansByID(ctx, ids)
	if err != nil {
		return nil, err
	}
	decisions, err := c.Store.ApprovalsOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	events := map[string][]refill.Event{}
	for _, e := range evs {
		events[e.PlanID] = append(events[e.PlanID], e)
	}
	due, err := c.expiring(ctx)
	if err != nil {
		return nil, err
	}
	out := []Touch{}
	for i, id := range ids {
		p := plans[i]
		if due[id] {
			p.Status = refill.StatusExpired // past plan_ttl, as show reads it
		}
		// A list of touches clips each reason, as the list of plans does.
		t := Touch{PlanID: id, Status: p.Status, Tier: p.Tier, RequestedBy: p.Request.RequestedBy, Reason: refill.ClipText(p.Request.Reason),
			Range: p.Request.From + ".." + p.Request.To, PlannedAt: p.CreatedAt, ApprovedBy: []string{}}
		for _, st := range p.Steps {
			if st.Dataset != dataset {
				continue
			}
			for _, pp := range st.Partitions {
				if pp.Partition == partition {
					t.RowsNow, t.RowsExpected = pp.CurrentRows, pp.ExpectedRows
				}
			}
		}
		for _, a := range decisions[id] {
			if a.Decision == refill.DecisionApprove {
				t.ApprovedBy = append(t.ApprovedBy, a.Actor)
			}
		}
		t.Events = events[id]
		if t.Events == nil {
			t.Events = []refill.Event{}
		}
		for _, e := range t.Events {
			if e.Kind != refill.EventPartitionPublished {
				continue
			}
			var det struct {
				RowsBefore *int64 `json:"rows_before"`
				RowsAfter  *int64 `json:"rows_after"`
			}
			if json.Unmarshal(e.Detail, &det) == nil {
				at := e.At
				t.Ran, t.RowsBefore, t.RowsAfter = &at, det.RowsBefore, det.RowsAfter
			}
		}
		out = append(out, t)
	}
	return out, nil
}

// Acceptances lists the findings accepted as real data on a dataset's
// partition, oldest first. Whether one still holds is the gate's to
// say: it lapses when the partition changes.
func (c *Control) Acceptances(ctx context.Context, dataset, partition string) ([]refill.Acceptance, error) {
	d, ok := c.Config.Datasets[dataset]
	if !ok {
		return nil, refill.NotFoundf("unknown dataset %q", dataset)
	}
	if _, err := refill.PartitionTime(partition, d.Ref().Grain); err != nil {
		return nil, err
	}
	return c.Store.Acceptances(ctx, dataset, partition)
}

// PartitionHistory is everything that answers "why was this date
// reprocessed?" and "why did the gate let it through?": the plans that
// touched the partition, the findings on it accepted as real data, and
// every time a person moved the dataset's schema-drift baseline.
type PartitionHistory struct {
	Dataset         string              `json:"dataset"`
	Partition       string              `json:"partition"`
	Plans           []Touch             `json:"plans"`
	Acceptances     []refill.Acceptance `json:"acceptances"`
	SchemaBaselines []SchemaChange      `json:"schema_baselines"`
}

// SchemaChange is one `refill schema accept`: who moved the baseline that
// schema drift is judged against, why, and what changed.
type SchemaChange struct {
	At      time.Time `json:"at"`
	By      string    `json:"by"`
	Reason  string    `json:"reason"`
	Added   []string  `json:"added"`
	Removed []string  `json:"removed"`
	Retyped []string  `json:"retyped"`
}

// PartitionHistory gathers a partition's history: plans, acceptances and
// the dataset's schema baselines, oldest first.
func (c *Control) PartitionHistory(ctx context.Context, dataset, partition string) (PartitionHistory, error) {
	h := PartitionHistory{Dataset: dataset, Partition: partition}
	var err error
	if h.Plans, err = c.History(ctx, dataset, partition); err != nil {
		return h, err
	}
	if h.Acceptances, err = c.Acceptances(ctx, dataset, partition); err != nil {
		return h, err
	}
	if h.Acceptances == nil {
		h.Acceptances = []refill.Acceptance{}
	}
	h.SchemaBaselines, err = c.SchemaChanges(ctx, dataset)
	return h, err
}

// SchemaChanges lists every `refill schema accept` of a dataset from the
// audit log, oldest first.
func (c *Control) SchemaChanges(ctx context.Context, dataset string) ([]SchemaChange, error) {
	evs, err := c.Store.Audit(ctx, store.AuditFilter{Kind: refill.EventSchemaAccepted, Dataset: dataset})
	if err != nil {
		return nil, err
	}
	out := []SchemaChange{}
	for _, e := range evs {
		if e.PlanID != "" {
			continue // an applied plan's baseline, not a person's acceptance
		}
		var det struct {
			Reason   string          `json:"reason"`
			Columns  []refill.Column `json:"columns"`
			Previous []refill.Column `json:"previous"`
		}
		_ = json.Unmarshal(e.Detail, &det)
		ch := SchemaChange{At: e.At, By: e.Actor, Reason: det.Reason, Added: []string{}, Removed: []string{}, Retyped: []string{}}
		was := map[string]string{}
		for _, col := range det.Previous {
			was[col.Name] = col.Type
		}
		now := map[string]bool{}
		for _, col := range det.Columns {
			now[col.Name] = true
			switch t, ok := was[col.Name]; {
			case !ok && det.Previous != nil:
				ch.Added = append(ch.Added, col.Name)
			case ok && t != col.Type:
				ch.Retyped = append(ch.Retyped, col.Name+" "+t+" -> "+col.Type)
			}
		}
		for _, col := range det.Previous {
			if !now[col.Name] {
				ch.Removed = append(ch.Removed, col.Name)
			}
		}
		out = append(out, ch)
	}
	return out, nil
}
