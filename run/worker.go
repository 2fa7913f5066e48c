package run

import (
	"cmp"
	"context"
	"fmt"

	"time"

	"github.com/riverqueue/river"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/queue"
)

// Work serves partition jobs of every dataset until ctx ends: the body of
// `refill worker`. Several workers (and the apply that queued the jobs)
// share one run through River on a PostgreSQL state store; a worker that
// dies loses nothing, because its jobs go back to the queue and a partition
// is only ever recorded published once.
func (r *Runner) Work(ctx context.Context) error {
	if r.Store.SQLitePath() != "" {
		return fmt.Errorf("refill worker needs a PostgreSQL state store: with SQLite, refill apply does the work itself")
	}
	r.setup()
	q, err := queue.Open(ctx, r.Store, r.queueOptions())
	if err != nil {
		return err
	}
	r.logf("worker %s: serving partition jobs, %d at a time", workerID, r.settings().MaxActiveTotal)
	<-ctx.Done()
	// The jobs in flight finish (they were started on a context of
	// their own) and no new one starts, for up to the grace; then River
	// cancels what is left, whose transactions roll back.
	r.Drain()
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cmp.Or(r.Grace, 30*time.Second))
	defer cancel()
	defer q.Close()
	return q.Stop(stopCtx, false)
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
	r.active = make(chan struct{}, r.settings().MaxActiveTotal)
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
