// Package watch is refill's answer to blind catch-up: a watcher that finds
// the gaps and failures of scheduled datasets, turns each into a plan as the
// reserved identity "watcher", and runs it only when the plan is auto and
// its gate passes — otherwise it asks people, through the plan's own
// notice. Every decision is audited, once.
package watch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/planner"
	"github.com/refill-dev/refill/queue"
	"github.com/refill-dev/refill/store"
)

// historyDays is how far back before a partition the watcher looks to
// decide whether it should hold rows.
const historyDays = 28

// Watcher finds gaps and acts on them.
type Watcher struct {
	Config    *refill.Config
	Store     *store.Store
	Warehouse refill.Warehouse
	Control   *control.Control
	// Now is the "as of" clock (REFILL_NOW): what "due" means.
	Now refill.Clock
	// Apply runs a plan the watcher decided to run or resume. nil runs it
	// with Control.Apply, to completion (refill watch --once); refill
	// serve starts it in the background instead.
	Apply func(ctx context.Context, id string) error
	// DAGRuns, when set, reports the partitions of an airflow dataset in
	// [from, to] whose DAG run failed or never ran (the orchestrator's own
	// view of the gaps).
	DAGRuns func(ctx context.Context, d *refill.Dataset, from, to string) (failed, missing []string, err error)
	// Core, when set, gives the config and control each tick decides with
	// (refill serve's, which follow changes to refill.yaml); Config and
	// Control are used otherwise.
	Core func(ctx context.Context) (*refill.Config, *control.Control, error)
}

// Gap is a contiguous run of partitions of one dataset that are due and
// missing, or whose last run failed.
type Gap struct {
	Dataset string   `json:"dataset"`
	From    string   `json:"from"`
	To      string   `json:"to"`
	Missing []string `json:"missing,omitempty"`
	Failed  []string `json:"failed,omitempty"`
}

