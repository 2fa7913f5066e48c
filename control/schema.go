package control

import (
	"context"
	"fmt"
	"strings"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
)

// AcceptSchema makes dataset's current columns the baseline schema drift is
// judged against: what a person does when an upstream change was intended.
// It needs an identity and a reason, and is audited with both schemas, so
// that quietly moving the baseline leaves a trace.
func (c *Control) AcceptSchema(ctx context.Context, dataset, actor, reason string) (refill.SchemaSnapshot, error) {
	if err := refill.CheckText("--reason", strings.TrimSpace(reason)); err != nil {
		return refill.SchemaSnapshot{}, err
	}
	if err := c.BeforeWrite(ctx); err != nil {
		return refill.SchemaSnapshot{}, err
	}
	if strings.TrimSpace(reason) == "" {
		return refill.SchemaSnapshot{}, refill.BadInputf("--reason is required: say why %s's new schema is right", dataset)
	}
	d, ok := c.Config.Datasets[dataset]
	if !ok {
		return refill.SchemaSnapshot{}, refill.NotFoundf("unknown dataset %q (known: %s)", dataset, strings.Join(c.Config.DatasetNames(), ", "))
	}
	if d.Table == "" {
		return refill.SchemaSnapshot{}, refill.BadInputf("%s has no table, so it has no schema to accept", dataset)
	}
	if err := c.require(ctx, ActSchemaAccept, Subject{Dataset: d}, actor); err != nil {
		return refill.SchemaSnapshot{}, err
	}
	cols, err := c.Warehouse.Columns(ctx, d.Table)
	if err != nil {
		return refill.SchemaSnapshot{}, fmt.Errorf("dataset %s: %w", dataset, err)
	}
	prev, had, err := c.Store.SchemaBaseline(ctx, dataset)
	if err != nil {
		return refill.SchemaSnapshot{}, err
	}
	snap := refill.SchemaSnapshot{Dataset: dataset, Columns: cols, AcceptedBy: actor, Reason: strings.TrimSpace(reason)}
	detail := map[string]any{"reason": snap.Reason, "columns": cols}
	if had {
		detail["previous"] = prev.Columns
	}
	err = c.Store.Update(ctx, func(tx *store.Tx) error {
		if err := tx.AcceptSchema(ctx, snap); err != nil {
			return err
		}
		return tx.Append(ctx, &refill.Event{Kind: refill.EventSchemaAccepted, Actor: actor, Dataset: dataset, At: c.Now.Now(),
			Detail: refill.Detail(detail)})
	})
	return snap, err
}
