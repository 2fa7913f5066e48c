package control

import (
	"context"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/openlineage"
	"github.com/refill-dev/refill/store"
)

// RecordLineage records the input → output edges an OpenLineage run event
// reports, as actor, in one transaction with the audit entry that says who
// reported which (new edges can raise a plan's tier; a repeat adds
// nothing and is not audited). It returns the edges the event reports and
// how many were new. An event more than a day ahead of refill's clock is
// refused: it would pin an edge's last sighting there for good.
func (c *Control) RecordLineage(ctx context.Context, actor string, ev *openlineage.Event) (edges []openlineage.Edge, added int, err error) {
	if err := c.BeforeWrite(ctx); err != nil {
		return nil, 0, err
	}
	if ev.EventTime.After(c.Now.Passed().Add(24 * time.Hour)) {
		return nil, 0, refill.BadInputf("/eventTime: %s is more than a day ahead of refill's clock", ev.EventTime.Format(time.RFC3339))
	}
	if edges, err = ev.Edges(); err != nil {
		return nil, 0, err
	}
	rows := make([]store.LineageEdge, len(edges))
	for i, e := range edges {
		rows[i] = store.LineageEdge{Input: e.Input, Output: e.Output, Job: ev.Job, Producer: ev.Producer,
			FirstSeen: ev.EventTime, LastSeen: ev.EventTime}
	}
	added, err = c.Store.RecordLineage(ctx, rows, store.LineageReport{Actor: actor,
		Job: ev.Job.Namespace + "/" + ev.Job.Name, Producer: ev.Producer, Run: ev.RunID})
	return edges, added, err
}
