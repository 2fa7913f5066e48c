// Package run executes approved plans: it re-checks the source gate, then
// rebuilds datasets in lineage order — a level starts only when every
// partition of the level before is published — each partition as one River
// job, retried with backoff, published atomically, recorded exactly once.
// Running apply again on a stopped or failed run resumes it: published
// partitions are not rebuilt.
package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	dsnpkg "github.com/refill-dev/refill/dsn"
	"github.com/refill-dev/refill/gate"
	"github.com/refill-dev/refill/internal/secret"
	"github.com/refill-dev/refill/jobs"
	"github.com/refill-dev/refill/jobs/airflow"
	"github.com/refill-dev/refill/queue"
	"github.com/refill-dev/refill/store"
)

// Runner runs plans.
type Runner struct {
	Config    *refill.Config
	Warehouse refill.Warehouse
	Store     *store.Store
	Gate      *gate.Gate
	Now       refill.Clock
	// Log receives one line per event of the run (partition published,
	// retries, failures); nil discards them.
	Log io.Writer
	// Backoff is the first retry delay (doubling, capped at a minute).
	Backoff time.Duration
	// Grace is how long Work lets the partitions in flight finish once
	// its context ends (a SIGTERM), before it cancels them; 30 s if unset.
	Grace time.Duration
	// RescueAfter is when River hands a job whose worker died to another;
	// each attempt is cut off at nine tenths of it.
	RescueAfter time.Duration
	// OnPublished, when set, hears of every partition this process
	// published, with its rows after and how long it took (progress
	// displays, benchmarks).
	OnPublished func(dataset, partition string, rows *int64, took time.Duration)
	// OnBlocked, when set, hears of every plan whose run the source gate
	// stopped as it began (metrics: the run was never started).
	OnBlocked func(planID string)
	// EnvKey is the key of the plans' digests of the values command jobs
	// pass through (refill.Job.EnvSeal); nil skips that check.
	EnvKey []byte

	mu         sync.Mutex
	active     chan struct{} // bounds partitions in flight in this process
	activeOnce sync.Once
	// plans caches the plans this process builds partitions of: a plan
	// never changes once saved, and its sealed steps are all a job runs.
	plans sync.Map
	// storeID is the state store's identity, read once: it never changes,
	// and every publish writes it beside the audit anchor.
	storeID atomic.Pointer[string]
	// draining is closed by Drain: the process is shutting down.
	drainOnce sync.Once
	draining  chan struct{}
	// spent is each partition's time spent waiting out outages in this
	// process, across its attempts (weather.spentBefore).
	spent sync.Map
	// turns holds, per dataset, this process's turns at its max_active
	// slots: a job waits for one here, asking the state store nothing,
	// before it takes a slot there (takeSlot).
	turns sync.Map
	// beforeCommit, when set (by tests), is called in a publish after its
	// last look at the run, with the look still held, just before the
	// warehouse commits.
	beforeCommit func(refill.JobRun)
}

// Drain tells the runner its process is shutting down: runs in progress
// start no new partition, let the ones in flight finish and publish, and
// then let go of their plans, still running and held by nobody, for the
// next process to resume (pause).
func (r *Runner) Drain() {
	r.drainOnce.Do(func() {
		r.mu.Lock()
		if r.draining == nil {
			r.draining = make(chan struct{})
		}
		r.mu.Unlock()
		close(r.draining)
	})
}

// drainC is the channel Drain closes.
func (r *Runner) drainC() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.draining == nil {
		r.draining = make(chan struct{})
	}
	return r.draining
}

// errDrained ends a run whose process is shutting down.
var errDrained = errors.New("refill paused the run (its process is shutting down) before it finished: the partitions in flight finished and were published; the next refill serve or worker resumes the rest, as refill apply does")

func (r *Runner) drained() bool {
	select {
	case <-r.drainC():
		return true
	default:
		return false
	}
}

// LeaseTTL is how long a run's lease lasts unless renewed; the runner
// renews it every third of that while it lives.
var LeaseTTL = 30 * time.Second

// A job whose dataset's slots are all taken waits a while for a turn in
// its process (takeSlot), looks every slotLook for one held elsewhere
// within the same while, then is snoozed for slotWait (without spending
// an attempt).
const (
	slotLook = 250 * time.Millisecond
	slotWait = time.Second
)

func (r *Runner) logf(format string, args ...any) {
	if r.Log == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.Log, "%s  %s\n", time.Now().UTC().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func key(dataset, partition string) string { return dataset + "\x00" + partition }

var _ control.Executor = (*Runner)(nil)

// Start takes plan p's run for this process as actor, or resumes it:
// control.Start calls it once everything the plan needs is met. It stops
// (ErrBlocked) when the source gate now fails, and refuses (ErrLocked)
// when another process holds the run or takes it first; the HeldRun it
// returns runs the plan.
func (r *Runner) Start(ctx context.Context, p *refill.Plan, actor string) (control.HeldRun, error) {
	id := p.ID
	// The source may have broken again since the plan was made. It is
	// judged by the checks the plan sealed, against the columns the plan
	// saw, never by what the config or the store say now.
	rng, err := refill.ParseRange(p.Request.From, p.Request.To, refill.NoRangeLimit)
	if err != nil {
		return nil, err
	}
	g := *r.Gate
	g.Config = p.Sealed(r.Config)
	g.Baseline = map[string][]refill.Column{}
	for _, s := range p.SourceSeals {
		if s.Columns != nil {
			g.Baseline[s.Dataset] = s.Columns
		}
	}
	res, err := g.Check(ctx, p.Gate.Checked, rng)
	if err != nil {
		return nil, fmt.Errorf("source gate: %w", err)
	}
	if !res.Passed {
		return nil, r.block(ctx, p, actor, res)
	}
	runs, err := r.runs(ctx, id)
	if err != nil {
		return nil, err
	}
	// A run holds a lease while it lives: a second apply never resumes a
	// run that is still alive, and resumes one whose holder died.
	holder := leaseHolder()
	err = r.Store.Update(ctx, func(tx *store.Tx) error {
		if err := tx.TakeLease(ctx, id, holder, time.Now().Add(LeaseTTL), store.Lease.HolderAlive); err != nil {
			return err
		}
		if p.Status != refill.StatusRunning {
			if err := tx.SetStatus(ctx, id, p.Status, refill.StatusRunning); err != nil {
				return err
			}
		}
		if err := tx.ClearOutageWaits(ctx, id); err != nil {
			return err
		}
		return tx.Append(ctx, &refill.Event{Kind: refill.EventRunStarted, Actor: actor, PlanID: id, At: r.Now.Now(),
			Detail: refill.Detail(map[string]any{"run": runs + 1, "resumed_from": p.Status, "holder": holder})})
	})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return r.held(ctx, p, actor, holder, runs+1) }, nil
}

// held runs plan p, whose run this process holds as holder, to its end.
func (r *Runner) held(ctx context.Context, p *refill.Plan, actor, holder string, runNo int) error {
	id := p.ID
	runCtx, stopRenew := r.renew(ctx, id, holder)
	defer stopRenew()
	r.logf("plan %s: run %d, %d datasets (%s..%s)", id, runNo, len(p.Steps), p.Request.From, p.Request.To)
	if err := r.execute(runCtx, p, runNo); err != nil {
		// The run's context ends on its own only when its lease passed to
		// another process (renew): that process carries the run on, and
		// this one must not mark it failed under it.
		lost := runCtx.Err() != nil && ctx.Err() == nil
		stopRenew()
		if lost {
			r.logf("plan %s: another process took over the run while this one could not renew its lease; it goes on there", id)
			return refill.Lockedf("plan %s: another process took over its run (this one could not renew its lease in time); it goes on there: refill show %s", id, id)
		}
		var stop *cancelled
		if errors.As(err, &stop) {
			return r.cancelled(ctx, p, holder, stop)
		}
		var review *awaitingReview
		if errors.As(err, &review) {
			return r.awaitReview(ctx, p, holder, review)
		}
		if errors.Is(err, errDrained) || (r.drained() && ctx.Err() != nil) {
			// Drained, or cut off when the drain's grace ran out: the
			// partitions in flight rolled back, and the run is paused.
			return r.pause(ctx, p, holder)
		}
		return r.fail(ctx, p, actor, holder, err)
	}
	stopRenew()
	// The state store may be away for a while: the plan is applied when it
	// answers, within the run's patience.
	err := r.weather(queue.PartitionArgs{PlanID: id}).do(ctx, "state store", func() error { return r.finish(ctx, p, actor, holder) })
	if err != nil {
		return err
	}
	r.logf("plan %s: applied", id)
	return nil
}

