// Package queue owns River (riverqueue/river) for refill: the job kinds
// and the queues they wait in, each kind's time limit, the client's
// lifecycle on the state store's database, River's schema, and the
// stand-ins that let any of refill's clients lead River without
// discarding another's jobs. run, notify and watch bring their workers;
// nothing else in refill imports River's client.
package queue

import (
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/refill-dev/refill"
)

// The queues, one per kind of job: an idle process polls a handful,
// whatever the number of datasets. A dataset's run.max_active holds across
// processes through the state store's slots (store.TakeSlot), not queues.
const (
	Partitions = "refill-partition"
	Notices    = "refill-notify"
	Ticks      = "refill-watch"
)

// PartitionArgs is one partition job: rebuild and publish one dataset
// partition of a plan. Unique by its arguments, so a partition is never
// queued twice by one run. Run counts the plan's apply invocations: a
// resume after a crash queues afresh rather than wait for River to rescue
// the dead process's jobs; should a rescued job run later all the same,
// the partition is found published and it does nothing.
type PartitionArgs struct {
	PlanID    string `json:"plan_id"`
	Dataset   string `json:"dataset"`
	Partition string `json:"partition"`
	Run       int    `json:"run"`
	// Take counts the jobs queued for this partition in this run after
	// the first: one is queued again when the process working it died,
	// rather than wait for River's rescuer.
	Take int `json:"take,omitempty"`
	// Limit is run.max_active as the process that queued the run read it:
	// every process working the run holds the dataset to it.
	Limit int `json:"limit,omitempty"`
}

// Kind implements river.JobArgs.
func (PartitionArgs) Kind() string { return "refill_partition" }

// PartitionTimeout bounds each attempt of a partition job: nine tenths of
// run.rescue_after. River rescues a dead worker's job only once its
// timeout has passed (a job without one is never rescued), so every job
// has one.
func PartitionTimeout(rescueAfter time.Duration) time.Duration { return rescueAfter * 9 / 10 }

// NotifyArgs is one notice job: tell every target about audit entry Seq.
// The entry itself, and the plan it is about, are read again when the job
// runs, so a notice always shows the plan as it is then.
type NotifyArgs struct {
	Seq    int64            `json:"seq"`
	Event  refill.EventKind `json:"kind"`
	PlanID string           `json:"plan_id,omitempty"`
}

// Kind implements river.JobArgs.
func (NotifyArgs) Kind() string { return "refill_notify" }

// NotifyAttempts and the notifier's retry policy keep trying a notice for
// about two and a half hours: long enough to ride out an outage of Slack
// or a receiver, short enough that a stale alert is not delivered the next
// day.
const NotifyAttempts = 15

// NotifyTimeout bounds one attempt at a notice.
const NotifyTimeout = time.Minute

// InsertOpts implements river.JobArgsWithInsertOpts: notices wait in their
// own queue, and an entry is queued at most once however often it is
// offered.
func (NotifyArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Notices, MaxAttempts: NotifyAttempts, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// WatchArgs is one tick of the watcher. River's elected leader enqueues one
// every watch.interval; unique while one waits or runs, so ticks never
// pile up behind a slow one.
type WatchArgs struct{}

// Kind implements river.JobArgs.
func (WatchArgs) Kind() string { return "refill_watch" }

// WatchTimeout bounds one tick.
const WatchTimeout = 10 * time.Minute

// InsertOpts implements river.JobArgsWithInsertOpts.
func (WatchArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Ticks, MaxAttempts: 1, UniqueOpts: river.UniqueOpts{
		ByState: []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
			rivertype.JobStateRetryable, rivertype.JobStateScheduled},
	}}
}

// WatchPeriodic is the watcher's periodic tick when cfg schedules any
// dataset and sets watch.interval; nil otherwise. Every client that may
// lead River carries it, so ticks go on whichever process leads.
func WatchPeriodic(cfg *refill.Config) []*river.PeriodicJob {
	if cfg == nil || time.Duration(cfg.Watch.Interval) <= 0 {
		return nil
	}
	for _, d := range cfg.Datasets {
		if d.Schedule != nil {
			return []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(time.Duration(cfg.Watch.Interval)),
				func() (river.JobArgs, *river.InsertOpts) { return WatchArgs{}, nil },
				&river.PeriodicJobOpts{ID: WatchArgs{}.Kind(), RunOnStart: true})}
		}
	}
	return nil
}
