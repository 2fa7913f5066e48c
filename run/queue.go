package run

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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
	// Take counts the jobs queued for this partition in this run after
	// the first: one is queued again when the process working it died
	// (Runner.requeueLost), rather than wait for River's rescuer.
	Take int `json:"take,omitempty"`
}

// Kind implements river.JobArgs.
func (PartitionArgs) Kind() string { return "refill_partition" }

// queue is the part of a River client a run needs, whatever its driver.
type queue interface {
	insert(ctx context.Context, jobs []PartitionArgs, attempts int) error
	subscribe() (<-chan *river.Event, func())
	// stop stops the client; cancel also cancels jobs in flight. The
	// queue can still be read (started, givenUp) until close.
	stop(ctx context.Context, cancel bool) error
	close()
	// givenUp returns the partition jobs of one run of a plan that River
	// gave up on (discarded or cancelled), with their last error.
	givenUp(ctx context.Context, planID string, run int) ([]gaveUp, error)
	// started returns the partition jobs of one run of a plan that some
	// worker has attempted and that neither completed nor were cancelled
	// by refill (which says why when it cancels one): a job that may have
	// started something outside refill and not stopped it. (A job River
	// interrupted when its client stopped is available again, its attempt
	// given back; only attempted_at tells it was started.)
	started(ctx context.Context, planID string, run int) ([]PartitionArgs, error)
	// running returns the partition jobs of one run of a plan that River
	// counts running, attempted before before.
	running(ctx context.Context, planID string, run int, before time.Time) ([]PartitionArgs, error)
}

// gaveUp is a partition job River will not run again.
type gaveUp struct {
	Dataset, Partition string
	State              rivertype.JobState
	Attempts           int
	LastError          string
}

type riverQueue[TTx any] struct {
	client *river.Client[TTx]
	closer func()
	// argsWhere selects a plan's run among River's jobs, in the driver's
	// SQL dialect (@plan, @run).
	argsWhere string
}

func (q *riverQueue[TTx]) givenUp(ctx context.Context, planID string, run int) ([]gaveUp, error) {
	params := river.NewJobListParams().Kinds(PartitionArgs{}.Kind()).
		States(rivertype.JobStateDiscarded, rivertype.JobStateCancelled).
		Where(q.argsWhere, river.NamedArgs{"plan": planID, "run": run}).First(100)
	res, err := q.client.JobList(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("river: listing given-up jobs: %w", err)
	}
	var out []gaveUp
	for _, j := range res.Jobs {
		var a PartitionArgs
		if err := json.Unmarshal(j.EncodedArgs, &a); err != nil {
			continue
		}
		g := gaveUp{Dataset: a.Dataset, Partition: a.Partition, State: j.State, Attempts: j.Attempt}
		if n := len(j.Errors); n > 0 {
			g.LastError = j.Errors[n-1].Error
		}
		out = append(out, g)
	}
	return out, nil
}

func (q *riverQueue[TTx]) running(ctx context.Context, planID string, run int, before time.Time) ([]PartitionArgs, error) {
	params := river.NewJobListParams().Kinds(PartitionArgs{}.Kind()).States(rivertype.JobStateRunning).
		Where(q.argsWhere, river.NamedArgs{"plan": planID, "run": run}).First(10_000)
	res, err := q.client.JobList(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("river: listing running jobs: %w", err)
	}
	var out []PartitionArgs
	for _, j := range res.Jobs {
		var a PartitionArgs
		if j.AttemptedAt == nil || !j.AttemptedAt.Before(before) || json.Unmarshal(j.EncodedArgs, &a) != nil {
			continue
		}
		out = append(out, a)
	}
	return out, nil
}

func (q *riverQueue[TTx]) started(ctx context.Context, planID string, run int) ([]PartitionArgs, error) {
	params := river.NewJobListParams().Kinds(PartitionArgs{}.Kind()).
		States(rivertype.JobStateAvailable, rivertype.JobStateDiscarded, rivertype.JobStatePending,
			rivertype.JobStateRetryable, rivertype.JobStateRunning, rivertype.JobStateScheduled).
		Where(q.argsWhere+" AND attempted_at IS NOT NULL", river.NamedArgs{"plan": planID, "run": run}).First(10_000)
	res, err := q.client.JobList(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("river: listing started jobs: %w", err)
	}
	var out []PartitionArgs
	for _, j := range res.Jobs {
		var a PartitionArgs
		if err := json.Unmarshal(j.EncodedArgs, &a); err != nil {
			continue
		}
		out = append(out, a)
	}
	return out, nil
}

