package run

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/refill-dev/refill/store"
)

// PartitionArgs is one River job: rebuild and publish one dataset partition
// of a plan. Unique by its arguments, so a partition is never queued twice
// by one run. Run counts the plan's apply invocations: a resume after a
// crash queues afresh rather than wait for River to rescue the dead
// process's jobs; should a rescued job run later all the same, the
// partition is found published and it does nothing.
type PartitionArgs struct {
	PlanID    string `json:"plan_id"`
	Dataset   string `json:"dataset"`
	Partition string `json:"partition"`
	Run       int    `json:"run"`
}

// Kind implements river.JobArgs.
func (PartitionArgs) Kind() string { return "refill_partition" }

// queue is the part of a River client a run needs, whatever its driver.
type queue interface {
	insert(ctx context.Context, jobs []PartitionArgs, attempts int) error
	subscribe() (<-chan *river.Event, func())
	stop(ctx context.Context) error
}

type riverQueue[TTx any] struct {
	client *river.Client[TTx]
	closer func()
}

// queueName is a dataset's River queue: one queue per dataset is how its
// max_active bound holds across every worker process.
func queueName(dataset string) string { return "refill_" + dataset }

func (q *riverQueue[TTx]) insert(ctx context.Context, jobs []PartitionArgs, attempts int) error {
	params := make([]river.InsertManyParams, len(jobs))
	for i, j := range jobs {
		params[i] = river.InsertManyParams{Args: j, InsertOpts: &river.InsertOpts{
			Queue:       queueName(j.Dataset),
			MaxAttempts: attempts,
			UniqueOpts:  river.UniqueOpts{ByArgs: true},
		}}
	}
	_, err := q.client.InsertMany(ctx, params)
	return err
}

func (q *riverQueue[TTx]) subscribe() (<-chan *river.Event, func()) {
	return q.client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled)
}

func (q *riverQueue[TTx]) stop(ctx context.Context) error {
	err := q.client.Stop(ctx)
	if q.closer != nil {
		q.closer()
	}
	return err
}

// retryPolicy backs off exponentially from base, capped at a minute.
type retryPolicy struct{ base time.Duration }

func (p retryPolicy) NextRetry(job *rivertype.JobRow) time.Time {
	d := p.base << min(job.Attempt-1, 10)
	return time.Now().Add(min(d, time.Minute))
}

// queueConfig is how River runs partition jobs.
type queueConfig struct {
	// datasets get a queue each, worked by up to perDataset at a time.
	datasets    []string
	perDataset  int
	backoff     time.Duration
	rescueAfter time.Duration
	jobTimeout  time.Duration
	logger      *slog.Logger
	work        func(ctx context.Context, job *river.Job[PartitionArgs]) error
	insertOnly  bool
}

type worker struct {
	river.WorkerDefaults[PartitionArgs]
	work    func(ctx context.Context, job *river.Job[PartitionArgs]) error
	timeout time.Duration
}

func (w *worker) Work(ctx context.Context, job *river.Job[PartitionArgs]) error {
	return w.work(ctx, job)
}

// Timeout gives each job the configured bound (0: River's default of 1m is
// too short for a warehouse job, so none).
func (w *worker) Timeout(*river.Job[PartitionArgs]) time.Duration {
	if w.timeout <= 0 {
		return -1
	}
	return w.timeout
}

// openQueue starts River on the state store's database: its SQLite driver on
// a connection of its own (River wants one writer), its pgx driver on the
// store's pool. River's schema is migrated first.
func openQueue(ctx context.Context, st *store.Store, cfg queueConfig) (queue, error) {
	if path := st.SQLitePath(); path != "" {
		db, err := sql.Open("sqlite", path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)")
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(1)
		q, err := startRiver(ctx, riversqlite.New(db), cfg)
		if err != nil {
			db.Close()
			return nil, err
		}
		q.closer = func() { db.Close() }
		return q, nil
	}
	return startRiver(ctx, riverpgxv5.New(st.Pool()), cfg)
}

func startRiver[TTx any](ctx context.Context, driver riverdriver.Driver[TTx], cfg queueConfig) (*riverQueue[TTx], error) {
	mig, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: cfg.logger})
	if err != nil {
		return nil, fmt.Errorf("river: %w", err)
	}
	if _, err := mig.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("river: migrate: %w", err)
	}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &worker{work: cfg.work, timeout: cfg.jobTimeout}); err != nil {
		return nil, fmt.Errorf("river: %w", err)
	}
	rc := &river.Config{
		Logger:               cfg.logger,
		Workers:              workers,
		RetryPolicy:          retryPolicy{base: cfg.backoff},
		RescueStuckJobsAfter: cfg.rescueAfter,
		JobTimeout:           -1, // a job's own timeout bounds it (command jobs); River's default minute is too short for a warehouse
		FetchCooldown:        10 * time.Millisecond,
		FetchPollInterval:    50 * time.Millisecond,
	}
	if !cfg.insertOnly {
		rc.Queues = map[string]river.QueueConfig{}
		for _, d := range cfg.datasets {
			rc.Queues[queueName(d)] = river.QueueConfig{MaxWorkers: max(cfg.perDataset, 1)}
		}
	}
	client, err := river.NewClient(driver, rc)
	if err != nil {
		return nil, fmt.Errorf("river: %w", err)
	}
	if !cfg.insertOnly {
		if err := client.Start(ctx); err != nil {
			return nil, fmt.Errorf("river: start: %w", err)
		}
	}
	return &riverQueue[TTx]{client: client}, nil
}