// Reason is the gap in words, the reason of the plan the watcher makes.
func (g Gap) Reason() string {
	var parts []string
	if n := len(g.Missing); n > 0 {
		parts = append(parts, fmt.Sprintf("%d partition%s missing", n, plural(n)))
	}
	if n := len(g.Failed); n > 0 {
		parts = append(parts, fmt.Sprintf("%d partition%s failed", n, plural(n)))
	}
	rng := g.From
	if g.To != g.From {
		rng += ".." + g.To
	}
	return strings.Join(parts, ", ") + ": " + rng
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// Action is what the watcher did about a gap.
type Action string

// Actions.
const (
	// Planned: a new plan, which now waits for people (or was blocked).
	Planned Action = "planned"
	// Applied: a new auto plan whose gate passed, run.
	Applied Action = "applied"
	// Resumed: a failed auto plan, run again.
	Resumed Action = "resumed"
	// Waiting: a plan for the gap is pending, approved, ready or running.
	Waiting Action = "waiting"
	// Asked: a plan for the gap needs people (failed and not auto).
	Asked Action = "asked"
	// Unchanged: a plan for the gap was blocked, rejected or cancelled, and
	// neither the source's data nor the config changed since.
	Unchanged Action = "unchanged"
	// Frozen: an auto plan that the freeze keeps from running.
	Frozen Action = "frozen"
)

// Decision is the watcher's decision about one gap.
type Decision struct {
	Gap
	Action Action        `json:"action"`
	PlanID string        `json:"plan_id,omitempty"`
	Status refill.Status `json:"status,omitempty"`
	Tier   refill.Tier   `json:"tier,omitempty"`
	Why    string        `json:"why"`
	// Err is what went wrong running the plan, if it did.
	Err string `json:"error,omitempty"`
}

// Report is one tick.
type Report struct {
	At        time.Time      `json:"at"`
	Datasets  int            `json:"datasets"`
	Gaps      []Gap          `json:"gaps"`
	Decisions []Decision     `json:"decisions"`
	Freeze    *refill.Freeze `json:"freeze,omitempty"`
	// Errors are the datasets and gaps the tick could not look at or
	// decide, each with why; the others were decided all the same.
	Errors []string `json:"errors,omitempty"`
	// Skipped is set when another tick was running: this one did nothing.
	Skipped string `json:"skipped,omitempty"`
}

// tickLease names the lease a tick holds, so that two ticks (refill watch
// --once from cron beside refill serve, two replicas) never decide at
// once and plan one gap twice.
const tickLease = "~watcher"

// maxResumes is how often the watcher resumes a failed auto plan of its own
// before it hands it to people.
const maxResumes = 2

// Tick finds the gaps of every scheduled dataset and decides about each.
func (w *Watcher) Tick(ctx context.Context) (Report, error) {
	if w.Core != nil {
		cfg, c, err := w.Core(ctx)
		if err != nil {
			return Report{}, err
		}
		now := *w
		now.Config, now.Control, now.Core = cfg, c, nil
		return now.Tick(ctx)
	}
	rep := Report{At: w.Now.Now(), Gaps: []Gap{}, Decisions: []Decision{}}
	holder := fmt.Sprintf("watch:%d:%d", os.Getpid(), time.Now().UnixNano())
	err := w.Store.Update(ctx, func(tx *store.Tx) error {
		return tx.TakeLease(ctx, tickLease, holder, time.Now().Add(queue.WatchTimeout), func(store.Lease) bool { return true })
	})
	if errors.Is(err, refill.ErrNotPermitted) {
		rep.Skipped = "another tick is running"
		return rep, nil
	}
	if err != nil {
		return rep, err
	}
	defer func() {
		_ = w.Store.Update(context.WithoutCancel(ctx), func(tx *store.Tx) error { return tx.ReleaseLease(ctx, tickLease, holder) })
	}()
	f, err := w.Control.Frozen(ctx)
	if err != nil {
		return rep, err
	}
	rep.Freeze = f
	gaps, n, errs, err := w.gaps(ctx)
	if err != nil {
		return rep, err
	}
	rep.Datasets, rep.Gaps, rep.Errors = n, gaps, errs
	for _, g := range gaps {
		d, err := w.decide(ctx, g, f != nil)
		if err != nil {
			// One gap that cannot be decided must not stop the others.
			rep.Errors = append(rep.Errors, fmt.Sprintf("%s %s..%s: %v", g.Dataset, g.From, g.To, err))
			continue
		}
		rep.Decisions = append(rep.Decisions, d)
	}
	return rep, nil
}

// Gaps finds, for every dataset with a schedule and a job, the partitions
// within its horizon that are due and missing (no rows where the same
// weekday — at hour grain the same hour of the same weekday — held rows in
// the four weeks before), or whose last run failed; contiguous ones form a
// gap. Each dataset costs one grouped count in the warehouse and one query
// of the audit log, never one per partition. It returns how many datasets
// it looked at.
func (w *Watcher) Gaps(ctx context.Context) ([]Gap, int, error) {
	gaps, n, errs, err := w.gaps(ctx)
	if err == nil && len(errs) > 0 {
		err = errors.New(strings.Join(errs, "; "))
	}
	return gaps, n, err
}

// gaps is Gaps that goes on past a dataset it cannot look at, and says
// which (errs); err is a failure of the state store.
func (w *Watcher) gaps(ctx context.Context) (out []Gap, n int, errs []string, err error) {
	now := w.Now.Now()
	for _, name := range w.Config.DatasetNames() {
		d := w.Config.Datasets[name]
		if d.Schedule == nil || d.Job == nil {
			continue
		}
		n++
		due := Due(d, now)
		if len(due) == 0 {
			continue
		}
		bad := map[string]string{}
		if d.Table != "" {
			ref := d.Ref()
			start, err := refill.PartitionTime(due[0], ref.Grain)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s: %v", name, err))
				continue
			}
			from := refill.FormatPartition(start.AddDate(0, 0, -historyDays), ref.Grain)
			counts, err := w.Warehouse.PartitionCounts(ctx, ref, from, due[len(due)-1])
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s: %v", name, err))
				continue
			}
			for _, p := range due {
				if counts[p] == 0 && expected(counts, bad, p, due[0], ref.Season()) {
					bad[p] = "missing"
				}
			}
		}
		outcomes, err := w.Store.LastOutcomes(ctx, name, due[0], due[len(due)-1])
		if err != nil {
			return nil, n, errs, err
		}
		for p, o := range outcomes {
			if o == store.OutcomeFailed {
				bad[p] = "failed"
			}
		}
		if w.DAGRuns != nil && d.Job.Kind == refill.JobAirflow {
			failed, missing, err := w.DAGRuns(ctx, d, due[0], due[len(due)-1])
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s: asking Airflow: %v", name, err))
				continue
			}
			for _, p := range missing {
				if _, ok := bad[p]; !ok && slices.Contains(due, p) {
					bad[p] = "missing"
				}
			}
			for _, p := range failed {
				if slices.Contains(due, p) {
					bad[p] = "failed"
				}
			}
		}
		out = append(out, group(name, due, bad)...)
	}
	return out, n, errs, nil
}

