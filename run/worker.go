package run

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/refill-dev/refill"
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
	q, err := openQueue(ctx, r.Store, r.queueConfig())
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
	defer q.close()
	return q.stop(stopCtx, false)
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

func (r *Runner) queueConfig() queueConfig {
	return queueConfig{
		workers: r.settings().MaxActiveTotal, backoff: r.Backoff, rescueAfter: r.RescueAfter,
		periodic: WatchPeriodic(r.Config),
		logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		work: func(ctx context.Context, job *river.Job[PartitionArgs]) error {
			return r.work(ctx, job.Args, job.Attempt, job.MaxAttempts)
		},
	}
}