// finish records plan p applied: its status, the schemas it ran on as the
// accepted ones, and the run's end.
func (r *Runner) finish(ctx context.Context, p *refill.Plan, actor, holder string) error {
	id := p.ID
	return r.Store.Update(ctx, func(tx *store.Tx) error {
		if err := tx.SetStatus(ctx, id, refill.StatusRunning, refill.StatusApplied); err != nil {
			return err
		}
		if err := tx.ClearOutageWaits(ctx, id); err != nil {
			return err
		}
		if err := tx.ReleaseLease(ctx, id, holder); err != nil {
			return err
		}
		// What the plan saw of its inputs, and ran on, is now the accepted
		// schema: drift is judged against it from here on.
		var accepted []string
		for _, s := range p.SourceSeals {
			if s.Columns == nil {
				continue
			}
			snap := refill.SchemaSnapshot{Dataset: s.Dataset, PlanID: id, Columns: s.Columns, AcceptedBy: actor, Reason: "applied plan " + id}
			if err := tx.AcceptSchema(ctx, snap); err != nil {
				return err
			}
			// Each baseline has its entry, with the columns: a baseline
			// counts only with it (store.SchemaBaseline).
			if err := tx.Append(ctx, &refill.Event{Kind: refill.EventSchemaAccepted, Actor: actor, PlanID: id, Dataset: s.Dataset, At: r.Now.Now(),
				Detail: refill.Detail(map[string]any{"reason": snap.Reason, "columns": snap.Columns})}); err != nil {
				return err
			}
			accepted = append(accepted, s.Dataset)
		}
		return tx.Append(ctx, &refill.Event{Kind: refill.EventRunFinished, Actor: actor, PlanID: id, At: r.Now.Now(),
			Detail: refill.Detail(map[string]any{"schemas": accepted})})
	})
}

// awaitReview ends a run whose side_effects partitions wait for a person:
// the plan needs review (not failed), and its holder lets it go; refill
// apply resumes it once each is resolved.
func (r *Runner) awaitReview(ctx context.Context, p *refill.Plan, holder string, review *awaitingReview) error {
	ctx = context.WithoutCancel(ctx)
	err := r.weather(queue.PartitionArgs{PlanID: p.ID}).do(ctx, "state store", func() error {
		return r.Store.Update(ctx, func(tx *store.Tx) error {
			if err := tx.SetStatus(ctx, p.ID, refill.StatusRunning, refill.StatusNeedsReview); err != nil {
				return err
			}
			if err := tx.ClearOutageWaits(ctx, p.ID); err != nil {
				return err
			}
			return tx.ReleaseLease(ctx, p.ID, holder)
		})
	})
	if err != nil {
		return errors.Join(review, err)
	}
	r.logf("ALERT plan %s: %v", p.ID, review)
	return refill.NotPermittedf("plan %s needs review: %v (then refill apply %s resumes it)", p.ID, review, p.ID)
}

// pause lets go of a run as its process shuts down (Drain): the plan
// stays running, its lease released so that the next refill serve or
// worker, or the watcher, resumes it at once (control.Orphans). A restart
// is no failure: nothing is marked failed and no alert is raised, only
// one notice that the run is paused.
func (r *Runner) pause(ctx context.Context, p *refill.Plan, holder string) error {
	ctx = context.WithoutCancel(ctx)
	pubs, err := r.Store.Published(ctx, p.ID)
	if err == nil {
		err = r.Store.Update(ctx, func(tx *store.Tx) error {
			if err := tx.ReleaseLease(ctx, p.ID, holder); err != nil {
				return err
			}
			if err := tx.ClearOutageWaits(ctx, p.ID); err != nil {
				return err
			}
			return tx.Append(ctx, &refill.Event{Kind: refill.EventRunPaused, Actor: "refill", PlanID: p.ID, At: r.Now.Now(),
				Detail: refill.Detail(map[string]any{"reason": "its process is shutting down (a restart)", "holder": holder, "published": len(pubs)})})
		})
	}
	if err != nil {
		// The lease lapses by itself within LeaseTTL; the plan is resumed
		// then.
		r.logf("plan %s: paused for a restart; its lease could not be released (%v) and lapses within %s", p.ID, err, LeaseTTL)
		return errDrained
	}
	r.logf("plan %s: paused for a restart with %d partition(s) published; the next refill serve or worker resumes it", p.ID, len(pubs))
	return errDrained
}

// cancelled is a run stopped by refill cancel: nothing new starts, and
// what was in flight has finished (or rolled back) when execute returns it.
type cancelled struct{ req refill.CancelRequest }

func (c *cancelled) Error() string {
	return fmt.Sprintf("cancelled by %s: %s", c.req.Actor, c.req.Reason)
}

// cancelRequested returns the plan's cancel request as an error, if one
// was made.
func (r *Runner) cancelRequested(ctx context.Context, planID string) error {
	req, asked, err := r.Store.CancelRequested(ctx, planID)
	if err != nil {
		return err
	}
	if asked {
		return &cancelled{req: req}
	}
	return nil
}

// cancelled ends a run that was asked to stop: the plan is cancelled, with
// what it published kept (refill rollback undoes it).
func (r *Runner) cancelled(ctx context.Context, p *refill.Plan, holder string, stop *cancelled) error {
	ctx = context.WithoutCancel(ctx)
	pubs, err := r.Store.Published(ctx, p.ID)
	if err != nil {
		return err
	}
	err = r.Store.Update(ctx, func(tx *store.Tx) error {
		if err := tx.SetStatus(ctx, p.ID, refill.StatusRunning, refill.StatusCancelled); err != nil {
			return err
		}
		if err := tx.ClearOutageWaits(ctx, p.ID); err != nil {
			return err
		}
		if err := tx.ReleaseLease(ctx, p.ID, holder); err != nil {
			return err
		}
		return tx.Append(ctx, &refill.Event{Kind: refill.EventRunCancelled, Actor: stop.req.Actor, PlanID: p.ID, At: r.Now.Now(),
			Detail: refill.Detail(map[string]any{"reason": stop.req.Reason, "was": refill.StatusRunning, "published": len(pubs)})})
	})
	if err != nil {
		return err
	}
	r.logf("plan %s: cancelled by %s (%s); %d partition(s) had been published and are kept", p.ID, stop.req.Actor, stop.req.Reason, len(pubs))
	return refill.NotPermittedf("plan %s was cancelled by %s (%s) while it ran: %d partition(s) published before it stopped are kept (refill rollback %s undoes them)",
		p.ID, stop.req.Actor, stop.req.Reason, len(pubs), p.ID)
}

