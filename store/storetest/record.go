package storetest

import (
	"context"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
)

// A decision row counts only with the audit entry control writes beside
// it, in the same transaction (store/ledger.go). These write both, as
// control does, so the suite (and other packages' tests that write the
// store directly) exercise rows that count; the tests of forged rows
// write the row alone.

func RecordApproval(ctx context.Context, tx *store.Tx, a refill.Approval) error {
	if err := tx.AddApproval(ctx, a); err != nil {
		return err
	}
	kind := refill.EventApproval
	if a.Decision == refill.DecisionReject {
		kind = refill.EventRejection
	}
	return tx.Append(ctx, &refill.Event{Kind: kind, Actor: a.Actor, PlanID: a.PlanID, At: a.At, Detail: refill.Detail(map[string]any{"hash": a.PlanHash, "note": a.Note})})
}

func RecordStep(ctx context.Context, tx *store.Tx, st refill.ChecklistStep) error {
	if err := tx.AddStep(ctx, st); err != nil {
		return err
	}
	return tx.Append(ctx, &refill.Event{Kind: refill.EventKind(st.Step), Actor: st.Actor, PlanID: st.PlanID, At: st.At})
}

func RecordAccept(ctx context.Context, tx *store.Tx, a refill.Acceptance) error {
	if err := tx.Accept(ctx, a); err != nil {
		return err
	}
	return tx.Append(ctx, &refill.Event{Kind: refill.EventFindingAccepted, Actor: a.By, Dataset: a.Dataset, Partition: a.Partition, At: a.At,
		Detail: refill.Detail(map[string]any{"check": a.Check, "column": a.Column, "reason": a.Reason, "measured": a.Measured})})
}

func RecordRevoke(ctx context.Context, tx *store.Tx, a refill.Acceptance, r refill.Accepted) (int64, error) {
	n, err := tx.Revoke(ctx, a, r)
	if err != nil {
		return n, err
	}
	return n, tx.Append(ctx, &refill.Event{Kind: refill.EventAcceptanceRevoked, Actor: r.By, Dataset: a.Dataset, Partition: a.Partition, At: r.At,
		Detail: refill.Detail(map[string]any{"check": a.Check, "column": a.Column, "reason": r.Reason})})
}

func RecordFreeze(ctx context.Context, tx *store.Tx, f *refill.Freeze, by string) (refill.Freeze, bool, error) {
	was, frozen, err := tx.SetFreeze(ctx, f)
	if err != nil {
		return was, frozen, err
	}
	e := &refill.Event{Kind: refill.EventUnfreeze, Actor: by, Detail: refill.Detail(map[string]any{"reason": "lifted"})}
	if f != nil {
		e = &refill.Event{Kind: refill.EventFreeze, Actor: f.By, At: f.At, Detail: refill.Detail(map[string]any{"reason": f.Reason})}
	}
	return was, frozen, tx.Append(ctx, e)
}

func RecordCancel(ctx context.Context, tx *store.Tx, c refill.CancelRequest) error {
	if err := tx.RequestCancel(ctx, c); err != nil {
		return err
	}
	return tx.Append(ctx, &refill.Event{Kind: refill.EventCancelRequested, Actor: c.Actor, PlanID: c.PlanID, At: c.At, Detail: refill.Detail(map[string]any{"reason": c.Reason})})
}

func RecordFlags(ctx context.Context, tx *store.Tx, flags []refill.Flag) error {
	if err := tx.SaveFlags(ctx, flags); err != nil {
		return err
	}
	for _, f := range flags {
		if err := tx.Append(ctx, &refill.Event{Kind: refill.EventGateResult, Actor: "alice", PlanID: f.PlanID, Dataset: f.Dataset, Partition: f.Partition,
			Detail: refill.Detail(map[string]any{"check": f.Check, "passed": false})}); err != nil {
			return err
		}
	}
	return nil
}

// recordSeen records the schemas a plan's gate saw, with the plan's
// gate entry that carries their digests.
func RecordSeen(ctx context.Context, tx *store.Tx, planID string, snaps []refill.SchemaSnapshot) error {
	if err := tx.SaveSchemas(ctx, snaps); err != nil {
		return err
	}
	return tx.Append(ctx, &refill.Event{Kind: refill.EventGateResult, Actor: "alice", PlanID: planID,
		Detail: refill.Detail(map[string]any{"passed": true, "schemas": store.SchemaDigests(snaps)})})
}

func RecordSchemaAccept(ctx context.Context, tx *store.Tx, snap refill.SchemaSnapshot) error {
	if err := tx.AcceptSchema(ctx, snap); err != nil {
		return err
	}
	return tx.Append(ctx, &refill.Event{Kind: refill.EventSchemaAccepted, Actor: snap.AcceptedBy, Dataset: snap.Dataset, PlanID: snap.PlanID,
		Detail: refill.Detail(map[string]any{"reason": snap.Reason, "columns": snap.Columns})})
}

func RecordToken(ctx context.Context, tx *store.Tx, tok refill.Token, hash string) error {
	if err := tx.CreateToken(ctx, tok, hash); err != nil {
		return err
	}
	return tx.Append(ctx, &refill.Event{Kind: refill.EventTokenCreated, Actor: tok.CreatedBy, At: tok.CreatedAt,
		Detail: refill.Detail(map[string]any{"token": tok.ID, "user": tok.User, "hash": hash, "expires_at": tok.ExpiresAt})})
}

func RecordTokenRevoked(ctx context.Context, tx *store.Tx, id, actor string, at time.Time) (refill.Token, error) {
	tok, err := tx.RevokeToken(ctx, id, at)
	if err != nil {
		return tok, err
	}
	return tok, tx.Append(ctx, &refill.Event{Kind: refill.EventTokenRevoked, Actor: actor, At: at, Detail: refill.Detail(map[string]any{"token": id, "user": tok.User})})
}

// RecordPlanRow stores a plan with the entry that records it, as
// store.RecordPlan does, but alone: nothing else it would write (schemas,
// flags, supersessions).
func RecordPlanRow(ctx context.Context, tx *store.Tx, p *refill.Plan) error {
	if err := tx.SavePlan(ctx, p); err != nil {
		return err
	}
	actor := p.Request.RequestedBy
	if actor == "" {
		actor = "ana"
	}
	return tx.Append(ctx, &refill.Event{Kind: refill.EventPlanCreated, Actor: actor, PlanID: p.ID, At: p.CreatedAt,
		Detail: refill.Detail(map[string]any{"hash": p.Hash, "tier": p.Tier, "status": p.Status})})
}
