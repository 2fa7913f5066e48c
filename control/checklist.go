package control

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
)

// snapshotTable names the warehouse table holding a plan's copy of table:
// refill_snap_<plan>_<table>, within PostgreSQL's 63-character limit.
func snapshotTable(planID, table string) string {
	if i := strings.LastIndexByte(table, '.'); i >= 0 {
		table = table[i+1:]
	}
	name := "refill_snap_" + planID + "_" + table
	if len(name) > 63 {
		name = name[:63]
	}
	return name
}

// Snapshot copies every partition the plan will overwrite, and the source
// partitions it reads, into snapshot tables in the warehouse, all in one
// warehouse transaction, and records each partition's row count and
// checksum: the manual checklist's first step, and what a rollback
// restores.
func (c *Control) Snapshot(ctx context.Context, id, actor string) (*State, []refill.SnapshotPart, error) {
	s, err := c.Load(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	p := s.Plan
	switch p.Status {
	case refill.StatusPending, refill.StatusReady, refill.StatusApproved:
	default:
		return nil, nil, refill.NotPermittedf("plan %s is %s: a snapshot is taken before the run", id, p.Status)
	}
	if _, ok := s.Done(refill.StepSnapshot); ok {
		return nil, nil, refill.NotPermittedf("plan %s already has a snapshot", id)
	}
	tr, ok1 := c.Warehouse.(refill.Transactor)
	rh, ok2 := c.Warehouse.(refill.Rehearser)
	if !ok1 || !ok2 {
		return nil, nil, fmt.Errorf("the %s warehouse cannot take snapshots", c.Warehouse.Driver())
	}
	type target struct {
		dataset string
		ref     refill.TableRef
		parts   []string
		source  bool
	}
	var targets []target
	var skipped []string
	for _, st := range p.Steps {
		d := c.Config.Datasets[st.Dataset]
		if d == nil || st.Table == "" {
			skipped = append(skipped, st.Dataset)
			continue
		}
		var parts []string
		for _, pp := range st.Partitions {
			parts = append(parts, pp.Partition)
		}
		targets = append(targets, target{st.Dataset, d.Ref(), parts, false})
	}
	rng, err := refill.ParseRange(p.Request.From, p.Request.To, 0)
	if err != nil {
		return nil, nil, err
	}
	for _, name := range p.Sources {
		d := c.Config.Datasets[name]
		if d == nil || d.Table == "" {
			continue
		}
		targets = append(targets, target{name, d.Ref(), rng.Partitions(d.Ref().Grain), true})
	}
	err = tr.Transact(ctx, func(tx refill.WarehouseTx) error {
		for _, t := range targets {
			if err := tx.CopyPartitions(ctx, t.ref, snapshotTable(id, t.ref.Table), t.parts[0], t.parts[len(t.parts)-1]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot of plan %s: %w", id, err)
	}
	var parts []refill.SnapshotPart
	for _, t := range targets {
		snap := snapshotTable(id, t.ref.Table)
		for _, part := range t.parts {
			dg, err := rh.Digest(ctx, refill.TableRef{Table: snap, Column: t.ref.Column, Grain: t.ref.Grain}, part)
			if err != nil {
				return nil, nil, fmt.Errorf("snapshot of plan %s: %w", id, err)
			}
			parts = append(parts, refill.SnapshotPart{PlanID: id, Dataset: t.dataset, Table: t.ref.Table, Partition: part,
				SnapshotTable: snap, Digest: dg, Source: t.source})
		}
	}
	now := c.now()
	step := refill.ChecklistStep{PlanID: id, Step: refill.StepSnapshot, Actor: actor, At: now,
		Detail: refill.Detail(map[string]any{"partitions": len(parts), "not_snapshotted": skipped})}
	err = c.Store.Update(ctx, func(tx *store.Tx) error {
		if err := tx.AddStep(ctx, step); err != nil {
			return err
		}
		if err := tx.SaveSnapshot(ctx, parts); err != nil {
			return err
		}
		if err := tx.Append(ctx, &refill.Event{Kind: refill.EventSnapshot, Actor: actor, PlanID: id, At: now,
			Detail: refill.Detail(map[string]any{"partitions": len(parts), "not_snapshotted": skipped})}); err != nil {
			return err
		}
		for _, sp := range parts {
			if err := tx.Append(ctx, &refill.Event{Kind: refill.EventSnapshot, Actor: actor, PlanID: id, At: now, Dataset: sp.Dataset, Partition: sp.Partition,
				Detail: refill.Detail(map[string]any{"rows": sp.Digest.Rows, "checksum": sp.Digest.Checksum, "table": sp.SnapshotTable, "source": sp.Source})}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	st, err := c.Load(ctx, id)
	return st, parts, err
}

// Rollback restores every snapshotted partition the plan rewrote, in one
// warehouse transaction, and proves it: each restored partition must have
// the row count and checksum recorded at snapshot time, or nothing is
// restored. Sources are never restored: refill does not rewrite them.
func (c *Control) Rollback(ctx context.Context, id, actor string) (*State, []refill.SnapshotPart, error) {
	s, err := c.Load(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	p := s.Plan
	parts, err := c.Store.Snapshot(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if len(parts) == 0 {
		return nil, nil, refill.NotPermittedf("plan %s has no snapshot, so there is nothing to restore: take one with refill snapshot before a run", id)
	}
	switch p.Status {
	case refill.StatusApplied, refill.StatusFailed:
	default:
		return nil, nil, refill.NotPermittedf("plan %s is %s: rollback restores partitions after a finished or failed run", id, p.Status)
	}
	// Restoring under a later run would silently undo it.
	later, err := c.Store.PublishedSince(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if len(later) > 0 {
		return nil, nil, refill.NotPermittedf("plan %s published %s after this plan did: roll that plan back first, or this rollback would undo it", later[0].PlanID, later[0].Dataset+" "+later[0].Partition)
	}
	tr, ok1 := c.Warehouse.(refill.Transactor)
	if !ok1 {
		return nil, nil, fmt.Errorf("the %s warehouse cannot restore snapshots", c.Warehouse.Driver())
	}
	var restored []refill.SnapshotPart
	err = tr.Transact(ctx, func(tx refill.WarehouseTx) error {
		for _, sp := range parts {
			if sp.Source {
				continue
			}
			d := c.Config.Datasets[sp.Dataset]
			if d == nil {
				return refill.BadInputf("dataset %s of plan %s is no longer in the config: cannot restore it", sp.Dataset, id)
			}
			r := d.Ref()
			if _, err := tx.RestorePartition(ctx, r, sp.SnapshotTable, sp.Partition); err != nil {
				return err
			}
			got, err := tx.Digest(ctx, r, sp.Partition)
			if err != nil {
				return err
			}
			if got != sp.Digest {
				return fmt.Errorf("%w: restored %s %s has %d rows (checksum %s), the snapshot %d rows (checksum %s); nothing was restored",
					refill.ErrVerification, sp.Dataset, sp.Partition, got.Rows, got.Checksum, sp.Digest.Rows, sp.Digest.Checksum)
			}
			restored = append(restored, sp)
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, refill.ErrVerification) || errors.Is(err, refill.ErrBadInput) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("rollback of plan %s: %w", id, err)
	}
	now := c.now()
	err = c.Store.Update(ctx, func(tx *store.Tx) error {
		if err := tx.SetStatus(ctx, id, p.Status, refill.StatusRolledBack); err != nil {
			return err
		}
		if err := tx.Append(ctx, &refill.Event{Kind: refill.EventRollback, Actor: actor, PlanID: id, At: now,
			Detail: refill.Detail(map[string]any{"partitions": len(restored), "from_status": p.Status})}); err != nil {
			return err
		}
		for _, sp := range restored {
			if err := tx.Append(ctx, &refill.Event{Kind: refill.EventRollback, Actor: actor, PlanID: id, At: now, Dataset: sp.Dataset, Partition: sp.Partition,
				Detail: refill.Detail(map[string]any{"rows": sp.Digest.Rows, "checksum": sp.Digest.Checksum})}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	st, err := c.Load(ctx, id)
	return st, restored, err
}

// Signoff records the manual checklist's last step: a person reviewed the
// before/after comparison of a finished run.
func (c *Control) Signoff(ctx context.Context, id, actor, note string) (*State, error) {
	s, err := c.Load(ctx, id)
	if err != nil {
		return nil, err
	}
	p := s.Plan
	if p.Tier != refill.TierManual {
		return nil, refill.NotPermittedf("plan %s is %s: sign-off is the manual checklist's last step", id, p.Tier)
	}
	if p.Status != refill.StatusApplied {
		return nil, refill.NotPermittedf("plan %s is %s: sign off after the run finished and its report was reviewed (refill report %s)", id, p.Status, id)
	}
	if actor == p.Request.RequestedBy {
		return nil, refill.NotPermittedf("%s requested plan %s: sign-off is a second person's review of its report", actor, id)
	}
	rep, err := BuildReport(ctx, c.Store, p, c.Config.Run.Tolerance)
	if err != nil {
		return nil, err
	}
	if rep.Flagged > 0 {
		return nil, refill.NotPermittedf("plan %s: %d partition(s) of its report differ from the plan's expectation by more than %.0f%%: investigate, or roll back (refill rollback %s)", id, rep.Flagged, 100*rep.Tolerance, id)
	}
	now := c.now()
	step := refill.ChecklistStep{PlanID: id, Step: refill.StepSignoff, Actor: actor, Note: note, At: now}
	err = c.Store.Update(ctx, func(tx *store.Tx) error {
		if err := tx.AddStep(ctx, step); err != nil {
			return err
		}
		return tx.Append(ctx, &refill.Event{Kind: refill.EventSignoff, Actor: actor, PlanID: id, At: now,
			Detail: refill.Detail(map[string]any{"note": note})})
	})
	if err != nil {
		return nil, err
	}
	return c.Load(ctx, id)
}