// block stores a failed re-check: the plan is blocked for good.
func (r *Runner) block(ctx context.Context, p *refill.Plan, actor string, res gate.Result) error {
	failed := res.GateVerdict.Failed()
	err := r.Store.Update(ctx, func(tx *store.Tx) error {
		if err := tx.SetStatus(ctx, p.ID, p.Status, refill.StatusBlocked); err != nil {
			return err
		}
		for i := range res.Flags {
			res.Flags[i].PlanID = p.ID
		}
		if err := tx.SaveFlags(ctx, res.Flags); err != nil {
			return err
		}
		// Each flag has its entry, as a plan's do: a flag counts only
		// with it (store.Flagged).
		for _, f := range res.Flags {
			if err := tx.Append(ctx, &refill.Event{Kind: refill.EventGateResult, Actor: actor, PlanID: p.ID, At: r.Now.Now(),
				Dataset: f.Dataset, Partition: f.Partition, Detail: refill.Detail(map[string]any{"check": f.Check, "passed": false, "at": "apply"})}); err != nil {
				return err
			}
		}
		return tx.Append(ctx, &refill.Event{Kind: refill.EventGateResult, Actor: actor, PlanID: p.ID, At: r.Now.Now(),
			Detail: refill.Detail(map[string]any{"passed": false, "failed": failed, "at": "apply", "findings": res.Findings})})
	})
	if err != nil {
		return err
	}
	r.logf("ALERT plan %s: the source gate failed when the run began (%d findings); nothing was written and the plan is blocked", p.ID, failed)
	if r.OnBlocked != nil {
		r.OnBlocked(p.ID)
	}
	return fmt.Errorf("plan %s: %w: %d check(s) failed when the run began; nothing was written:%s", p.ID, refill.ErrBlocked, failed, failedFindings(res.Findings))
}

// failedFindings lists the failed findings, one per line, for an error
// that says what blocked a run.
func failedFindings(fs []refill.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		if f.Passed || f.Warning {
			continue
		}
		where := f.Dataset
		if f.Column != "" {
			where += "." + f.Column
		}
		if f.Partition != "" {
			where += " " + f.Partition
		}
		msg := f.Message
		if msg == "" {
			msg = fmt.Sprintf("observed %g, limit %g", f.Observed, f.Limit)
		}
		fmt.Fprintf(&b, "\n  - %s %s: %s", where, f.Check, msg)
	}
	return b.String()
}

// fail marks the run failed and raises the alert.
func (r *Runner) fail(ctx context.Context, p *refill.Plan, actor, holder string, cause error) error {
	ctx = context.WithoutCancel(ctx)
	err := r.weather(queue.PartitionArgs{PlanID: p.ID}).do(ctx, "state store", func() error { return r.markFailed(ctx, p, actor, holder, cause) })
	if err != nil {
		return errors.Join(cause, err)
	}
	r.logf("ALERT plan %s: run failed: %v; run refill apply %s again to resume", p.ID, cause, p.ID)
	return fmt.Errorf("plan %s: run failed (published partitions are kept; apply again to resume): %w", p.ID, cause)
}

func (r *Runner) markFailed(ctx context.Context, p *refill.Plan, actor, holder string, cause error) error {
	return r.Store.Update(ctx, func(tx *store.Tx) error {
		if err := tx.SetStatus(ctx, p.ID, refill.StatusRunning, refill.StatusFailed); err != nil {
			return err
		}
		if err := tx.ClearOutageWaits(ctx, p.ID); err != nil {
			return err
		}
		if err := tx.ReleaseLease(ctx, p.ID, holder); err != nil {
			return err
		}
		return tx.Append(ctx, &refill.Event{Kind: refill.EventRunFailed, Actor: actor, PlanID: p.ID, At: r.Now.Now(),
			Detail: refill.Detail(map[string]any{"error": cause.Error()})})
	})
}

// runs counts the plan's earlier apply invocations.
func (r *Runner) runs(ctx context.Context, id string) (int, error) {
	evs, err := r.Store.Audit(ctx, store.AuditFilter{PlanID: id, Kind: refill.EventRunStarted})
	return len(evs), err
}

// execute runs the plan's levels in order on River.
func (r *Runner) execute(ctx context.Context, p *refill.Plan, runNo int) (runErr error) {
	attempts := r.settings().Attempts
	r.setup()
	q, err := queue.Open(ctx, r.Store, r.queueOptions())
	if err != nil {
		return err
	}
	defer func() {
		// A failed run's jobs still in flight are cancelled rather than
		// awaited: their transactions roll back, they were not the
		// current run's to finish, and the DAG runs they started are
		// marked failed. A cancelled or drained run's are
		// awaited — they finish and are published — until the caller's
		// context ends (a server's shutdown grace): then they too are
		// cancelled and roll back.
		var stop *cancelled
		var review *awaitingReview
		graceful := runErr == nil || errors.As(runErr, &stop) || errors.As(runErr, &review) || errors.Is(runErr, errDrained)
		base := context.WithoutCancel(ctx)
		if graceful {
			base = ctx
		}
		stopCtx, cancel := context.WithTimeout(base, 30*time.Second)
		defer cancel()
		defer q.Close()
		_ = q.Stop(stopCtx, !graceful)
		if !graceful {
			r.abandonStarted(context.WithoutCancel(ctx), q, p.ID, runNo, runErr)
		}
	}()
	events, cancel := q.Subscribe()
	defer cancel()

	w := r.weather(queue.PartitionArgs{PlanID: p.ID})
	for level := 1; ; level++ {
		var todo []queue.PartitionArgs
		any := false
		var published map[string]bool
		if err := w.do(ctx, "state store", func() (err error) { published, err = r.published(ctx, p.ID); return err }); err != nil {
			return err
		}
		for _, st := range p.Steps {
			if st.Order != level {
				continue
			}
			any = true
			for _, pp := range st.Partitions {
				if !published[key(st.Dataset, pp.Partition)] {
					todo = append(todo, queue.PartitionArgs{PlanID: p.ID, Dataset: st.Dataset, Partition: pp.Partition, Run: runNo, Limit: r.settings().MaxActive})
				}
			}
		}
		if !any {
			return nil
		}
		if len(todo) == 0 {
			continue
		}
		if err := w.do(ctx, "state store", func() error { return r.cancelRequested(ctx, p.ID) }); err != nil {
			return err
		}
		if r.drained() {
			return errDrained
		}
		todo = interleave(todo)
		r.logf("order %d: %d partition(s) to build", level, len(todo))
		if err := w.do(ctx, "state store", func() error { _, err := q.Insert(ctx, todo, attempts); return err }); err != nil {
			return fmt.Errorf("queueing order %d: %w", level, err)
		}
		if err := r.wait(ctx, q, p.ID, runNo, attempts, todo, events); err != nil {
			return err
		}
	}
}

// interleave orders one level's jobs a partition of each dataset at a
// time. Workers fetch jobs in the order they were queued, and each
// dataset runs at most run.max_active at once: in dataset order, one
// dataset's jobs would fill every worker and the others would wait behind
// them.
func interleave(todo []queue.PartitionArgs) []queue.PartitionArgs {
	var order []string
	by := map[string][]queue.PartitionArgs{}
	for _, a := range todo {
		if _, ok := by[a.Dataset]; !ok {
			order = append(order, a.Dataset)
		}
		by[a.Dataset] = append(by[a.Dataset], a)
	}
	out := make([]queue.PartitionArgs, 0, len(todo))
	for i := 0; len(out) < len(todo); i++ {
		for _, d := range order {
			if i < len(by[d]) {
				out = append(out, by[d][i])
			}
		}
	}
	return out
}

// published is the set of partitions the plan's run has published.
func (r *Runner) published(ctx context.Context, planID string) (map[string]bool, error) {
	list, err := r.Store.Published(ctx, planID)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, p := range list {
		out[key(p.Dataset, p.Partition)] = true
	}
	return out, nil
}

