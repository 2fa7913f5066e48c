package control

import (
	"context"
	"fmt"
	"strings"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
)

// ResolveRequest is a person's word on a partition that needs review: a
// side_effects job whose attempt ended with its outcome unknown.
type ResolveRequest struct {
	PlanID string
	// Dataset may be left out when the plan's partition is of one
	// dataset only.
	Dataset   string
	Partition string
	// Ran says the job had its effect (a delivery went out): the
	// partition is recorded published and never runs again. Otherwise it
	// did not, and refill apply runs it again.
	Ran    bool
	Reason string
}

// Resolve records a person's word on a partition that needs review: its
// requester, an approver or a lead, with a reason, audited. The plan stays
// needs_review; once every partition is resolved, refill apply resumes it
// (a partition said to have run is published and never runs again, one
// said not to have run runs again).
func (c *Control) Resolve(ctx context.Context, actor string, req ResolveRequest) (*State, error) {
	if err := refill.CheckText("--reason", req.Reason); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Reason) == "" {
		return nil, refill.BadInputf("--reason is required: say how you know whether it ran (a partner's receipt, the job's log)")
	}
	if err := c.BeforeWrite(ctx); err != nil {
		return nil, err
	}
	s, err := c.Load(ctx, req.PlanID)
	if err != nil {
		return nil, err
	}
	p := s.Plan
	if err := c.require(ctx, ActResolve, Subject{State: s}, actor); err != nil {
		return nil, err
	}
	var match []store.Review
	for _, rv := range s.Reviews {
		if rv.Partition == req.Partition && (req.Dataset == "" || rv.Dataset == req.Dataset) {
			match = append(match, rv)
		}
	}
	switch {
	case len(match) == 0:
		var open []string
		for _, rv := range s.Reviews {
			open = append(open, rv.Dataset+" "+rv.Partition)
		}
		return nil, refill.BadInputf("plan %s has no review of %s; waiting: %s", p.ID, strings.TrimSpace(req.Dataset+" "+req.Partition), strings.Join(open, ", "))
	case len(match) > 1:
		return nil, refill.BadInputf("plan %s has reviews of %s in several datasets: name one with --dataset", p.ID, req.Partition)
	}
	rv := match[0]
	rec := refill.Published{PlanID: p.ID, Dataset: rv.Dataset, Partition: rv.Partition, At: c.stamp(),
		Output: fmt.Sprintf("resolved by %s: it ran (%s)", actor, req.Reason)}
	if req.Ran && c.Warehouse != nil {
		// What the partition holds now is its rows after.
		if rh := c.Warehouse; rh != nil {
			if d := p.Sealed(c.Config).Datasets[rv.Dataset]; d != nil && d.Table != "" {
				if dg, err := rh.Digest(ctx, d.Ref(), rv.Partition); err == nil {
					rec.After = &dg
				}
			}
		}
	}
	outcome := store.AttemptNotRan
	if req.Ran {
		outcome = store.AttemptPublished
	}
	err = c.Store.Update(ctx, func(tx *store.Tx) error {
		if err := tx.EndAttempt(ctx, p.ID, rv.Dataset, rv.Partition, outcome); err != nil {
			return err
		}
		if req.Ran {
			if err := tx.RecordPublished(ctx, rec); err != nil {
				return err
			}
		}
		return tx.Append(ctx, &refill.Event{Kind: refill.EventResolved, Actor: actor, PlanID: p.ID, Dataset: rv.Dataset, Partition: rv.Partition,
			At: c.Now.Now(), Detail: refill.Detail(map[string]any{"ran": req.Ran, "reason": req.Reason})})
	})
	if err != nil {
		return nil, err
	}
	return c.Load(ctx, p.ID)
}