// PartitionQueue is the River queue every partition job waits in, of
// every dataset: queues are a handful, one per kind of job (partitions,
// notices, the watcher's ticks), so an idle process polls a handful. A
// dataset's run.max_active holds across processes through the state
// store's slots (store.TakeSlot), not through queues.
const PartitionQueue = "refill-partition"

// Poll intervals. On PostgreSQL River's LISTEN/NOTIFY wakes a producer as
// soon as a job is queued, so polling is only the fallback; on SQLite a
// process's own inserts wake it. What polling still finds: jobs snoozed
// while their dataset's slots were taken, and (on SQLite) jobs another
// process queued.
const (
	partitionPoll = time.Second
	// ServicePoll is the fallback poll of the notice and watcher queues.
	ServicePoll = 2 * time.Second
)

func (q *riverQueue[TTx]) insert(ctx context.Context, jobs []PartitionArgs, attempts int) error {
	params := make([]river.InsertManyParams, len(jobs))
	for i, j := range jobs {
		params[i] = river.InsertManyParams{Args: j, InsertOpts: &river.InsertOpts{
			Queue:       PartitionQueue,
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

func (q *riverQueue[TTx]) stop(ctx context.Context, cancel bool) error {
	var err error
	if cancel {
		err = q.client.StopAndCancel(ctx)
	} else if err = q.client.Stop(ctx); err != nil {
		// The jobs in flight had their time: River goes on stopping,
		// and now cancels them (their transactions roll back).
		hard, stop := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer stop()
		err = q.client.StopAndCancel(hard)
	}
	return err
}

func (q *riverQueue[TTx]) close() {
	if q.closer != nil {
		q.closer()
	}
}

// retryPolicy backs off exponentially from base, capped at a minute.
type retryPolicy struct{ base time.Duration }

func (p retryPolicy) NextRetry(job *rivertype.JobRow) time.Time {
	d := p.base << min(job.Attempt-1, 10)
	return time.Now().Add(min(d, time.Minute))
}

// queueConfig is how River runs partition jobs.
type queueConfig struct {
	// periodic are the watcher's ticks (run.WatchPeriodic).
	periodic []*river.PeriodicJob
	// register, when set, adds another service's workers instead of the
	// partition worker, and queues are the queues it works.
	register func(*river.Workers) error
	queues   map[string]int
	// workers is how many partition jobs this process works at a time
	// (run.max_active_total).
	workers     int
	backoff     time.Duration
	rescueAfter time.Duration
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

// Timeout bounds each attempt. River only rescues a dead worker's job once
// its timeout has passed (a job without one is never rescued), so every job
// has one: nine tenths of run.rescue_after.
func (w *worker) Timeout(*river.Job[PartitionArgs]) time.Duration {
	return w.timeout
}

// openQueue starts River on the state store's database: its SQLite driver on
// a connection of its own (River wants one writer), its pgx driver on the
// store's pool. River's schema is migrated first.
func openQueue(ctx context.Context, st *store.Store, cfg queueConfig) (queue, error) {
	if path := st.SQLitePath(); path != "" {
		db, err := riverSQLite(path)
		if err != nil {
			return nil, err
		}
		q, err := startRiver(ctx, riversqlite.New(db), migrateSQLite(db), cfg)
		if err != nil {
			db.Close()
			return nil, err
		}
		q.closer = func() { db.Close() }
		q.argsWhere = `json_extract(args, '$.plan_id') = @plan AND json_extract(args, '$.run') = @run`
		return q, nil
	}
	q, err := startRiver(ctx, riverpgxv5.New(st.Pool()), migratePostgres(st.Pool()), cfg)
	if err != nil {
		return nil, err
	}
	q.argsWhere = `args->>'plan_id' = @plan AND (args->>'run')::int = @run`
	return q, nil
}

// riverSQLite opens River's own connection to the state's SQLite file. It
// waits twice refill's usual busy timeout: River's elector and producers
// contend with every publish record.
func riverSQLite(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("river: sqlite:%s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// migrateSQLite migrates River's schema in an IMMEDIATE transaction, which
// holds SQLite's one write lock, so two processes starting at once migrate
// in turn.
func migrateSQLite(db *sql.DB) func(context.Context, *rivermigrate.Migrator[*sql.Tx]) error {
	return func(ctx context.Context, mig *rivermigrate.Migrator[*sql.Tx]) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() //nolint:errcheck // a no-op after Commit
		if _, err := mig.MigrateTx(ctx, tx, rivermigrate.DirectionUp, nil); err != nil {
			return err
		}
		return tx.Commit()
	}
}

// migratePostgres migrates River's schema under a session advisory lock,
// so workers, applies and servers starting together take turns. (River's
// versions cannot share one transaction: one adds an enum value the next
// uses.)
func migratePostgres(pool *pgxpool.Pool) func(context.Context, *rivermigrate.Migrator[pgx.Tx]) error {
	return func(ctx context.Context, mig *rivermigrate.Migrator[pgx.Tx]) error {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		const lock = `hashtext('refill_river_migrate'), hashtext(coalesce(current_schema(), ''))`
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(`+lock+`)`); err != nil {
			return err
		}
		defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(`+lock+`)`) //nolint:errcheck // released with the session anyway
		_, err = mig.Migrate(ctx, rivermigrate.DirectionUp, nil)
		return err
	}
}

// MigrateRiver brings River's schema up to date on the state store, taking
// turns with every other refill process as openQueue does: for a component
// that only inserts jobs (the notifier's outbox) and so never opens a
// queue.
func MigrateRiver(ctx context.Context, st *store.Store) error {
	log := slog.New(slog.DiscardHandler)
	if path := st.SQLitePath(); path != "" {
		db, err := riverSQLite(path)
		if err != nil {
			return err
		}
		defer db.Close()
		mig, err := rivermigrate.New(riversqlite.New(db), &rivermigrate.Config{Logger: log})
		if err != nil {
			return fmt.Errorf("river: %w", err)
		}
		if err := migrateSQLite(db)(ctx, mig); err != nil {
			return fmt.Errorf("river: migrate: %w", err)
		}
		return nil
	}
	if st.Pool() == nil {
		return fmt.Errorf("river: the state store is neither a SQLite file nor a PostgreSQL pool")
	}
	mig, err := rivermigrate.New(riverpgxv5.New(st.Pool()), &rivermigrate.Config{Logger: log})
	if err != nil {
		return fmt.Errorf("river: %w", err)
	}
	if err := migratePostgres(st.Pool())(ctx, mig); err != nil {
		return fmt.Errorf("river: migrate: %w", err)
	}
	return nil
}

func startRiver[TTx any](ctx context.Context, driver riverdriver.Driver[TTx], migrate func(context.Context, *rivermigrate.Migrator[TTx]) error, cfg queueConfig) (*riverQueue[TTx], error) {
	mig, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: cfg.logger})
	if err != nil {
		return nil, fmt.Errorf("river: %w", err)
	}
	if err := migrate(ctx, mig); err != nil {
		return nil, fmt.Errorf("river: migrate: %w", err)
	}
	workers := river.NewWorkers()
	timeout := cfg.rescueAfter * 9 / 10
	if cfg.register != nil {
		// Another of refill's services (StartService): its own workers,
		// and a stand-in for partitions.
		if err := cfg.register(workers); err != nil {
			return nil, fmt.Errorf("river: %w", err)
		}
		if err := AddPartitionStandIn(workers, cfg.rescueAfter); err != nil {
			return nil, fmt.Errorf("river: %w", err)
		}
	} else {
		if err := river.AddWorkerSafely(workers, &worker{work: cfg.work, timeout: timeout}); err != nil {
			return nil, fmt.Errorf("river: %w", err)
		}
		if err := AddNotifyStandIn(workers); err != nil {
			return nil, fmt.Errorf("river: %w", err)
		}
		if err := AddWatchStandIn(workers); err != nil {
			return nil, fmt.Errorf("river: %w", err)
		}
	}
	rc := &river.Config{
		Logger:               cfg.logger,
		Workers:              workers,
		RetryPolicy:          retryPolicy{base: cfg.backoff},
		RescueStuckJobsAfter: cfg.rescueAfter,
		JobTimeout:           timeout,
		FetchCooldown:        10 * time.Millisecond,
		FetchPollInterval:    ServicePoll,
		// Whichever client leads River enqueues the watcher's ticks.
		PeriodicJobs: cfg.periodic,
	}
	if !cfg.insertOnly {
		rc.Queues = map[string]river.QueueConfig{}
		if cfg.register == nil {
			rc.Queues[PartitionQueue] = river.QueueConfig{MaxWorkers: max(cfg.workers, 1), FetchPollInterval: partitionPoll}
		}
		for q, n := range cfg.queues {
			rc.Queues[q] = river.QueueConfig{MaxWorkers: max(n, 1)}
		}
	}
	client, err := river.NewClient(driver, rc)
	if err != nil {
		return nil, fmt.Errorf("river: %w", err)
	}
	if !cfg.insertOnly {
		// Not ctx itself: River cancels the jobs in flight when the
		// context it started with ends. Whoever opened the queue stops it
		// (queue.stop), letting them finish within its own grace first.
		if err := client.Start(context.WithoutCancel(ctx)); err != nil {
			return nil, fmt.Errorf("river: start: %w", err)
		}
	}
	return &riverQueue[TTx]{client: client}, nil
}
