package run

import (
	"context"

	"time"

	"github.com/riverqueue/river"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/queue"
)

// Partitions adds this runner's partition worker to o, to work up to
// run.max_active_total jobs at a time in this process, with the
// watcher's ticks for River's leader to enqueue: what refill worker and
// refill serve (on PostgreSQL) work. Several workers (and the apply that
// queued the jobs) share one run; a worker that dies loses nothing: its
// partition is queued again (Runner.requeueLost), and a partition is only
// ever recorded published once.
func (r *Runner) Partitions(o *queue.Options) {
	r.setup()
	o.Partition = &partitionWorker{r: r}
	o.PartitionWorkers = r.settings().MaxActiveTotal
	o.Backoff, o.RescueAfter = r.Backoff, r.RescueAfter
	if o.Periodic == nil {
		o.Periodic = queue.WatchPeriodic(r.Config)
	}
}

// settings are the run settings in force: the config's, with
// refill.DefaultRunConfig for any left unset (a config built by hand).
func (r *Runner) settings() refill.RunConfig {
	def, got := refill.DefaultRunConfig(), r.Config.Run
	if got.MaxActive <= 0 {
		got.MaxActive = def.MaxActive
	}
	if got.MaxActiveTotal <= 0 {
		got.MaxActiveTotal = def.MaxActiveTotal
	}
	if got.Attempts <= 0 {
		got.Attempts = def.Attempts
	}
	return got
}

// setup fills defaults shared by apply and workers.
func (r *Runner) setup() {
	def := refill.DefaultRunConfig()
	// Once: jobs in flight hold a place in it, so a second run's setup
	// must not swap it under them.
	r.activeOnce.Do(func() { r.active = make(chan struct{}, r.settings().MaxActiveTotal) })
	if r.Backoff <= 0 {
		r.Backoff = time.Duration(def.Backoff)
	}
	if r.RescueAfter <= 0 {
		r.RescueAfter = time.Duration(def.RescueAfter)
	}
}

func (r *Runner) queueOptions() queue.Options {
	return queue.Options{
		Partition:        &partitionWorker{r: r},
		PartitionWorkers: r.settings().MaxActiveTotal,
		Backoff:          r.Backoff,
		RescueAfter:      r.RescueAfter,
		Periodic:         queue.WatchPeriodic(r.Config),
	}
}

// partitionWorker is River's side of a partition job.
type partitionWorker struct {
	river.WorkerDefaults[queue.PartitionArgs]
	r *Runner
}

func (w *partitionWorker) Work(ctx context.Context, job *river.Job[queue.PartitionArgs]) error {
	return w.r.work(ctx, job.Args, job.Attempt, job.MaxAttempts)
}

// Timeout bounds each attempt: nine tenths of run.rescue_after, so River's
// rescuer takes over a dead worker's job only after its time is up.
func (w *partitionWorker) Timeout(*river.Job[queue.PartitionArgs]) time.Duration {
	return queue.PartitionTimeout(w.r.RescueAfter)
}