// Due lists the partitions of d within its schedule's horizon that should
// exist at now: those that ended at least schedule.lag ago, the newest
// first-to-last over horizon days.
func Due(d *refill.Dataset, now time.Time) []string {
	s := d.Schedule
	g := d.Ref().Grain
	step := 24 * time.Hour
	if g == refill.GrainHour {
		step = time.Hour
	}
	end := now.UTC().Add(-time.Duration(s.Lag))
	last := end.Truncate(step).Add(-step)
	if g == refill.GrainDay {
		y, m, dd := end.Date()
		last = time.Date(y, m, dd, 0, 0, 0, 0, time.UTC).AddDate(0, 0, -1)
	}
	count := s.Horizon
	if g == refill.GrainHour {
		count *= 24
	}
	out := make([]string, 0, count)
	for i := count - 1; i >= 0; i-- {
		out = append(out, refill.FormatPartition(last.Add(-time.Duration(i)*step), g))
	}
	return out
}

// expected reports whether partition p should hold rows: the same slot of
// the week (in the dataset's timezone) held rows (a positive median) in the
// four weeks before it.
// Partitions already found missing are not history — an outage longer
// than a week would otherwise hide its own later days — and when the
// four weeks hold nothing else, the four weeks before the horizon decide.
func expected(counts map[string]int64, missing map[string]string, p, first string, se refill.Season) bool {
	g := se.Grain
	t, ok := se.Local(p)
	if !ok {
		return false
	}
	slot := func(base time.Time, skipMissing bool) []int64 {
		var hist []int64
		for w := 1; w <= historyDays/7; w++ {
			q := refill.FormatPartition(base.AddDate(0, 0, -7*w), g)
			if skipMissing && missing[q] != "" {
				continue
			}
			hist = append(hist, counts[q])
		}
		return hist
	}
	hist := slot(t, true)
	if len(hist) == 0 {
		// Every same-slot partition before p is itself missing: judge by
		// the same slot before the horizon began.
		f, ok := se.Local(first)
		if !ok {
			return false
		}
		back := t
		for !back.Before(f) {
			back = back.AddDate(0, 0, -7)
		}
		hist = slot(back.AddDate(0, 0, 7), false)
	}
	slices.Sort(hist)
	return len(hist) > 0 && hist[len(hist)/2] > 0
}

// group splits the bad partitions of due into contiguous gaps.
func group(dataset string, due []string, bad map[string]string) []Gap {
	var out []Gap
	var cur *Gap
	for _, p := range due {
		kind, ok := bad[p]
		if !ok {
			cur = nil
			continue
		}
		if cur == nil {
			out = append(out, Gap{Dataset: dataset, From: p})
			cur = &out[len(out)-1]
		}
		cur.To = p
		if kind == "failed" {
			cur.Failed = append(cur.Failed, p)
		} else {
			cur.Missing = append(cur.Missing, p)
		}
	}
	return out
}