// wait returns when every partition of todo is published, or with the
// first partition whose attempts are exhausted. It polls the state store as
// well as listening, because another worker process may do the work.
func (r *Runner) wait(ctx context.Context, q *queue.Queue, planID string, runNo, attempts int, todo []queue.PartitionArgs, events <-chan *river.Event) error {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	lostLook := time.Now()
	// An outage of the state store pauses the wait (within the run's
	// patience): the partitions go on where their workers can reach it.
	w := r.weather(queue.PartitionArgs{PlanID: planID})
	for {
		var outcome error
		done := false
		err := w.do(ctx, "state store", func() (err error) {
			done, outcome, err = r.look(ctx, q, planID, runNo, todo)
			return err
		})
		switch {
		case err != nil:
			return err
		case outcome != nil:
			return outcome
		case done:
			return nil
		}
		if time.Since(lostLook) >= lostEvery {
			lostLook = time.Now()
			if err := r.requeueLost(ctx, q, planID, runNo, attempts); err != nil && ctx.Err() == nil {
				r.logf("plan %s: looking for partitions of a worker that died: %v", planID, err)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.drainC():
			return errDrained
		case <-tick.C:
		case <-events:
		}
	}
}

// lostEvery is how often a run's waiter looks for partition jobs of a
// process that died.
const lostEvery = 5 * time.Second

// requeueLost queues again the partitions whose job River counts running
// but whose process is gone (killed with -9, its host lost): its slot is
// held by a process no longer on this host or not renewed for LeaseTTL,
// or the job has held none for LeaseTTL since it started (it takes one
// first thing, unless the state store is away). So the partition goes on
// within seconds on one host, within a minute across hosts, instead of
// waiting run.rescue_after for River's rescuer. A live job, however slow,
// renews its slot and is left alone; should a lost job come back after
// all, the partition's slot lets one of the two build it and the other
// finds it published.
func (r *Runner) requeueLost(ctx context.Context, q *queue.Queue, planID string, runNo, attempts int) error {
	now := time.Now()
	running, err := q.Running(ctx, planID, runNo, now)
	if err != nil || len(running) == 0 {
		return err
	}
	published, err := r.published(ctx, planID)
	if err != nil {
		return err
	}
	for _, j := range running {
		a := j.Args
		if published[key(a.Dataset, a.Partition)] {
			continue
		}
		holder, live, err := r.Store.SlotOf(ctx, a.Dataset, a.PlanID+"/"+a.Partition, now)
		if err != nil {
			return err
		}
		if live {
			continue
		}
		// A dead slot another process held is the lost job's, not this
		// one's: this job, queued again in its place, may still be
		// waiting for a slot, and is judged as one that holds none.
		held := holder != "" && (j.By == "" || holder == j.By)
		// Without a slot, the job may be about to take one: unless River
		// says which process works it and that process is gone from this
		// host, it has LeaseTTL to do so.
		gone := j.By != "" && !(store.Lease{Holder: j.By}).HolderAlive()
		if !held && !gone && now.Sub(j.Attempted) < LeaseTTL {
			continue
		}
		a.Take++
		// Queued again with the same arguments, a job already queued is
		// not doubled: only a new one is told.
		n, err := q.Insert(ctx, []queue.PartitionArgs{a}, attempts)
		if err != nil {
			return err
		}
		if n > 0 {
			r.logf("%s %s: the process working it is gone; queued again", a.Dataset, a.Partition)
		}
	}
	return nil
}

// look is one look at a run's partitions: whether todo are all
// published, or what ended the run (outcome: a partition that failed for
// good, partitions that wait for review once the rest are done, a
// cancel); err is the state store's.
func (r *Runner) look(ctx context.Context, q *queue.Queue, planID string, runNo int, todo []queue.PartitionArgs) (done bool, outcome, err error) {
	published, err := r.published(ctx, planID)
	if err != nil {
		return false, nil, err
	}
	reviews, err := r.Store.Reviews(ctx, planID)
	if err != nil {
		return false, nil, err
	}
	review := map[string]bool{}
	for _, rv := range reviews {
		review[key(rv.Dataset, rv.Partition)] = true
	}
	// A partition waiting for review is not run again, but the others go
	// on: the run waits for a person only once they are done.
	done, left := true, 0
	for _, t := range todo {
		k := key(t.Dataset, t.Partition)
		if !published[k] {
			done = false
			if !review[k] {
				left++
			}
		}
	}
	if done {
		return true, nil, nil
	}
	if left == 0 {
		return false, &awaitingReview{reviews: reviews}, nil
	}
	if err := r.cancelRequested(ctx, planID); err != nil {
		var stop *cancelled
		if errors.As(err, &stop) {
			return false, err, nil
		}
		return false, nil, err
	}
	if failure, err := r.exhausted(ctx, planID); err != nil || failure != "" {
		if err != nil {
			return false, nil, err
		}
		return false, errors.New(failure), nil
	}
	// A job River gave up on without a recorded failure (discarded by
	// its rescuer, say, after a worker died on its last attempt) must
	// end the run too: nothing will ever publish its partition.
	gone, err := q.GivenUp(ctx, planID, runNo)
	if err != nil {
		return false, nil, err
	}
	for _, g := range gone {
		k := key(g.Dataset, g.Partition)
		if published[k] || review[k] {
			continue
		}
		// A job that gave up on its last attempt records why before
		// River marks it: if that happened since the look above, the
		// recorded failure (or review) says more.
		if failure, err := r.exhausted(ctx, planID); err == nil && failure != "" {
			return false, errors.New(failure), nil
		}
		if reviews, err := r.Store.Reviews(ctx, planID); err == nil {
			if slices.ContainsFunc(reviews, func(rv store.Review) bool { return key(rv.Dataset, rv.Partition) == k }) {
				continue
			}
		}
		return false, fmt.Errorf("%s %s: River %s its job after %d attempt(s) without publishing it (last error: %s)",
			g.Dataset, g.Partition, g.State, g.Attempts, orUnknown(g.LastError)), nil
	}
	return false, nil, nil
}

// awaitingReview ends a run whose partitions wait for refill resolve.
type awaitingReview struct{ reviews []store.Review }

func (e *awaitingReview) Error() string {
	var parts []string
	for _, rv := range e.reviews {
		parts = append(parts, rv.Dataset+" "+rv.Partition)
	}
	return fmt.Sprintf("%d partition(s) need review before the run can go on (%s): refill resolve says whether each ran", len(e.reviews), strings.Join(parts, ", "))
}

// exhausted returns the first partition failure of this run recorded after
// its last start, "" if none.
func (r *Runner) exhausted(ctx context.Context, planID string) (string, error) {
	evs, err := r.Store.Audit(ctx, store.AuditFilter{PlanID: planID, Kind: refill.EventRunFailed})
	if err != nil {
		return "", err
	}
	starts, err := r.Store.Audit(ctx, store.AuditFilter{PlanID: planID, Kind: refill.EventRunStarted})
	if err != nil {
		return "", err
	}
	evs = append(evs, starts...)
	slices.SortFunc(evs, func(a, b refill.Event) int { return int(a.Seq - b.Seq) })
	failure := ""
	for _, e := range evs {
		switch {
		case e.Kind == refill.EventRunStarted:
			failure = ""
		case e.Kind == refill.EventRunFailed && e.Partition != "" && failure == "":
			failure = fmt.Sprintf("%s %s failed after its last attempt: %s", e.Dataset, e.Partition, string(e.Detail))
		}
	}
	return failure, nil
}

// work builds and publishes one partition: River calls it for each attempt.
func (r *Runner) work(ctx context.Context, a queue.PartitionArgs, attempt, maxAttempts int) error {
	active := r.active
	active <- struct{}{}
	defer func() { <-active }()
	err := r.build(ctx, a, attempt)
	if err == nil {
		return nil
	}
	var done *alreadyPublished
	if errors.As(err, &done) {
		return nil
	}
	if errors.Is(err, errNeedsReview) {
		// Recorded: the run ends waiting for a person, not failed.
		return river.JobCancel(err)
	}
	if errors.Is(err, errNoSlot) || errors.Is(err, errSlotLost) {
		// Back in a moment, without spending an attempt: another job of
		// the dataset (in any process) gives its slot back.
		return river.JobSnooze(slotWait)
	}
	if errors.Is(err, errNotHeld) || errors.Is(err, errInFlight) {
		// Back later, without spending an attempt: by then the holder has
		// renewed its lease, or another process resumed the run (and this
		// job, of an earlier run, has nothing to do).
		return river.JobSnooze(5 * time.Second)
	}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		// River's time limit cut the attempt off: that is this attempt's
		// failure, like any other, not the run stopping.
		err = fmt.Errorf("attempt ran past its time limit of %s (nine tenths of run.rescue_after) and was cut off: %w", r.RescueAfter*9/10, err)
	case ctx.Err() != nil:
		// The run is stopping; this attempt did not fail on its own. If
		// the run itself is over (failed, or resumed afresh), a DAG run it
		// started is abandoned: tell Airflow, so it does not write on
		// unobserved. A worker merely shutting down hands its job back, and
		// the next attempt finds the same DAG run.
		if status, runs, serr := r.Store.RunState(context.WithoutCancel(ctx), a.PlanID); serr == nil && (status != refill.StatusRunning || runs != a.Run) {
			r.abandon(ctx, a, fmt.Sprintf("refill stopped run %d of plan %s (now %s)", a.Run, a.PlanID, status))
		}
		return err
	}
	// Bad input (a job the warehouse rejects as written, unknown
	// credentials) and a DAG run that ended failed will not mend on retry.
	var outside *refill.OutsidePartitionError
	final := attempt >= maxAttempts
	hopeless := errors.Is(err, refill.ErrBadInput) || errors.Is(err, refill.ErrNotPermitted) || errors.Is(err, airflow.ErrRunFailed) || errors.Is(err, errAudit) || errors.As(err, &outside)
	if final || hopeless {
		why := "its last"
		if !final {
			why = "and retrying cannot mend it"
		}
		r.logf("ALERT %s %s: attempt %d of %d failed, %s; giving up: %v", a.Dataset, a.Partition, attempt, maxAttempts, why, err)
		r.abandon(ctx, a, fmt.Sprintf("refill gave up on this partition after attempt %d of %d: %v", attempt, maxAttempts, err))
		bg := context.WithoutCancel(ctx)
		_ = r.Store.Update(bg, func(tx *store.Tx) error {
			return tx.Append(bg, &refill.Event{Kind: refill.EventRunFailed, Actor: "refill", PlanID: a.PlanID, Dataset: a.Dataset, Partition: a.Partition,
				At: r.Now.Now(), Detail: refill.Detail(map[string]any{"attempt": attempt, "error": err.Error()})})
		})
		return river.JobCancel(err)
	}
	r.logf("%s %s: attempt %d of %d failed, will retry: %v", a.Dataset, a.Partition, attempt, maxAttempts, err)
	return err
}

