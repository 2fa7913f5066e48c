package run

import (
	"context"
	"fmt"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/refill-dev/refill"
)

// River elects one client per database to lead maintenance, and its
// rescuer retries a stuck job only if the leader has a worker for the
// job's kind: it discards the others. refill's River clients each work
// their own kinds (the runner partitions, the notifier notices), so each
// also registers a stand-in for the other kinds — a worker that is never
// given a job, since the client does not work that queue, but tells the
// rescuer the kind exists and how long its attempts may take.

// NotifyKind is the notify package's job kind. (notify cannot be imported
// here; its tests check the two agree.)
const NotifyKind = "refill_notify"

// NotifyTimeout is how long a notice's attempt may take (the notifier's
// job timeout).
const NotifyTimeout = time.Minute

// StandIn is a worker for jobs of kind T that this client never works.
type StandIn[T river.JobArgs] struct {
	river.WorkerDefaults[T]
	// Limit is the kind's own attempt timeout, so the rescuer waits as
	// long as the real worker would.
	Limit time.Duration
}

// Work is never called: the client does not work T's queue.
func (s *StandIn[T]) Work(ctx context.Context, job *river.Job[T]) error {
	var args T
	return fmt.Errorf("refill: a %s job reached a client that only stands in for its kind", args.Kind())
}

// Timeout is the kind's own attempt timeout.
func (s *StandIn[T]) Timeout(*river.Job[T]) time.Duration { return s.Limit }

// notifyStandIn names notices' kind; their arguments are not read here.
type notifyStandIn struct{}

// Kind implements river.JobArgs.
func (notifyStandIn) Kind() string { return NotifyKind }

// WatchKind is the watcher's tick job, and WatchQueue its queue: refill
// serve works it; every refill River client enqueues it (River's leader
// does, whichever client that is) every watch.interval, so replicas never
// tick twice.
const (
	WatchKind  = "refill_watch"
	WatchQueue = "refill-watch"
)

// WatchTimeout bounds one tick.
const WatchTimeout = 10 * time.Minute

// WatchArgs is one watcher tick.
type WatchArgs struct{}

// Kind implements river.JobArgs.
func (WatchArgs) Kind() string { return WatchKind }

// InsertOpts implements river.JobArgsWithInsertOpts: one tick at a time,
// in its own queue; a tick that fails is not retried (the next one comes).
func (WatchArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: WatchQueue, MaxAttempts: 1, UniqueOpts: river.UniqueOpts{
		ByState: []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
			rivertype.JobStateRetryable, rivertype.JobStateScheduled},
	}}
}

// WatchPeriodic is the watcher's periodic job for cfg, or nil when no
// dataset has a schedule.
func WatchPeriodic(cfg *refill.Config) []*river.PeriodicJob {
	if cfg == nil || time.Duration(cfg.Watch.Interval) <= 0 {
		return nil
	}
	for _, d := range cfg.Datasets {
		if d.Schedule != nil {
			return []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(time.Duration(cfg.Watch.Interval)),
				func() (river.JobArgs, *river.InsertOpts) { return WatchArgs{}, nil },
				&river.PeriodicJobOpts{ID: WatchKind, RunOnStart: true})}
		}
	}
	return nil
}

// AddWatchStandIn registers on a client that does not tick a stand-in for
// the watcher's jobs.
func AddWatchStandIn(workers *river.Workers) error {
	return river.AddWorkerSafely(workers, &StandIn[WatchArgs]{Limit: WatchTimeout})
}

// AddNotifyStandIn registers on a client that does not deliver notices a
// stand-in for them.
func AddNotifyStandIn(workers *river.Workers) error {
	return river.AddWorkerSafely(workers, &StandIn[notifyStandIn]{Limit: NotifyTimeout})
}

// AddPartitionStandIn registers on a client that does not work partitions
// a stand-in for them, with the runner's attempt timeout for rescueAfter
// (nine tenths of it).
func AddPartitionStandIn(workers *river.Workers, rescueAfter time.Duration) error {
	return river.AddWorkerSafely(workers, &StandIn[PartitionArgs]{Limit: rescueAfter * 9 / 10})
}
