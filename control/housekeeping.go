package control

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
)

// Housekeeping keeps a team's state from silting up: plans that wait too
// long expire and release their partitions, and snapshot tables go once
// their plan is done with them.

// Housekeeper is the actor housekeeping acts as in the audit log.
const Housekeeper = "refill"

func (c *Control) planTTL() time.Duration {
	if d := time.Duration(c.Config.Housekeeping.PlanTTL); d > 0 {
		return d
	}
	return time.Duration(refill.DefaultHousekeeping().PlanTTL)
}

func (c *Control) snapshotTTL() time.Duration {
	if d := time.Duration(c.Config.Housekeeping.SnapshotTTL); d > 0 {
		return d
	}
	return time.Duration(refill.DefaultHousekeeping().SnapshotTTL)
}

// overdue reports whether a waiting plan is past policy.plan_ttl, by the
// real clock: housekeeping decides what people may still act on, so
// REFILL_NOW (which anyone may set) must not move it either way.
func (c *Control) overdue(p *refill.Plan, evs []refill.Event) bool {
	switch p.Status {
	case refill.StatusPending, refill.StatusReady, refill.StatusApproved:
	default:
		return false
	}
	for _, e := range evs {
		if e.Kind == refill.EventPlanCreated {
			return c.Clock.Now().Sub(e.At) > c.planTTL()
		}
	}
	return false
}

// Swept is what one round of housekeeping did.
type Swept struct {
	Expired          []string `json:"expired"`
	SnapshotsDropped []string `json:"snapshots_dropped"`
}

// Sweep expires every plan that waited past policy.plan_ttl and, when the
// warehouse is at hand, drops the snapshot tables of plans that ended
// (signed off, rejected, expired, superseded, cancelled, rolled back) more
// than policy.snapshot_ttl ago. Each step is audited as the housekeeper.
func (c *Control) Sweep(ctx context.Context) (Swept, error) {
	var out Swept
	due, err := c.Store.Waiting(ctx, c.Clock.Now().Add(-c.planTTL()))
	if err != nil {
		return out, err
	}
	for _, p := range due {
		err := c.Store.Update(ctx, func(tx *store.Tx) error {
			if err := tx.SetStatus(ctx, p.ID, p.Status, refill.StatusExpired); err != nil {
				return err
			}
			return tx.Append(ctx, &refill.Event{Kind: refill.EventExpired, Actor: Housekeeper, PlanID: p.ID, At: c.Now.Now(),
				Detail: refill.Detail(map[string]any{"was": p.Status, "plan_ttl": c.planTTL().String()})})
		})
		if errors.Is(err, refill.ErrNotPermitted) {
			continue // it moved on meanwhile (approved, applied): not ours to expire
		}
		if err != nil {
			return out, err
		}
		out.Expired = append(out.Expired, p.ID)
	}
	if c.Warehouse == nil {
		return out, nil
	}
	kept, err := c.Store.KeptSnapshots(ctx)
	if err != nil {
		return out, err
	}
	for _, k := range kept {
		ended, ok, err := c.ended(ctx, k.PlanID, k.Status)
		if err != nil {
			return out, err
		}
		if !ok || c.Clock.Now().Sub(ended) <= c.snapshotTTL() {
			continue
		}
		if err := c.dropSnapshot(ctx, k, Housekeeper, fmt.Sprintf("snapshot_ttl (%s) passed since the plan ended", c.snapshotTTL())); err != nil {
			return out, err
		}
		out.SnapshotsDropped = append(out.SnapshotsDropped, k.PlanID)
	}
	return out, nil
}

// ended returns when a plan was done with its snapshot — signed off,
// rejected, expired, superseded, cancelled or rolled back — by the real
// clock of the audit log. A cancelled plan's partial run may still be
// rolled back for policy.snapshot_ttl after it was cancelled.
func (c *Control) ended(ctx context.Context, planID string, status refill.Status) (time.Time, bool, error) {
	switch status {
	case refill.StatusApplied, refill.StatusRejected, refill.StatusExpired, refill.StatusRolledBack,
		refill.StatusSuperseded, refill.StatusCancelled:
	default:
		return time.Time{}, false, nil
	}
	evs, err := c.Store.Audit(ctx, store.AuditFilter{PlanID: planID})
	if err != nil {
		return time.Time{}, false, err
	}
	// Only manual plans are signed off: a semi-auto or auto plan is done
	// with its (optional) snapshot once its run finished, and may be rolled
	// back until policy.snapshot_ttl has passed since.
	manual := true
	if status == refill.StatusApplied {
		p, err := c.Store.Plan(ctx, planID)
		if err != nil {
			return time.Time{}, false, err
		}
		manual = p.Tier == refill.TierManual
	}
	var at time.Time
	found := false
	for _, e := range evs {
		switch {
		case e.Kind == refill.EventSignoff, e.Kind == refill.EventRejection, e.Kind == refill.EventExpired,
			e.Kind == refill.EventSuperseded, e.Kind == refill.EventRunCancelled,
			e.Kind == refill.EventRollback && e.Partition == "",
			e.Kind == refill.EventRunFinished && !manual:
			at, found = e.At, true
		}
	}
	return at, found, nil
}

