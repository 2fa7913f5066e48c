package run

import (
	"context"
	"fmt"
	"time"

	"github.com/riverqueue/river"
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

// AddPartitionStandIn registers on a client that does not work partitions
// a stand-in for them, with the runner's attempt timeout for rescueAfter
// (nine tenths of it).
func AddPartitionStandIn(workers *river.Workers, rescueAfter time.Duration) error {
	return river.AddWorkerSafely(workers, &StandIn[PartitionArgs]{Limit: rescueAfter * 9 / 10})
}