// workerID names this process in the audit log, so a run shared by several
// workers shows who published what.
var workerID = queue.Process

type alreadyPublished struct{}

func (*alreadyPublished) Error() string { return "already published" }

// build rebuilds one partition and records it published, once. Each
// step waits out an outage of the warehouse or the state store (weather)
// instead of failing: a transactional publish is simply tried again, and
// a job outside refill's transactions runs once, its outcome recorded
// when the state store answers.
func (r *Runner) build(ctx context.Context, a queue.PartitionArgs, attempt int) (err error) {
	w := r.weather(a)
	ctx, release, err := r.takeSlot(ctx, w, a)
	if err != nil {
		return err
	}
	defer release()
	defer func() {
		if err != nil && errors.Is(context.Cause(ctx), errSlotLost) {
			err = fmt.Errorf("%w: %w", errSlotLost, err)
		}
	}()
	var ok bool
	if err := w.do(ctx, "state store", func() (err error) { ok, err = r.mayStart(ctx, a); return err }); err != nil {
		return err
	}
	if !ok {
		return &alreadyPublished{}
	}
	// The job is the one the plan sealed, whatever this process's config
	// says: a worker started with another config cannot change it.
	var d *refill.Dataset
	if err := w.do(ctx, "state store", func() (err error) { d, err = r.sealed(ctx, a.PlanID, a.Dataset); return err }); err != nil {
		return err
	}
	if err := w.do(ctx, "state store", func() error { return r.sameWarehouse(ctx, a.PlanID) }); err != nil {
		return err
	}
	jr, err := jobs.For(d.Job.Kind, r.jobDeps())
	if err != nil {
		return err
	}
	jrun := refill.JobRun{PlanID: a.PlanID, Run: a.Run, Partition: a.Partition, Warehouse: r.jobWarehouse(),
		AttemptKey: refill.AttemptKey(a.PlanID, a.Dataset, a.Partition, a.Run)}
	rec := refill.Published{PlanID: a.PlanID, Dataset: a.Dataset, Partition: a.Partition, Attempt: attempt}
	start := time.Now()
	if jr.Transactional() {
		err = w.do(ctx, "warehouse", func() error {
			rec = refill.Published{PlanID: a.PlanID, Dataset: a.Dataset, Partition: a.Partition, Attempt: attempt}
			return r.publish(ctx, jr, d, jrun, &rec)
		})
	} else {
		// A command or a DAG run writes outside refill's transactions: its
		// digests are taken before and after, and its output kept.
		err = r.outside(ctx, w, a, d, &rec, func() (string, error) { return jr.Build(ctx, nil, d, jrun) })
	}
	if err != nil {
		return err
	}
	if err := w.do(ctx, "state store", func() error { return r.record(ctx, &rec) }); err != nil {
		return err
	}
	took := time.Since(start)
	r.logf("%s %s: published %s -> %s rows in %s", a.Dataset, a.Partition, rowsOf(rec.Before), rowsOf(rec.After), took.Round(time.Millisecond))
	if r.OnPublished != nil {
		var rows *int64
		if rec.After != nil {
			rows = &rec.After.Rows
		}
		r.OnPublished(a.Dataset, a.Partition, rows, took)
	}
	return nil
}

// errNoSlot: the job's dataset runs max_active partitions already, or
// another job builds its partition; it is snoozed, not failed.
var errNoSlot = errors.New("no free slot")

// slotHolders numbers the jobs of this process, for their slots.
var slotHolders atomic.Int64