// DropSnapshot drops a plan's snapshot tables at once (`refill snapshot
// drop`), audited with who and why. A plan that may still run, or whose run
// may still be rolled back, keeps its snapshot unless it is done: only a
// plan that ended can lose it.
func (c *Control) DropSnapshot(ctx context.Context, id, actor, reason string) ([]string, error) {
	if err := refill.CheckText("--reason", strings.TrimSpace(reason)); err != nil {
		return nil, err
	}
	if err := c.BeforeWrite(ctx); err != nil {
		return nil, err
	}
	if strings.TrimSpace(reason) == "" {
		return nil, refill.BadInputf("--reason is required: say why the snapshot of %s may go", id)
	}
	s, err := c.Load(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := c.require(ctx, ActSnapshotDrop, Subject{State: s}, actor); err != nil {
		return nil, err
	}
	kept, err := c.Store.KeptSnapshots(ctx)
	if err != nil {
		return nil, err
	}
	for _, k := range kept {
		if k.PlanID == id {
			k.Status = s.Plan.Status
			return k.Tables, c.dropSnapshot(ctx, k, actor, strings.TrimSpace(reason))
		}
	}
	return nil, refill.NotPermittedf("plan %s has no snapshot tables to drop", id)
}

func (c *Control) dropSnapshot(ctx context.Context, k store.KeptSnapshot, actor, reason string) error {
	tr := c.Warehouse
	if tr == nil {
		return fmt.Errorf("dropping a snapshot needs the warehouse, and it is not open")
	}
	err := tr.Transact(ctx, func(tx refill.WarehouseTx) error {
		for _, t := range k.Tables {
			if err := tx.DropTable(ctx, t); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("dropping the snapshot of plan %s: %w", k.PlanID, err)
	}
	// Dropping twice is harmless (DROP TABLE IF EXISTS), so the state store
	// is written after the warehouse: a failure in between is finished by
	// the next sweep.
	return c.Store.Update(ctx, func(tx *store.Tx) error {
		if err := tx.SnapshotDropped(ctx, k.PlanID, c.stamp()); err != nil {
			return err
		}
		return tx.Append(ctx, &refill.Event{Kind: refill.EventSnapshotDropped, Actor: actor, PlanID: k.PlanID, At: c.Now.Now(),
			Detail: refill.Detail(map[string]any{"tables": k.Tables, "reason": reason, "plan_status": k.Status})})
	})
}

// Plans lists plans as `refill plans` shows them: a waiting plan past
// policy.plan_ttl reads as expired whether or not a sweep has recorded it
// yet, as `show` reads it, so a read never has to write to tell the truth.
func (c *Control) Plans(ctx context.Context, f refill.PlanFilter) ([]refill.PlanSummary, error) {
	due, err := c.expiring(ctx)
	if err != nil || len(due) == 0 {
		if err != nil {
			return nil, err
		}
		return c.Store.Plans(ctx, f)
	}
	g := f
	switch f.Status {
	case refill.StatusExpired, refill.StatusPending, refill.StatusReady, refill.StatusApproved:
		// Which plans these are depends on the clock: read them all
		// (from the page's start).
		g = refill.PlanFilter{Before: f.Before}
	}
	list, err := c.Store.Plans(ctx, g)
	if err != nil {
		return nil, err
	}
	out := list[:0]
	for _, p := range list {
		if due[p.ID] {
			p.Status = refill.StatusExpired
		}
		if f.Status == "" || p.Status == f.Status {
			out = append(out, p)
		}
	}
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

// expiring returns the waiting plans past policy.plan_ttl by the real
// clock that no sweep has expired yet.
func (c *Control) expiring(ctx context.Context) (map[string]bool, error) {
	due, err := c.Store.Waiting(ctx, c.Clock.Now().Add(-c.planTTL()))
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(due))
	for _, p := range due {
		out[p.ID] = true
	}
	return out, nil
}
