package control

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/internal/failpoint"
	"github.com/refill-dev/refill/store"
)

// snapshotTable names the warehouse table holding plan planID's copy of
// table: refill_snap_<plan>_<table>_<hash>, in table's own schema. The
// hash of the full, schema-qualified name keeps two tables of one name in
// different schemas apart, and keeps the name unique when it is cut to
// PostgreSQL's 63 characters.
func snapshotTable(planID, table string) string {
	schema, name := "", table
	if i := strings.LastIndexByte(table, '.'); i >= 0 {
		schema, name = table[:i+1], table[i+1:]
	}
	sum := sha256.Sum256([]byte(table))
	tag := hex.EncodeToString(sum[:4])
	prefix := "refill_snap_" + planID + "_"
	if room := 63 - len(prefix) - 1 - len(tag); len(name) > room {
		name = name[:max(room, 0)]
	}
	return schema + prefix + name + "_" + tag
}

// Pending operations.
const (
	opSnapshot = "snapshot"
	opRollback = "rollback"
)

// snapTarget is one table a snapshot copies.
type snapTarget struct {
	dataset string
	ref     refill.TableRef
	parts   []string
	source  bool
}

// snapTargets lists what plan p's snapshot copies, from what it sealed:
// the partitions it rewrites and the source partitions it reads.
func snapTargets(p *refill.Plan) (targets []snapTarget, skipped []string, err error) {
	for _, st := range p.Steps {
		if st.Ref == nil || st.Ref.Table == "" {
			skipped = append(skipped, st.Dataset)
			continue
		}
		var parts []string
		for _, pp := range st.Partitions {
			parts = append(parts, pp.Partition)
		}
		targets = append(targets, snapTarget{st.Dataset, *st.Ref, parts, false})
	}
	rng, err := refill.ParseRange(p.Request.From, p.Request.To, refill.NoRangeLimit)
	if err != nil {
		return nil, nil, err
	}
	for _, s := range p.SourceSeals {
		if s.Ref == nil || s.Ref.Table == "" || !slices.Contains(p.Sources, s.Dataset) {
			continue
		}
		targets = append(targets, snapTarget{s.Dataset, *s.Ref, rng.Partitions(s.Ref.Grain), true})
	}
	return targets, skipped, nil
}