// decide acts on one gap: by the status of the newest plan over it, or by
// planning it.
func (w *Watcher) decide(ctx context.Context, g Gap, frozen bool) (Decision, error) {
	dec := Decision{Gap: g}
	touches, err := w.Store.PlansTouching(ctx, g.Dataset, g.From, g.To)
	if err != nil {
		return dec, err
	}
	if len(touches) == 0 {
		return w.plan(ctx, g, frozen, "")
	}
	t := touches[0]
	dec.PlanID, dec.Status, dec.Tier = t.PlanID, t.Status, t.Tier
	p, err := w.Store.Plan(ctx, t.PlanID)
	if err != nil {
		return dec, err
	}
	stale := control.Stale(p, w.Config)
	// A plan that says running while nothing runs it (its holder paused
	// it for a restart, or died and its lease lapsed) is resumed: it was
	// approved and began, and waiting on it would wait for ever. One that
	// may not run as it is (stale, or auto while frozen) is treated as
	// failed.
	status, failed := t.Status, "failed"
	if status == refill.StatusRunning {
		h, err := w.Control.Holder(ctx, t.PlanID)
		if err != nil {
			return dec, err
		}
		if h.Orphaned {
			if len(stale) == 0 && !(frozen && t.Tier == refill.TierAuto) {
				return w.run(ctx, dec, Resumed, fmt.Sprintf("plan %s says running but nobody runs it (its holder paused it for a restart, or died): resuming it", t.PlanID))
			}
			status, failed = refill.StatusFailed, "says running but nothing runs it (its run's holder is gone)"
		}
	}
	switch status {
	case refill.StatusPending, refill.StatusApproved, refill.StatusReady, refill.StatusFailed:
		// A plan that may still run, but not as it is now: the config (a
		// job, a check) changed since it was sealed. A new plan of the same
		// request supersedes it.
		if len(stale) > 0 {
			return w.plan(ctx, g, frozen, fmt.Sprintf("plan %s is stale (%s)", t.PlanID, stale[0]))
		}
	}
	switch status {
	case refill.StatusPending, refill.StatusApproved, refill.StatusReady, refill.StatusRunning, refill.StatusNeedsReview:
		if t.Status == refill.StatusReady && t.Tier == refill.TierAuto && !frozen && t.RequestedBy == refill.Watcher {
			// The watcher's own auto plan that never ran (a tick that
			// stopped between planning and applying): run it.
			return w.run(ctx, dec, Applied, "its auto plan had not run yet")
		}
		dec.Action, dec.Why = Waiting, fmt.Sprintf("plan %s is %s", t.PlanID, t.Status)
		if frozen && t.Tier == refill.TierAuto {
			dec.Action, dec.Why = Frozen, fmt.Sprintf("plan %s is auto but refill is frozen", t.PlanID)
		}
		return dec, w.record(ctx, dec, "")
	case refill.StatusExpired:
		return w.plan(ctx, g, frozen, fmt.Sprintf("plan %s expired", t.PlanID))
	case refill.StatusFailed:
		// The watcher resumes its own auto plan a few times; a plan a
		// person made, or one that keeps failing, is theirs to look at.
		resumes, err := w.resumes(ctx, t.PlanID)
		if err != nil {
			return dec, err
		}
		switch {
		case t.Tier != refill.TierAuto:
			dec.Action, dec.Why = Asked, fmt.Sprintf("plan %s %s and is %s: a person resumes it (refill apply %s) or rejects it", t.PlanID, failed, t.Tier, t.PlanID)
		case t.RequestedBy != refill.Watcher:
			dec.Action, dec.Why = Asked, fmt.Sprintf("plan %s %s; %s made it, so they resume it (refill apply %s) or reject it", t.PlanID, failed, t.RequestedBy, t.PlanID)
		case resumes >= maxResumes:
			dec.Action, dec.Why = Asked, fmt.Sprintf("plan %s %s again after %d resume(s): a person looks at it now (refill show %s)", t.PlanID, failed, resumes, t.PlanID)
		case frozen:
			dec.Action, dec.Why = Frozen, fmt.Sprintf("plan %s %s; it is auto, but refill is frozen", t.PlanID, failed)
		default:
			return w.run(ctx, dec, Resumed, fmt.Sprintf("plan %s %s and is auto (resume %d of %d)", t.PlanID, failed, resumes+1, maxResumes))
		}
		return dec, w.record(ctx, dec, "")
	case refill.StatusApplied:
		// Applied, and still a gap: if the run left rows there, they went
		// missing since — a new gap, planned again; if the job itself
		// produced nothing, planning again would produce nothing again.
		pubs, err := w.Store.Published(ctx, t.PlanID)
		if err != nil {
			return dec, err
		}
		for _, pub := range pubs {
			if pub.Dataset == g.Dataset && pub.Partition >= g.From && pub.Partition <= g.To && pub.After != nil && pub.After.Rows > 0 {
				return w.plan(ctx, g, frozen, fmt.Sprintf("plan %s left %d row(s) in %s, gone since", t.PlanID, pub.After.Rows, pub.Partition))
			}
		}
	}
	// Blocked, rejected, cancelled, rolled back, applied with nothing to
	// show, superseded: the gate or people said no, or the job produced
	// nothing. Plan again only when the source's data or the config
	// changed since.
	fp, err := w.fingerprint(ctx, p, g)
	if err != nil {
		return dec, err
	}
	prev, seen, err := w.Store.WatchState(ctx, t.PlanID)
	if err != nil {
		return dec, err
	}
	if len(stale) > 0 {
		return w.plan(ctx, g, frozen, fmt.Sprintf("plan %s was %s, and the config changed since (%s)", t.PlanID, t.Status, stale[0]))
	}
	if seen && prev.Fingerprint != "" && prev.Fingerprint != fp {
		changed, err := w.changedSince(ctx, p, g, prev.Fingerprint)
		if err != nil {
			return dec, err
		}
		if changed {
			return w.plan(ctx, g, frozen, fmt.Sprintf("plan %s was %s, and the source's data changed since", t.PlanID, t.Status))
		}
	}
	dec.Action, dec.Why = Unchanged, fmt.Sprintf("plan %s was %s; nothing changed since (the source's data, the config): not planning again", t.PlanID, t.Status)
	return dec, w.record(ctx, dec, fp)
}

