package control

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/gate"
	"github.com/refill-dev/refill/store"
)

// AcceptRequest names the finding a person says is real data.
type AcceptRequest struct {
	Dataset   string `json:"dataset"`
	Partition string `json:"partition"`
	Check     string `json:"check"`
	// Column names the column of a per-column check (not_null, drift,
	// accepted_values, no_future; earlier>later for time_order).
	Column string `json:"column,omitempty"`
	Reason string `json:"reason"`
}

// perColumn are the checks whose findings name a column.
var perColumn = []string{gate.CheckNotNull, gate.CheckDrift, gate.CheckAccepted, gate.CheckNoFuture, gate.CheckTimeOrder}

// Accept records that a failing finding is real data (a holiday, a launch,
// an outage that happened), as actor: the check passes on that partition
// while the partition measures what the gate measures now, and the
// partition leaves later volume and drift history. It needs an identity
// and a reason, a lead on datasets with an accept_lead_tags tag, and a
// finding that fails now; it is audited and shows in history.
func (c *Control) Accept(ctx context.Context, req AcceptRequest, actor string) (refill.Acceptance, error) {
	var none refill.Acceptance
	if err := c.vouch(ctx, &req, actor, "accepting a finding", fmt.Sprintf("say why %s %s is real data", req.Dataset, req.Partition)); err != nil {
		return none, err
	}
	d, ok := c.Config.Datasets[req.Dataset]
	if !ok {
		return none, refill.NotFoundf("unknown dataset %q (known: %s)", req.Dataset, strings.Join(c.Config.DatasetNames(), ", "))
	}
	if d.Checks == nil || d.Table == "" {
		return none, refill.BadInputf("%s has no checks, so nothing to accept", req.Dataset)
	}
	start, err := refill.PartitionTime(req.Partition, d.Ref().Grain)
	if err != nil {
		return none, fmt.Errorf("--partition: %w", err)
	}
	if now := c.Now.Passed(); start.After(now) {
		return none, refill.BadInputf("%s %s has not begun (it is %s): nothing has been measured that could be accepted", req.Dataset, req.Partition, now.UTC().Format(time.RFC3339))
	}
	switch {
	case req.Check == gate.CheckSchemaDrift:
		return none, refill.BadInputf("schema drift is accepted for the whole dataset: refill schema accept %s --reason ...", req.Dataset)
	case req.Check != gate.CheckVolume && req.Check != gate.CheckUnique && !slices.Contains(perColumn, req.Check):
		return none, refill.BadInputf("unknown check %q: want one of volume, not_null, unique, accepted_values, drift, time_order, no_future", req.Check)
	case slices.Contains(perColumn, req.Check) && req.Column == "":
		return none, refill.BadInputf("--column is required for %s: name the column whose finding is real", req.Check)
	case !slices.Contains(perColumn, req.Check) && req.Check != gate.CheckUnique && req.Column != "":
		return none, refill.BadInputf("%s has no column; leave out --column", req.Check)
	}
	if err := c.require(ctx, ActAccept, Subject{Dataset: d}, actor); err != nil {
		return none, err
	}
	if c.Warehouse == nil {
		return none, fmt.Errorf("accepting a finding needs the warehouse, to measure the partition")
	}
	r, err := refill.ParseRange(req.Partition, req.Partition, refill.NoRangeLimit)
	if err != nil {
		return none, err
	}
	if d.Ref().Grain == refill.GrainDay && r.Hourly {
		return none, refill.BadInputf("--partition %s is an hour; %s's partitions are days", req.Partition, req.Dataset)
	}
	g := &gate.Gate{Config: c.Config, Warehouse: c.Warehouse, Store: c.Store, Now: c.Now}
	res, err := g.Check(ctx, []string{req.Dataset}, r)
	if err != nil {
		return none, err
	}
	var failing []string
	var match, warning *refill.Finding
	for i, f := range res.Findings {
		if f.Partition != req.Partition || f.Check != req.Check {
			continue
		}
		if f.Accepted != nil && (req.Column == "" || f.Column == req.Column) {
			return none, refill.BadInputf("%s %s %s is already accepted, by %s on %s (%s)", req.Dataset, req.Partition, label(f.Check, f.Column), f.Accepted.By, f.Accepted.At.Format("2006-01-02"), refill.OneLine(f.Accepted.Reason))
		}
		if f.Warning {
			warning = &res.Findings[i]
		}
		if f.Passed || f.Warning {
			continue
		}
		failing = append(failing, f.Column)
		if f.Column == req.Column || (req.Check == gate.CheckUnique && req.Column == "") {
			match = &res.Findings[i]
		}
	}
	if match == nil {
		if len(failing) > 0 {
			return none, refill.BadInputf("%s fails on %s %s for column %s, not %q: accept the finding that fails", req.Check, req.Dataset, req.Partition, strings.Join(failing, ", "), req.Column)
		}
		if warning != nil {
			return none, refill.BadInputf("%s on %s %s is a warning, not a failure, so there is nothing to accept: %s", req.Check, req.Dataset, req.Partition, warning.Message)
		}
		return none, refill.BadInputf("%s passes on %s %s: there is no failing finding to accept", label(req.Check, req.Column), req.Dataset, req.Partition)
	}
	a := refill.Acceptance{Dataset: req.Dataset, Partition: req.Partition, Check: req.Check, Column: match.Column,
		By: actor, Reason: req.Reason, At: c.stamp(),
		Measured: res.Measured[gate.MeasureKey(req.Dataset, req.Partition, req.Check, match.Column)]}
	err = c.Store.Update(ctx, func(tx *store.Tx) error {
		if err := tx.Accept(ctx, a); err != nil {
			return err
		}
		return tx.Append(ctx, &refill.Event{Kind: refill.EventFindingAccepted, Actor: actor, Dataset: a.Dataset, Partition: a.Partition, At: c.Now.Now(),
			Detail: refill.Detail(map[string]any{"check": a.Check, "column": a.Column, "reason": a.Reason, "measured": a.Measured,
				"finding": match.Message, "observed": match.Observed, "limit": match.Limit})})
	})
	return a, err
}