// takeSlot takes one of a's dataset's run.max_active slots in the state
// store, shared by every process, and keeps it while the job runs; the
// returned release gives it back. errNoSlot when none is free.
func (r *Runner) takeSlot(ctx context.Context, w *weather, a queue.PartitionArgs) (jobCtx context.Context, release func(), err error) {
	sl := store.Slot{Dataset: a.Dataset, Key: a.PlanID + "/" + a.Partition,
		Holder: fmt.Sprintf("%s#%d", workerID, slotHolders.Add(1)), Process: workerID}
	// The limit is the one the run was queued with, whatever this
	// process's config says, so every process holds the same.
	limit := a.Limit
	if limit <= 0 {
		limit = r.settings().MaxActive
	}
	// This process's own jobs of the dataset take turns here first,
	// without asking the state store, so a turn given back goes to the
	// next at once. A job waits for its turn a while, not for ever: the
	// wait is inside the attempt's time limit (a quarter of what is left
	// of it at most), and a job without a slot for LeaseTTL looks lost to
	// whoever waits on the run (half of that at most). Then it is
	// snoozed, without spending an attempt.
	v, _ := r.turns.LoadOrStore(fmt.Sprintf("%s/%d", a.Dataset, limit), make(chan struct{}, limit))
	turn := v.(chan struct{})
	patience := LeaseTTL / 2
	if deadline, ok := ctx.Deadline(); ok {
		patience = min(patience, time.Until(deadline)/4)
	}
	wait := time.NewTimer(max(patience, slotLook))
	defer wait.Stop()
	select {
	case turn <- struct{}{}:
	case <-wait.C:
		return nil, nil, errNoSlot
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	// Other processes' jobs hold the rest: the job looks again every
	// slotLook within the same patience, keeping its partition's place
	// among the dataset's waiters in every process (the oldest waiter
	// gets a slot that frees), then is snoozed and fetched again later,
	// its place kept a while (store.WaiterKept).
	taken := false
	for {
		if err := w.do(ctx, "state store", func() (err error) {
			now := time.Now()
			taken, err = r.Store.TakeSlot(ctx, sl, limit, now, now.Add(LeaseTTL))
			return err
		}); err != nil {
			<-turn
			return nil, nil, err
		}
		if taken {
			break
		}
		look := time.NewTimer(slotLook)
		select {
		case <-look.C:
			continue
		case <-wait.C:
		case <-ctx.Done():
			look.Stop()
			<-turn
			// It stops waiting for good: its place goes to the next.
			bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			_ = r.Store.LeaveSlotQueue(bg, sl.Dataset, sl.Key)
			cancel()
			return nil, nil, ctx.Err()
		}
		look.Stop()
		break
	}
	if !taken {
		<-turn
		return nil, nil, errNoSlot
	}
	jobCtx, lose := context.WithCancelCause(ctx)
	stop := renewing(func() bool {
		// An outage may let the slot lapse; the job goes on. But a slot
		// another job took (its process saw this one's slot lapse and
		// queued the partition again) means another job builds the
		// partition: this one stops.
		held, err := r.Store.RenewSlot(context.WithoutCancel(ctx), sl, time.Now().Add(LeaseTTL))
		if err == nil && !held {
			r.logf("%s %s: its slot lapsed and another job took the partition; this one stops", a.Dataset, a.Partition)
			lose(errSlotLost)
			return false
		}
		return true
	})
	return jobCtx, func() {
		stop()
		lose(nil)
		bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = r.Store.ReleaseSlot(bg, sl)
		<-turn
	}, nil
}

// errSlotLost stops a job whose partition another job took over.
var errSlotLost = errors.New("another job took over its partition")

// mayStart reports whether a's job may start building: only the current
// run's jobs do, only while the plan is running and not cancelled, only in
// a process that is not shutting down, and only for a partition not yet
// published.
func (r *Runner) mayStart(ctx context.Context, a queue.PartitionArgs) (bool, error) {
	// A job from an earlier run of this plan (left queued by a crash, or
	// by a run that stopped) must not write.
	status, runs, err := r.Store.RunState(ctx, a.PlanID)
	if err != nil {
		return false, err
	}
	if status != refill.StatusRunning || a.Run != runs {
		r.logf("%s %s: job of run %d of plan %s (now %s, run %d) has nothing to do", a.Dataset, a.Partition, a.Run, a.PlanID, status, runs)
		return false, nil
	}
	// Nobody holds the run (its holder paused it for a restart, or died):
	// whoever resumes it decides, with the config as it is then (a stale
	// plan, a freeze); a job left queued must not run on its own.
	l, held, err := r.Store.Lease(ctx, a.PlanID)
	if err != nil {
		return false, err
	}
	if !held || !l.Expires.After(time.Now()) || !l.HolderAlive() {
		r.logf("%s %s: nobody holds run %d of plan %s now; not started until its holder renews it or another process resumes the run", a.Dataset, a.Partition, a.Run, a.PlanID)
		return false, errNotHeld
	}
	// A process shutting down starts no new partition: the job is left
	// for the run's resume.
	if r.drained() {
		r.logf("%s %s: shutting down; not started", a.Dataset, a.Partition)
		return false, nil
	}
	// After refill cancel, no new partition starts.
	if err := r.cancelRequested(ctx, a.PlanID); err != nil {
		var stop *cancelled
		if errors.As(err, &stop) {
			r.logf("%s %s: plan %s was cancelled; not started", a.Dataset, a.Partition, a.PlanID)
			return false, nil
		}
		return false, err
	}
	done, err := r.Store.IsPublished(ctx, a.PlanID, a.Dataset, a.Partition)
	return !done && err == nil, err
}

// publish writes, audits and publishes one partition of a transactional
// job (query, sql) in one warehouse transaction, which is the staging
// area: the partition is rebuilt and checked inside it and only the commit
// makes it visible, so readers see the old partition or the new one, never
// half of either. It fills rec's digests. A run that stopped while the job
// worked publishes nothing (alreadyPublished).
func (r *Runner) publish(ctx context.Context, jr refill.JobRunner, d *refill.Dataset, jrun refill.JobRun, rec *refill.Published) error {
	tr := r.Warehouse
	// The audit log's head goes into the warehouse with the partition, so
	// a log rewritten or cut short in the state store no longer matches
	// what the warehouse holds.
	head, err := r.anchor(ctx)
	if err != nil {
		return err
	}
	ref, part := d.Ref(), jrun.Partition
	marked, stopped := false, false
	// The last look at the run is held until the warehouse transaction has
	// ended, so that the run cannot be failed or stopped between the look
	// and the commit.
	var held func()
	err = tr.Transact(ctx, func(tx refill.WarehouseTx) error {
		// The publish mark commits with the partition: if it is there, an
		// earlier attempt published and died before the state store heard
		// of it, and the partition must not be rebuilt.
		already, err := tx.MarkPublished(ctx, jrun.PlanID, d.Name, part)
		if err != nil {
			return err
		}
		if already {
			marked = true
			return errMarked
		}
		before, err := tx.Digest(ctx, ref, part)
		if err != nil {
			return err
		}
		if _, err := jr.Build(ctx, tx, d, jrun); err != nil {
			return err
		}
		if err := r.audit(ctx, tx, d, ref, part); err != nil {
			return err
		}
		after, err := tx.Digest(ctx, ref, part)
		if err != nil {
			return err
		}
		rec.Before, rec.After = &before, &after
		if head.Seq > 0 {
			if err := tx.Anchor(ctx, head); err != nil {
				return err
			}
			rec.Anchor = head.Seq
		}
		// Last look before commit: a run that failed or was stopped while
		// this job worked must not publish.
		status, runs, release, err := r.Store.HoldRunState(ctx, jrun.PlanID)
		if err != nil {
			return err
		}
		held = release
		if status != refill.StatusRunning || jrun.Run != runs {
			stopped = true
			return errStopped
		}
		if r.beforeCommit != nil {
			r.beforeCommit(jrun)
		}
		return nil
	})
	if held != nil {
		held()
	}
	switch {
	case marked:
		return r.adopt(ctx, d, part, rec)
	case stopped:
		r.logf("%s %s: run %d of plan %s stopped while the job worked; nothing was published", d.Name, part, jrun.Run, jrun.PlanID)
		return &alreadyPublished{}
	}
	return err
}

// anchor is the audit log's head, sealed, to be recorded in the warehouse
// with a partition. The log must still hold the warehouse's latest anchor
// first: a publish over a state store put back from an older copy would
// launder it.
func (r *Runner) anchor(ctx context.Context) (refill.AuditAnchor, error) {
	if err := r.Store.CheckLatestAnchor(ctx, r.Warehouse); err != nil {
		return refill.AuditAnchor{}, fmt.Errorf("%w: nothing is published over it", err)
	}
	head, err := r.Store.AuditHead(ctx)
	if err != nil {
		return head, err
	}
	if head.Store, err = r.id(ctx); err != nil {
		return head, err
	}
	return r.Store.SealAnchor(head), nil
}

// record records rec published, with its audit entry, once: a partition
// another attempt recorded first is alreadyPublished.
func (r *Runner) record(ctx context.Context, rec *refill.Published) error {
	rec.At = r.Now.Now()
	err := r.Store.Update(ctx, func(tx *store.Tx) error {
		if err := tx.RecordPublished(ctx, *rec); err != nil {
			return err
		}
		detail := map[string]any{"attempt": rec.Attempt, "worker": workerID}
		if rec.Anchor > 0 {
			detail["anchor"] = rec.Anchor
		}
		if rec.Before != nil {
			detail["rows_before"], detail["checksum_before"] = rec.Before.Rows, rec.Before.Checksum
		}
		if rec.After != nil {
			detail["rows_after"], detail["checksum_after"] = rec.After.Rows, rec.After.Checksum
		}
		if err := tx.EndAttempt(ctx, rec.PlanID, rec.Dataset, rec.Partition, store.AttemptPublished); err != nil {
			return err
		}
		return tx.Append(ctx, &refill.Event{Kind: refill.EventPartitionPublished, Actor: "refill", PlanID: rec.PlanID,
			Dataset: rec.Dataset, Partition: rec.Partition, At: rec.At, Detail: refill.Detail(detail)})
	})
	if errors.Is(err, refill.ErrNotPermitted) {
		return &alreadyPublished{}
	}
	return err
}

// digest is a partition's digest outside any transaction; nil when the
// dataset has no table refill can read.
func (r *Runner) digest(ctx context.Context, d *refill.Dataset, partition string) (*refill.Digest, error) {
	if d.Table == "" {
		return nil, nil
	}
	dg, err := r.Warehouse.Digest(ctx, d.Ref(), partition)
	if err != nil {
		return nil, err
	}
	return &dg, nil
}

// outside runs a job that writes outside refill's transactions (a command,
// a DAG run), with the partition's digests before and after it and its
// output kept with the record.
//
// What a transactional publish writes into the warehouse with the
// partition, an outside job's publish writes in a short transaction of
// its own once the job has succeeded: the publish mark, and the audit
// log's head as an anchor, so that audit verify sees a state store put
// back whatever the job kinds. A mark found before the job starts is an
// earlier attempt that succeeded and did not live to record it: that
// partition is adopted, not run again.
//
// The job runs at most once per call, and its attempt is recorded before
// it starts (store.BeginAttempt). An earlier attempt whose outcome is
// unknown — its job may have written, and its record never committed —
// is run again only when the job has no side effects; a side_effects job
// waits for a person instead (needs review): a second delivery to a
// partner cannot be taken back.
func (r *Runner) outside(ctx context.Context, w *weather, a queue.PartitionArgs, d *refill.Dataset, rec *refill.Published, job func() (string, error)) error {
	tr := r.Warehouse
	var marked bool
	if err := w.do(ctx, "warehouse", func() error {
		err := tr.Transact(ctx, func(tx refill.WarehouseTx) (err error) {
			if marked, err = tx.MarkPublished(ctx, a.PlanID, d.Name, a.Partition); err != nil {
				return err
			}
			return errLookOnly
		})
		if errors.Is(err, errLookOnly) {
			return nil
		}
		return err
	}); err != nil {
		return err
	}
	if marked {
		return w.do(ctx, "warehouse", func() error { return r.adopt(ctx, d, a.Partition, rec) })
	}
	attempt := store.Attempt{PlanID: a.PlanID, Dataset: a.Dataset, Partition: a.Partition, Run: a.Run,
		Key: refill.AttemptKey(a.PlanID, a.Dataset, a.Partition, a.Run), Holder: workerID}
	begin := func() (prior *store.Attempt, err error) {
		err = w.do(ctx, "state store", func() (err error) {
			attempt.Started = time.Now()
			attempt.AliveUntil = attempt.Started.Add(LeaseTTL)
			prior, err = r.Store.BeginAttempt(ctx, attempt)
			return err
		})
		return prior, err
	}
	prior, err := begin()
	if err != nil {
		return err
	}
	if prior != nil && prior.InFlight(time.Now()) {
		// Another worker is on it (a job of an earlier run still
		// finishing, say): this one comes back once that one is done.
		r.logf("%s %s: an attempt of run %d is still in flight (%s); waiting for its outcome", a.Dataset, a.Partition, prior.Run, prior.Holder)
		return errInFlight
	}
	if prior != nil {
		if d.Job.SideEffects {
			why := fmt.Sprintf("an attempt of run %d (key %s, by %s at %s) ended with its outcome unknown: its job may have had its effect, and its record never committed; refill never runs a side_effects job again on its own",
				prior.Run, prior.Key, prior.Holder, prior.Started.UTC().Format(time.RFC3339))
			return w.do(ctx, "state store", func() error { return r.needsReview(ctx, a, why) })
		}
		r.logf("%s %s: an earlier attempt (run %d) ended with its outcome unknown; the job has no side effects, so it runs again", a.Dataset, a.Partition, prior.Run)
		if err := w.do(ctx, "state store", func() error {
			return r.Store.Update(ctx, func(tx *store.Tx) error {
				return tx.EndAttempt(ctx, a.PlanID, a.Dataset, a.Partition, store.AttemptFailed)
			})
		}); err != nil {
			return err
		}
		if prior, err = begin(); err != nil {
			return err
		}
		if prior != nil {
			return errInFlight // another worker began it meanwhile
		}
	}
	// The attempt stays in flight while this process works on it.
	stopRenew := r.keepAlive(ctx, attempt)
	defer stopRenew()
	if err := w.do(ctx, "warehouse", func() (err error) { rec.Before, err = r.digest(ctx, d, a.Partition); return err }); err != nil {
		return err
	}
	var jobErr error
	refill.Yield(r.Warehouse) // a DuckDB file is the job's to open now
	if rec.Output, jobErr = job(); jobErr != nil {
		if ctx.Err() != nil {
			// refill stopped the job (its time limit, a cancel, a
			// shutdown past its grace): what it did before it died is
			// unknown, but it is no longer in flight, so the next
			// attempt decides now instead of waiting for the attempt to
			// lapse.
			stopRenew()
			bg := context.WithoutCancel(ctx)
			_ = w.do(bg, "state store", func() error { return r.Store.RenewAttempt(bg, attempt, time.Now()) })
			return jobErr
		}
		// The job's own failure: its outcome is known, and a retry may run
		// it again (when the state store answers to say so).
		bg := context.WithoutCancel(ctx)
		_ = w.do(bg, "state store", func() error {
			return r.Store.Update(bg, func(tx *store.Tx) error {
				return tx.EndAttempt(bg, a.PlanID, a.Dataset, a.Partition, store.AttemptFailed)
			})
		})
		return jobErr
	}
	if err := w.do(ctx, "warehouse", func() (err error) { rec.After, err = r.digest(ctx, d, a.Partition); return err }); err != nil {
		return err
	}
	return w.do(ctx, "warehouse", func() error {
		head, err := r.anchor(ctx)
		if err != nil {
			return err
		}
		return tr.Transact(ctx, func(tx refill.WarehouseTx) error {
			if _, err := tx.MarkPublished(ctx, a.PlanID, d.Name, a.Partition); err != nil {
				return err
			}
			if head.Seq > 0 {
				rec.Anchor = head.Seq
				return tx.Anchor(ctx, head)
			}
			return nil
		})
	})
}

// errNotHeld puts off a partition of a run nobody holds now (mayStart).
var errNotHeld = errors.New("nobody holds the run")

// errInFlight puts off a partition another worker's attempt is still on.
var errInFlight = errors.New("an attempt is in flight")

// keepAlive renews attempt in the state store while its job runs, until
// the returned stop is called.
func (r *Runner) keepAlive(ctx context.Context, attempt store.Attempt) (stop func()) {
	return renewing(func() bool {
		if ctx.Err() != nil {
			return false
		}
		_ = r.Store.RenewAttempt(context.WithoutCancel(ctx), attempt, time.Now().Add(LeaseTTL))
		return true
	})
}

// renewing calls renew every LeaseTTL/3 from a goroutine of its own, until
// renew returns false or the returned stop is called. stop waits for the
// goroutine, so nothing is renewed after it returns; it may be called more
// than once.
func renewing(renew func() bool) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var once sync.Once
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(LeaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if !renew() {
					return
				}
			}
		}
	}()
	return func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
}

