package store

import (
	"context"

	"github.com/refill-dev/refill"
)

// RecordPlan stores a new plan: the plan, its gate's schemas and
// flags, the plans it supersedes and the audit entries recording all of it
// commit together.
func (s *Store) RecordPlan(ctx context.Context, rec refill.PlanRecord) ([]string, error) {
	p := rec.Plan
	var superseded []string
	err := s.Update(ctx, func(tx *Tx) error {
		if err := tx.SavePlan(ctx, p); err != nil {
			return err
		}
		for i := range rec.Schemas {
			rec.Schemas[i].PlanID = p.ID
		}
		for i := range rec.Flags {
			rec.Flags[i].PlanID = p.ID
		}
		if err := tx.SaveSchemas(ctx, rec.Schemas); err != nil {
			return err
		}
		if err := tx.SaveFlags(ctx, rec.Flags); err != nil {
			return err
		}
		var err error
		if superseded, err = tx.Supersede(ctx, p); err != nil {
			return err
		}
		actor := p.Request.RequestedBy
		created := map[string]any{
			"hash": p.Hash, "tier": p.Tier, "status": p.Status, "targets": p.Request.Targets,
			"from": p.Request.From, "to": p.Request.To, "reason": p.Request.Reason, "reasons": p.Reasons,
		}
		if len(p.Attention) > 0 {
			created["attention"] = p.Attention
		}
		events := []*refill.Event{
			{Kind: refill.EventPlanCreated, Actor: actor, PlanID: p.ID, At: p.CreatedAt, Detail: refill.Detail(created)},
		}
		failed := p.Gate.Failed()
		events = append(events, &refill.Event{Kind: refill.EventGateResult, Actor: actor, PlanID: p.ID, At: p.CreatedAt,
			Detail: refill.Detail(map[string]any{"passed": p.Gate.Passed, "checked": p.Gate.Checked, "failed": failed, "findings": len(p.Gate.Findings),
				"schemas": SchemaDigests(rec.Schemas)})})
		for _, f := range rec.Flags {
			events = append(events, &refill.Event{Kind: refill.EventGateResult, Actor: actor, PlanID: p.ID, At: p.CreatedAt,
				Dataset: f.Dataset, Partition: f.Partition, Detail: refill.Detail(map[string]any{"check": f.Check, "passed": false})})
		}
		for _, id := range superseded {
			events = append(events, &refill.Event{Kind: refill.EventSuperseded, Actor: actor, PlanID: id, At: p.CreatedAt,
				Detail: refill.Detail(map[string]any{"by": p.ID})})
		}
		for _, e := range events {
			if err := tx.Append(ctx, e); err != nil {
				return err
			}
		}
		return nil
	})
	return superseded, err
}