// vouch is what accepting and withdrawing both need: a writable store, a
// person (never the watcher) known to users:, and a reason that keeps
// the rule for every human text (refill.CheckText).
// It trims the request's reason and column.
func (c *Control) vouch(ctx context.Context, req *AcceptRequest, actor, doing, why string) error {
	if err := c.BeforeWrite(ctx); err != nil {
		return err
	}
	req.Reason, req.Column = strings.TrimSpace(req.Reason), strings.TrimSpace(req.Column)
	if actor == Anyone {
		return refill.NotPermittedf("%s needs a person's identity: pass --as USER or set REFILL_USER", doing)
	}
	var r reqs
	c.personReqs(&r, actor, doing)
	if len(r.list) > 0 {
		return classed(r.list[0].Class, r.list[0].Why)
	}
	if req.Reason == "" {
		return refill.BadInputf("a reason is required (--reason): %s", why)
	}
	return refill.CheckText("--reason", req.Reason)
}

func label(check, column string) string {
	if column == "" {
		return check
	}
	return check + " on " + column
}

// Revoke withdraws the acceptance in force of one finding, as actor: its
// author or a lead, with a reason. The finding fails again where it fails;
// the partition stays out of history. Audited.
func (c *Control) Revoke(ctx context.Context, req AcceptRequest, actor string) (refill.Acceptance, error) {
	var none refill.Acceptance
	if err := c.vouch(ctx, &req, actor, "withdrawing an acceptance", fmt.Sprintf("say why the acceptance of %s %s %s is withdrawn", req.Dataset, req.Partition, req.Check)); err != nil {
		return none, err
	}
	d, ok := c.Config.Datasets[req.Dataset]
	if !ok {
		return none, refill.NotFoundf("unknown dataset %q (known: %s)", req.Dataset, strings.Join(c.Config.DatasetNames(), ", "))
	}
	all, err := c.Acceptances(ctx, req.Dataset, req.Partition)
	if err != nil {
		return none, err
	}
	var live []refill.Acceptance
	for _, a := range all {
		if a.Revoked == nil && a.Check == req.Check && (a.Column == req.Column || (req.Column == "" && req.Check == gate.CheckUnique)) {
			live = append(live, a)
		}
	}
	if len(live) == 0 {
		return none, refill.NotFoundf("no acceptance of %s on %s %s is in force", label(req.Check, req.Column), req.Dataset, req.Partition)
	}
	if err := c.require(ctx, ActRevoke, Subject{Dataset: d, Acceptances: live}, actor); err != nil {
		return none, err
	}
	a := live[len(live)-1]
	a.Revoked = &refill.Accepted{By: actor, Reason: req.Reason, At: c.stamp()}
	err = c.Store.Update(ctx, func(tx *store.Tx) error {
		n, err := tx.Revoke(ctx, a, *a.Revoked)
		if err != nil {
			return err
		}
		if n == 0 {
			return refill.NotFoundf("no acceptance of %s on %s %s is in force (withdrawn just now?)", label(req.Check, req.Column), req.Dataset, req.Partition)
		}
		return tx.Append(ctx, &refill.Event{Kind: refill.EventAcceptanceRevoked, Actor: actor, Dataset: a.Dataset, Partition: a.Partition, At: c.Now.Now(),
			Detail: refill.Detail(map[string]any{"check": a.Check, "column": a.Column, "reason": req.Reason, "accepted_by": a.By, "measured": a.Measured})})
	})
	return a, err
}