// errNeedsReview ends a partition that waits for a person (refill
// resolve): it is neither retried nor failed.
var errNeedsReview = errors.New("needs review")

// needsReview records that a partition waits for refill resolve.
func (r *Runner) needsReview(ctx context.Context, a queue.PartitionArgs, why string) error {
	err := r.Store.Update(ctx, func(tx *store.Tx) error {
		return tx.Append(ctx, &refill.Event{Kind: refill.EventNeedsReview, Actor: "refill", PlanID: a.PlanID, Dataset: a.Dataset, Partition: a.Partition,
			At: r.Now.Now(), Detail: refill.Detail(map[string]any{"why": why, "run": a.Run})})
	})
	if err != nil {
		return err
	}
	r.logf("ALERT %s %s: needs review: %s; refill resolve %s --partition %s --ran|--not-ran --reason ... says what happened", a.Dataset, a.Partition, why, a.PlanID, a.Partition)
	return fmt.Errorf("%s %s: %w: %s", a.Dataset, a.Partition, errNeedsReview, why)
}

// errLookOnly rolls back a transaction that only looked.
var errLookOnly = errors.New("looked only")

// jobDeps is what this process gives the runners of its jobs (jobs.For),
// the same a proof gives them but for where a command runs.
func (r *Runner) jobDeps() jobs.Deps {
	deps := jobs.DepsOf(r.Config)
	deps.Airflow = airflowClient
	deps.EnvKey = r.EnvKey
	return deps
}