// Snapshot copies every partition the plan will overwrite, and the source
// partitions it reads, into snapshot tables in the warehouse, all in one
// warehouse transaction, and records each partition's row count and
// checksum: the manual checklist's first step, and what a rollback
// restores.
//
// The intent is recorded in the state store first: if the warehouse copy
// or the state store's record fails, running snapshot again drops what
// the failed attempt left behind and starts over.
func (c *Control) Snapshot(ctx context.Context, id, actor string) (*State, []refill.SnapshotPart, error) {
	if err := c.BeforeWrite(ctx); err != nil {
		return nil, nil, err
	}
	s, err := c.Load(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	p := s.Plan
	if err := c.require(ctx, ActSnapshot, Subject{State: s}, actor); err != nil {
		return nil, nil, err
	}
	if c.Warehouse == nil {
		return nil, nil, fmt.Errorf("a snapshot needs the warehouse, and it is not open")
	}
	tr, rh := c.Warehouse, c.Warehouse
	targets, skipped, err := snapTargets(p)
	if err != nil {
		return nil, nil, err
	}
	if _, again, err := c.Store.BeginOp(ctx, store.PendingOp{PlanID: id, Op: opSnapshot, Actor: actor}); err != nil {
		return nil, nil, err
	} else if again {
		// An earlier snapshot stopped half-way: drop what it left.
		err := tr.Transact(ctx, func(tx refill.WarehouseTx) error {
			for _, t := range targets {
				if err := tx.DropTable(ctx, snapshotTable(id, t.ref.Table)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("snapshot of plan %s: cleaning up an earlier attempt: %w", id, err)
		}
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
		return nil, nil, fmt.Errorf("snapshot of plan %s (run it again to retry): %w", id, err)
	}
	var parts []refill.SnapshotPart
	for _, t := range targets {
		snap := snapshotTable(id, t.ref.Table)
		for _, part := range t.parts {
			dg, err := rh.Digest(ctx, refill.TableRef{Table: snap, Column: t.ref.Column, Grain: t.ref.Grain}, part)
			if err != nil {
				return nil, nil, fmt.Errorf("snapshot of plan %s (run it again to retry): %w", id, err)
			}
			parts = append(parts, refill.SnapshotPart{PlanID: id, Dataset: t.dataset, Table: t.ref.Table, Partition: part,
				SnapshotTable: snap, Digest: dg, Source: t.source})
		}
	}
	if err := failpoint.Check("snapshot-after-warehouse"); err != nil {
		return nil, nil, err
	}
	now := c.Now.Now()
	detail := map[string]any{"partitions": len(parts), "not_snapshotted": skipped, "four_eyes_enforced": s.FourEyes}
	step := refill.ChecklistStep{PlanID: id, Step: refill.ChecklistSnapshot, Actor: actor, At: c.stamp(), Detail: refill.Detail(detail)}
	err = c.Store.Update(ctx, func(tx *store.Tx) error {
		if err := addStep(ctx, tx, step); err != nil {
			return err
		}
		if err := tx.SaveSnapshot(ctx, parts); err != nil {
			return err
		}
		if err := tx.EndOp(ctx, id, opSnapshot); err != nil {
			return err
		}
		if err := tx.Append(ctx, &refill.Event{Kind: refill.EventSnapshot, Actor: actor, PlanID: id, At: now,
			Detail: refill.Detail(detail)}); err != nil {
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
		return nil, nil, fmt.Errorf("snapshot of plan %s (run it again to retry): %w", id, err)
	}
	st, err := c.Load(ctx, id)
	return st, parts, err
}

// RollbackOptions say whether a rollback is forced, and why.
type RollbackOptions struct {
	// Force restores partitions someone else wrote since: a lead only, and
	// never over a later plan's run.
	Force bool
	// Reason is why it is forced: required with Force and kept in the
	// audit log; a rollback that is not forced records none.
	Reason string
}

// Rollback restores every snapshotted partition the plan rewrote, in one
// warehouse transaction, and proves it: each restored partition must have
// the row count and checksum recorded at snapshot time, or nothing is
// restored. Sources are never restored: refill does not rewrite them.
//
// A partition someone else wrote since — its live checksum is not what
// this plan's run published, or the snapshot is not what the run found
// before it — is refused, since restoring it would silently undo their
// work, unless a lead forces it with a reason (o.Force, o.Reason).
func (c *Control) Rollback(ctx context.Context, id, actor string, o RollbackOptions) (*State, []refill.SnapshotPart, error) {
	if err := refill.CheckText("--reason", strings.TrimSpace(o.Reason)); err != nil {
		return nil, nil, err
	}
	force := ""
	if o.Force {
		if force = strings.TrimSpace(o.Reason); force == "" {
			return nil, nil, refill.BadInputf("--force needs --reason: say why partitions written by someone else may be overwritten")
		}
	}
	if err := c.BeforeWrite(ctx); err != nil {
		return nil, nil, err
	}
	s, err := c.Load(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	p := s.Plan
	if err := c.require(ctx, ActRollback, Subject{State: s, Force: force != ""}, actor); err != nil {
		return nil, nil, err
	}
	parts, err := c.Store.Snapshot(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	published, err := c.Store.Published(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	pub := map[string]refill.Published{}
	for _, pp := range published {
		pub[pp.Dataset+"\x00"+pp.Partition] = pp
	}
	refs := map[string]refill.TableRef{}
	for _, st := range p.Steps {
		if st.Ref != nil {
			refs[st.Dataset] = *st.Ref
		}
	}
	if c.Warehouse == nil {
		return nil, nil, fmt.Errorf("a rollback needs the warehouse, and it is not open")
	}
	tr := c.Warehouse
	_, again, err := c.Store.BeginOp(ctx, store.PendingOp{PlanID: id, Op: opRollback, Actor: actor,
		Detail: refill.Detail(map[string]any{"force": force})})
	if err != nil {
		return nil, nil, err
	}
	var restored []refill.SnapshotPart
	var forced []string
	err = tr.Transact(ctx, func(tx refill.WarehouseTx) error {
		for _, sp := range parts {
			if sp.Source {
				continue
			}
			r, ok := refs[sp.Dataset]
			if !ok {
				if cfgD := c.Config.Datasets[sp.Dataset]; p.Seal == 0 && cfgD != nil {
					r = cfgD.Ref() // a plan from before sealing
				} else {
					return fmt.Errorf("plan %s does not rebuild %s: its snapshot cannot be restored", id, sp.Dataset)
				}
			}
			// A digest stored before an upgrade changed the warehouse's
			// checksum is compared with the rows the old way.
			like := func(table string, d refill.Digest) (refill.Digest, error) {
				return refill.DigestLike(ctx, tx, refill.TableRef{Table: table, Column: r.Column, Grain: r.Grain}, sp.Partition, d)
			}
			live, err := like(r.Table, sp.Digest)
			if err != nil {
				return err
			}
			if live != sp.Digest { // not already as the snapshot holds it
				why, err := overwritten(sp, r.Table, live, pub[sp.Dataset+"\x00"+sp.Partition], like)
				if err != nil {
					return err
				}
				if why != "" {
					if force == "" {
						return refill.NotPermittedf("%s %s: %s; restoring it would undo that. A lead may force it: refill rollback %s --force --reason ...", sp.Dataset, sp.Partition, why, id)
					}
					forced = append(forced, sp.Dataset+" "+sp.Partition+": "+why)
				}
			}
			if _, err := tx.RestorePartition(ctx, r, sp.SnapshotTable, sp.Partition); err != nil {
				return err
			}
			got, err := like(r.Table, sp.Digest)
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
		if !again {
			_ = c.Store.DropOp(context.WithoutCancel(ctx), id, opRollback) // nothing was restored
		}
		if errors.Is(err, refill.ErrVerification) || errors.Is(err, refill.ErrBadInput) || errors.Is(err, refill.ErrNotPermitted) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("rollback of plan %s: %w", id, err)
	}
	if err := failpoint.Check("rollback-after-warehouse"); err != nil {
		return nil, nil, err
	}
	now := c.Now.Now()
	err = c.Store.Update(ctx, func(tx *store.Tx) error {
		if err := tx.SetStatus(ctx, id, p.Status, refill.StatusRolledBack); err != nil {
			return err
		}
		if err := tx.EndOp(ctx, id, opRollback); err != nil {
			return err
		}
		detail := map[string]any{"partitions": len(restored), "from_status": p.Status}
		if force != "" {
			detail["forced"], detail["force_reason"] = forced, force
		}
		if err := tx.Append(ctx, &refill.Event{Kind: refill.EventRollback, Actor: actor, PlanID: id, At: now,
			Detail: refill.Detail(detail)}); err != nil {
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
		return nil, nil, fmt.Errorf("rollback of plan %s: the warehouse is restored but the state store did not record it; run refill rollback %s again to finish: %w", id, id, err)
	}
	st, err := c.Load(ctx, id)
	return st, restored, err
}

// overwritten says why a partition's live rows (of table) are not this
// plan's to restore — someone else wrote them — or "" when they are.
// Digests of two checksum versions (one stored before an upgrade) are
// compared by digesting again, as the stored one's version did, with like:
// the live rows against the run's, the snapshot table against what the
// run found before it.
func overwritten(sp refill.SnapshotPart, table string, live refill.Digest, pub refill.Published, like func(table string, d refill.Digest) (refill.Digest, error)) (string, error) {
	if pub.PlanID == "" {
		return fmt.Sprintf("this plan's run never published it, yet it changed since the snapshot (%d rows then, %d now)", sp.Digest.Rows, live.Rows), nil
	}
	if pub.After != nil {
		now, err := ofVersion(live, *pub.After, func() (refill.Digest, error) { return like(table, *pub.After) })
		if err != nil {
			return "", err
		}
		if now != *pub.After {
			return fmt.Sprintf("it was written since this plan published it (%d rows, checksum %s, when published; %d rows, checksum %s now)", pub.After.Rows, pub.After.Checksum, now.Rows, now.Checksum), nil
		}
	}
	if pub.Before != nil {
		snap, err := ofVersion(sp.Digest, *pub.Before, func() (refill.Digest, error) { return like(sp.SnapshotTable, *pub.Before) })
		if err != nil {
			return "", err
		}
		if snap != *pub.Before {
			return fmt.Sprintf("it changed between the snapshot and this plan's run (%d rows, checksum %s, at the snapshot; %d rows, checksum %s, when the run began), so the snapshot would undo someone else's write", snap.Rows, snap.Checksum, pub.Before.Rows, pub.Before.Checksum), nil
		}
	}
	return "", nil
}

// ofVersion is d, or d digested again by again when its checksum's
// version is not that of other.
func ofVersion(d, other refill.Digest, again func() (refill.Digest, error)) (refill.Digest, error) {
	if d.Comparable(other) {
		return d, nil
	}
	return again()
}

// Signoff records the manual checklist's last step: a person reviewed the
// before/after comparison of a finished run.
func (c *Control) Signoff(ctx context.Context, id, actor, note string) (*State, error) {
	if err := refill.CheckText("--note", note); err != nil {
		return nil, err
	}
	if err := c.BeforeWrite(ctx); err != nil {
		return nil, err
	}
	s, err := c.Load(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := c.require(ctx, ActSignoff, Subject{State: s}, actor); err != nil {
		return nil, err
	}
	now := c.Now.Now()
	step := refill.ChecklistStep{PlanID: id, Step: refill.ChecklistSignoff, Actor: actor, Note: note, At: c.stamp()}
	err = c.Store.Update(ctx, func(tx *store.Tx) error {
		if err := addStep(ctx, tx, step); err != nil {
			return err
		}
		return tx.Append(ctx, &refill.Event{Kind: refill.EventSignoff, Actor: actor, PlanID: id, At: now,
			Detail: refill.Detail(map[string]any{"note": note, "four_eyes_enforced": s.FourEyes})})
	})
	if err != nil {
		return nil, err
	}
	return c.Load(ctx, id)
}