// plan makes the gap's plan as the watcher, and runs it if it is auto and
// its gate passed (and refill is not frozen).
func (w *Watcher) plan(ctx context.Context, g Gap, frozen bool, because string) (Decision, error) {
	dec := Decision{Gap: g}
	// A plan the gate blocked comes with its error: it is recorded below.
	p, err := w.Control.Plan(ctx, refill.Watcher, planner.Request{Targets: []string{g.Dataset}, From: g.From, To: g.To, Reason: g.Reason()})
	if err != nil && !errors.Is(err, refill.ErrBlocked) {
		return dec, err
	}
	dec.PlanID, dec.Status, dec.Tier = p.ID, p.Status, p.Tier
	prefix := ""
	if because != "" {
		prefix = because + "; "
	}
	fp, err := w.fingerprint(ctx, p, g)
	if err != nil {
		return dec, err
	}
	switch {
	case p.Status == refill.StatusBlocked:
		dec.Action, dec.Why = Planned, prefix+fmt.Sprintf("the source gate blocked it (%d failed check(s)): people are told, and it is planned again when the source's data changes", p.Gate.Failed())
	case p.Tier != refill.TierAuto:
		dec.Action, dec.Why = Planned, prefix+fmt.Sprintf("it is %s (%s): people decide", p.Tier, strings.Join(p.Reasons, "; "))
	case frozen:
		dec.Action, dec.Why = Frozen, prefix+"it is auto, but refill is frozen"
	default:
		if err := w.record(ctx, Decision{Gap: g, Action: Planned, PlanID: p.ID, Status: p.Status, Tier: p.Tier, Why: prefix + "auto, and its gate passed: running it"}, fp); err != nil {
			return dec, err
		}
		return w.run(ctx, dec, Applied, prefix+"auto, and its gate passed")
	}
	return dec, w.record(ctx, dec, fp)
}