// jobWarehouse is the warehouse an outside job is told to write to
// (REFILL_WAREHOUSE), with a relative SQLite path made absolute and the
// PGPASSWORD refill connects with written into a PostgreSQL DSN that has
// no password, since the job connects as refill does.
func (r *Runner) jobWarehouse() string {
	dsn := r.Config.Warehouse
	if path, ok := dsnpkg.SQLitePath(dsn, r.Config.Dir); ok {
		dsn = "sqlite:" + path
	} else if path, ok := dsnpkg.DuckDBPath(dsn, r.Config.Dir); ok {
		dsn = "duckdb:" + path
	}
	return secret.Reader{}.DSN(dsn)
}

// errMarked rolls back a publish whose partition the warehouse already
// marks published.
var errMarked = errors.New("already published in the warehouse")

// errStopped rolls back a publish whose run stopped while it worked.
var errStopped = errors.New("the run stopped")

// id is the state store's identity, read once per runner (a failed read
// is tried again next time).
func (r *Runner) id(ctx context.Context) (string, error) {
	if id := r.storeID.Load(); id != nil {
		return *id, nil
	}
	id, err := r.Store.ID(ctx)
	if err != nil {
		return "", err
	}
	r.storeID.Store(&id)
	return id, nil
}

// plan returns plan planID, read once per runner.
func (r *Runner) plan(ctx context.Context, planID string) (*refill.Plan, error) {
	if v, ok := r.plans.Load(planID); ok {
		return v.(*refill.Plan), nil
	}
	p, err := r.Store.Plan(ctx, planID)
	if err != nil {
		return nil, err
	}
	r.plans.Store(planID, p)
	return p, nil
}

// sameWarehouse refuses a job of a plan that sealed another warehouse than
// this process's. The sealed job says what to run but this process says
// where: a worker started with another refill.yaml would publish the
// partition into its own warehouse and record it done, leaving the plan's
// warehouse without it. Retrying cannot mend that, so the run fails.
func (r *Runner) sameWarehouse(ctx context.Context, planID string) error {
	p, err := r.plan(ctx, planID)
	if err != nil {
		return err
	}
	if now := dsnpkg.Redact(r.Config.Warehouse); p.Warehouse != "" && p.Warehouse != now {
		return refill.NotPermittedf("worker %s: this worker's warehouse %s is not the warehouse plan %s sealed, %s: start the worker with the plan's refill.yaml",
			workerID, now, planID, p.Warehouse)
	}
	return nil
}

// sealed returns the dataset as plan planID sealed it.
func (r *Runner) sealed(ctx context.Context, planID, dataset string) (*refill.Dataset, error) {
	p, err := r.plan(ctx, planID)
	if err != nil {
		return nil, err
	}
	for i := range p.Steps {
		if p.Steps[i].Dataset != dataset {
			continue
		}
		if d := p.Steps[i].SealedDataset(); d != nil {
			return d, nil
		}
		return nil, refill.NotPermittedf("plan %s was made before plans were sealed: plan again", planID)
	}
	return nil, fmt.Errorf("plan %s does not rebuild %s", planID, dataset)
}

// leaseHolder names this process as a run's holder: host and process id,
// so that another apply on the same host can tell a dead holder at once.
func leaseHolder() string { return workerID }

// renew keeps the run's lease alive until stop is called; if the lease is
// lost (it expired and someone else took the run), the returned context is
// cancelled so this process stops working on it.
func (r *Runner) renew(ctx context.Context, planID, holder string) (context.Context, func()) {
	runCtx, cancel := context.WithCancel(ctx)
	stop := renewing(func() bool {
		err := r.Store.RenewLease(ctx, planID, holder, time.Now().Add(LeaseTTL))
		if errors.Is(err, refill.ErrNotPermitted) {
			r.logf("ALERT plan %s: %v; this process stops working on it", planID, err)
			cancel()
			return false
		}
		return true
	})
	return runCtx, func() { stop(); cancel() }
}

// adopt records a partition an earlier attempt published but did not live
// to record: its rows now are its rows after; what they were before is
// unknown.
func (r *Runner) adopt(ctx context.Context, d *refill.Dataset, partition string, rec *refill.Published) error {
	var err error
	if rec.After, err = r.digest(ctx, d, partition); err != nil {
		return err
	}
	rec.Output = "published by an earlier attempt that stopped before recording it; recorded now, not rebuilt"
	return nil
}

// errAudit marks staged rows that failed the dataset's own checks: the
// publish is rolled back, the live partition untouched, and retrying the
// same inputs would fail the same way.
var errAudit = errors.New("the staged rows failed the dataset's checks")

// audit applies the dataset's own row checks (null ratios, timestamp order,
// future timestamps, its unique key, accepted values) to the rows staged
// in the publish transaction.
func (r *Runner) audit(ctx context.Context, tx refill.WarehouseTx, d *refill.Dataset, ref refill.TableRef, partition string) error {
	c := d.Checks
	if !gate.HasRowChecks(c) {
		return nil
	}
	spec := gate.RowSpec(c, r.Now.Now())
	profiles, err := tx.Profile(ctx, ref, spec, partition, partition)
	if err != nil {
		return err
	}
	failed := gate.Judge(d.Name, partition, profiles[partition], c, spec.Now)
	if len(failed) == 0 {
		return nil
	}
	var msgs []string
	for _, f := range failed {
		msgs = append(msgs, f.Check+" "+f.Column+": "+f.Message)
	}
	return fmt.Errorf("%w (nothing published, the live partition is untouched): %s", errAudit, strings.Join(msgs, "; "))
}

// airflowClient triggers and waits for DAG runs; one serves every job of
// the process, whatever its poll interval, so all partitions share one
// Airflow 3 token.
var airflowClient = &airflow.Client{}

// abandon marks the partition's DAG run of this run failed in Airflow, when
// the partition is an Airflow job: refill no longer follows it, so it must
// not go on writing unobserved.
func (r *Runner) abandon(ctx context.Context, a queue.PartitionArgs, why string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	d, err := r.sealed(ctx, a.PlanID, a.Dataset)
	if err != nil || d.Job == nil || d.Job.Kind != refill.JobAirflow {
		return
	}
	id := airflow.RunID(a.PlanID, a.Dataset, a.Partition, a.Run)
	if err := airflowClient.Fail(ctx, d.Job.Airflow.In(r.Config.Dir), id, why); err != nil {
		r.logf("ALERT %s %s: could not mark DAG run %s failed in Airflow, so it may still write: %v", a.Dataset, a.Partition, id, err)
		return
	}
	r.logf("%s %s: DAG run %s marked failed in Airflow (%s)", a.Dataset, a.Partition, id, why)
}

// abandonStarted marks failed in Airflow the DAG runs of a run that failed
// or lost its lease: every partition of the run a job started and did not
// publish. The jobs this process cancelled cannot do it themselves — the
// plan is still running when they stop, as a worker's that merely shuts
// down — and those of other workers go on polling DAG runs nobody awaits.
func (r *Runner) abandonStarted(ctx context.Context, q *queue.Queue, planID string, runNo int, cause error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	started, err := q.Started(ctx, planID, runNo)
	if err == nil && len(started) > 0 {
		var published map[string]bool
		if published, err = r.published(ctx, planID); err == nil {
			for _, a := range started {
				if !published[key(a.Dataset, a.Partition)] {
					r.abandon(ctx, a, fmt.Sprintf("refill stopped run %d of plan %s: %v", runNo, planID, cause))
				}
			}
		}
	}
	if err != nil {
		r.logf("ALERT plan %s: could not list the partitions run %d started, so DAG runs it started may still write: %v", planID, runNo, err)
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func rowsOf(d *refill.Digest) string {
	if d == nil {
		return "?"
	}
	return fmt.Sprint(d.Rows)
}