// run applies (or resumes) an auto plan.
func (w *Watcher) run(ctx context.Context, dec Decision, act Action, why string) (Decision, error) {
	dec.Action, dec.Why = act, why
	if err := w.record(ctx, dec, ""); err != nil {
		return dec, err
	}
	apply := w.Apply
	if apply == nil {
		apply = func(ctx context.Context, id string) error { return w.Control.Apply(ctx, id, refill.Watcher) }
	}
	if err := apply(ctx, dec.PlanID); err != nil {
		dec.Err = err.Error()
	}
	if p, err := w.Store.Plan(ctx, dec.PlanID); err == nil {
		dec.Status = p.Status
	}
	return dec, nil
}

// record audits a decision, once: a decision that repeats the last one
// about the same plan (a plan still pending at the next tick) is not
// recorded again.
func (w *Watcher) record(ctx context.Context, dec Decision, fp string) error {
	if dec.PlanID == "" {
		return nil
	}
	prev, seen, err := w.Store.WatchState(ctx, dec.PlanID)
	if err != nil {
		return err
	}
	// Waiting on the same plan tick after tick is one decision; running a
	// plan (again) is a new one each time.
	acts := dec.Action == Applied || dec.Action == Resumed
	if !acts && seen && prev.Action == string(dec.Action) && (fp == "" || prev.Fingerprint == fp) {
		return nil
	}
	if fp == "" && seen {
		fp = prev.Fingerprint
	}
	return w.Store.Update(ctx, func(tx *store.Tx) error {
		if err := tx.SetWatchState(ctx, store.WatchState{PlanID: dec.PlanID, Dataset: dec.Dataset, Action: string(dec.Action), Fingerprint: fp, At: time.Now()}); err != nil {
			return err
		}
		return tx.Append(ctx, &refill.Event{Kind: refill.EventWatch, Actor: refill.Watcher, PlanID: dec.PlanID, Dataset: dec.Dataset, At: w.Now.Now(),
			Detail: refill.Detail(map[string]any{"from": dec.From, "to": dec.To, "missing": dec.Missing, "failed": dec.Failed,
				"action": dec.Action, "status": dec.Status, "tier": dec.Tier, "why": dec.Why})})
	})
}

// fingerprint is what the gap's plan depends on in the warehouse: the
// rows of the inputs its gate checked, and of the dataset's upstreams, over
// the gap — their checksums where the warehouse gives them (a source
// re-delivered with the same row counts is a change), else their counts.
// A change in it is a change in the source's data.
func (w *Watcher) fingerprint(ctx context.Context, p *refill.Plan, g Gap) (string, error) {
	return w.fingerprintAt(ctx, p, g, 0)
}

// changedSince reports whether the data behind a gap's plan changed since
// fingerprint prev was taken, now that its fingerprint is another. A
// fingerprint taken before an upgrade changed the warehouse's checksums
// holds version 1 checksums: taken again the old way, it is the same if the
// data are.
func (w *Watcher) changedSince(ctx context.Context, p *refill.Plan, g Gap, prev string) (bool, error) {
	if _, ok := w.Warehouse.(refill.VersionedDigester); !ok {
		return true, nil
	}
	old, err := w.fingerprintAt(ctx, p, g, refill.DigestV1)
	if err != nil {
		return false, err
	}
	return old != prev, nil
}

// fingerprintAt is fingerprint with the checksums of the given version (0:
// the warehouse's own).
func (w *Watcher) fingerprintAt(ctx context.Context, p *refill.Plan, g Gap, version int) (string, error) {
	inputs := slices.Clone(p.Gate.Checked)
	d := w.Config.Datasets[g.Dataset]
	if d != nil {
		inputs = append(inputs, d.Upstream...)
	}
	sort.Strings(inputs)
	inputs = slices.Compact(inputs)
	gapGrain := refill.GrainDay
	if d != nil {
		gapGrain = d.Ref().Grain
	}
	h := sha256.New()
	for _, in := range inputs {
		u := w.Config.Datasets[in]
		if u == nil || u.Table == "" {
			continue
		}
		ref := u.Ref()
		from, to, err := regrain(g.From, g.To, gapGrain, ref.Grain)
		if err != nil {
			return "", fmt.Errorf("fingerprint of %s: %w", in, err)
		}
		fmt.Fprintf(h, "%s\n", in)
		// A finding accepted as real data since changes the gate's verdict
		// as surely as new data does; none leaves the fingerprint as it was.
		acc, err := w.Store.Acceptances(ctx, in, "")
		if err != nil {
			return "", fmt.Errorf("fingerprint of %s: %w", in, err)
		}
		for _, a := range acc {
			if a.Partition >= from && a.Partition <= to {
				fmt.Fprintf(h, "accepted %s %s %s %s\n", a.Partition, a.Check, a.Column, a.At.UTC().Format(time.RFC3339Nano))
				if a.Revoked != nil {
					fmt.Fprintf(h, "revoked %s\n", a.Revoked.At.UTC().Format(time.RFC3339Nano))
				}
			}
		}
		if dg := w.Warehouse; dg != nil {
			if rng, err := refill.ParseRange(from, to, refill.NoRangeLimit); err == nil {
				if parts := rng.Partitions(ref.Grain); len(parts) <= maxDigests {
					for _, part := range parts {
						var sum refill.Digest
						var err error
						if version == 0 {
							sum, err = dg.Digest(ctx, ref, part)
						} else {
							sum, err = refill.DigestAt(ctx, dg, ref, part, version)
						}
						if err != nil {
							return "", fmt.Errorf("fingerprint of %s %s: %w", in, part, err)
						}
						fmt.Fprintf(h, "%s=%d:%s\n", part, sum.Rows, sum.Checksum)
					}
					continue
				}
			}
		}
		counts, err := w.Warehouse.PartitionCounts(ctx, ref, from, to)
		if err != nil {
			return "", fmt.Errorf("fingerprint of %s: %w", in, err)
		}
		keys := make([]string, 0, len(counts))
		for k := range counts {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(h, "%s=%d\n", k, counts[k])
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// maxDigests bounds the partitions a fingerprint checksums one by one;
// past it, counts (one grouped query) stand for the data.
const maxDigests = 62

// regrain gives the partitions of grain to that cover [from, to] of grain
// from: a day is its 24 hours, an hour is its day.
func regrain(from, to string, g, want refill.Grain) (string, string, error) {
	if g == want {
		return from, to, nil
	}
	f, err := refill.PartitionTime(from, g)
	if err != nil {
		return "", "", err
	}
	t, err := refill.PartitionTime(to, g)
	if err != nil {
		return "", "", err
	}
	if g == refill.GrainDay { // to hours
		return refill.FormatPartition(f, want), refill.FormatPartition(t.Add(23*time.Hour), want), nil
	}
	return refill.FormatPartition(f, want), refill.FormatPartition(t, want), nil // hours to their days
}

// resumes counts the times the watcher resumed plan id.
func (w *Watcher) resumes(ctx context.Context, id string) (int, error) {
	evs, err := w.Store.Audit(ctx, store.AuditFilter{PlanID: id, Kind: refill.EventWatch})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range evs {
		var det struct {
			Action Action `json:"action"`
		}
		if json.Unmarshal(e.Detail, &det) == nil && det.Action == Resumed {
			n++
		}
	}
	return n, nil
}
