package queue

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/refill-dev/refill/store"
)

// Poll intervals. On PostgreSQL River's LISTEN/NOTIFY wakes a producer as
// soon as a job is queued, so polling is only the fallback; on SQLite a
// process's own inserts wake it. What polling still finds: partition jobs
// snoozed while their dataset's slots were taken, and (on SQLite) jobs
// another process queued.
const (
	partitionPoll = time.Second
	servicePoll   = 2 * time.Second
	// A tick comes every watch.interval (minutes): waiting a few seconds
	// more for it costs nothing.
	tickPoll      = 10 * time.Second
	fetchCooldown = 10 * time.Millisecond
)

// Process names this process to others as refill does everywhere
// (holders of leases, slots and attempts): host:pid.
var Process = func() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s:%d", host, os.Getpid())
}()

// clients numbers this process's River clients, whose ids are
// Process#n: a job's attempted_by then names the process working it.
var clients atomic.Int64

// Options says which kinds this process works, and how.
type Options struct {
	// The workers of the kinds this process works, each with up to the
	// given number of jobs at a time; a kind without a worker gets a
	// stand-in (see standIns). A process that works nothing only inserts.
	Partition        river.Worker[PartitionArgs]
	PartitionWorkers int
	Notify           river.Worker[NotifyArgs]
	NotifyWorkers    int
	Watch            river.Worker[WatchArgs]
	// Periodic are the watcher's ticks (WatchPeriodic): whichever client
	// leads River enqueues them.
	Periodic []*river.PeriodicJob
	// RescueAfter is when River hands a job whose worker died to another
	// (run.rescue_after); Backoff the first retry delay of partition
	// jobs, doubling, capped at a minute.
	RescueAfter, Backoff time.Duration
	Logger               *slog.Logger
}

// Queue is a River client on the state store's database.
type Queue struct {
	c     client
	close func()
}

// client is the part of River's client refill uses, whatever its driver.
type client interface {
	insertMany(ctx context.Context, params []river.InsertManyParams) (int, error)
	subscribe(kinds ...river.EventKind) (<-chan *river.Event, func())
	jobList(ctx context.Context, params *river.JobListParams) (*river.JobListResult, error)
	stop(ctx context.Context) error
	stopAndCancel(ctx context.Context) error
	// argsWhere selects a plan's run among River's jobs, in the driver's
	// SQL dialect (@plan, @run).
	argsWhere() string
}

type riverClient[TTx any] struct {
	*river.Client[TTx]
	where string
}

func (c riverClient[TTx]) insertMany(ctx context.Context, params []river.InsertManyParams) (int, error) {
	res, err := c.InsertMany(ctx, params)
	n := 0
	for _, r := range res {
		if !r.UniqueSkippedAsDuplicate {
			n++
		}
	}
	return n, err
}
func (c riverClient[TTx]) subscribe(kinds ...river.EventKind) (<-chan *river.Event, func()) {
	return c.Subscribe(kinds...)
}
func (c riverClient[TTx]) jobList(ctx context.Context, p *river.JobListParams) (*river.JobListResult, error) {
	return c.JobList(ctx, p)
}
func (c riverClient[TTx]) stop(ctx context.Context) error          { return c.Stop(ctx) }
func (c riverClient[TTx]) stopAndCancel(ctx context.Context) error { return c.StopAndCancel(ctx) }
func (c riverClient[TTx]) argsWhere() string                       { return c.where }

// Open starts River on the state store's database, River's schema
// migrated first: its SQLite driver on a connection of its own (River
// wants one writer), its pgx driver on the store's pool. The client runs
// on a context of its own: ctx ending does not cancel the jobs in flight;
// Stop does, after their grace.
func Open(ctx context.Context, st *store.Store, o Options) (*Queue, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if path := st.SQLitePath(); path != "" {
		db, err := riverSQLite(path)
		if err != nil {
			return nil, err
		}
		// River emulates LISTEN on SQLite by reading a table every 50 ms,
		// which is most of what an idle process would do. A client
		// without partition jobs (serve's notices and ticks) polls its
		// queues instead; an apply, whose levels follow each other, keeps
		// it while it runs.
		c, err := start(ctx, riversqlite.New(db), migrateSQLite(db), o, o.Partition == nil)
		if err != nil {
			db.Close()
			return nil, err
		}
		return &Queue{c: riverClient[*sql.Tx]{c, `json_extract(args, '$.plan_id') = @plan AND json_extract(args, '$.run') = @run`},
			close: func() { db.Close() }}, nil
	}
	c, err := start(ctx, riverpgxv5.New(st.Pool()), migratePostgres(st.Pool()), o, false)
	if err != nil {
		return nil, err
	}
	return &Queue{c: riverClient[pgx.Tx]{c, `args->>'plan_id' = @plan AND (args->>'run')::int = @run`}, close: func() {}}, nil
}

// workers registers o's workers and a stand-in for every other kind.
//
// River elects one client per database to lead maintenance, and its
// rescuer retries a stuck job only if the leader has a worker for the
// job's kind: it discards the others. refill's clients each work their own
// kinds (runs partitions, the notifier notices, the watcher ticks), so
// each registers a stand-in for the others — a worker that is never given
// a job, since the client does not work that queue, but tells the rescuer
// the kind exists and how long its attempts may take.
func workers(o Options) (*river.Workers, error) {
	ws := river.NewWorkers()
	var err error
	if o.Partition != nil {
		err = river.AddWorkerSafely(ws, o.Partition)
	} else {
		err = river.AddWorkerSafely(ws, &standIn[PartitionArgs]{limit: PartitionTimeout(o.RescueAfter)})
	}
	if err != nil {
		return nil, err
	}
	if o.Notify != nil {
		err = river.AddWorkerSafely(ws, o.Notify)
	} else {
		err = river.AddWorkerSafely(ws, &standIn[NotifyArgs]{limit: NotifyTimeout})
	}
	if err != nil {
		return nil, err
	}
	if o.Watch != nil {
		err = river.AddWorkerSafely(ws, o.Watch)
	} else {
		err = river.AddWorkerSafely(ws, &standIn[WatchArgs]{limit: WatchTimeout})
	}
	return ws, err
}

// standIn is a worker for jobs of kind T that this client never works.
type standIn[T river.JobArgs] struct {
	river.WorkerDefaults[T]
	// limit is the kind's own attempt timeout, so the rescuer waits as
	// long as the real worker would.
	limit time.Duration
}

// Work is never called: the client does not work T's queue.
func (s *standIn[T]) Work(ctx context.Context, job *river.Job[T]) error {
	var args T
	return fmt.Errorf("refill: a %s job reached a client that only stands in for its kind", args.Kind())
}

func (s *standIn[T]) Timeout(*river.Job[T]) time.Duration { return s.limit }

// retryPolicy backs off exponentially from base, capped at a minute.
type retryPolicy struct{ base time.Duration }

func (p retryPolicy) NextRetry(job *rivertype.JobRow) time.Time {
	d := p.base << min(job.Attempt-1, 10)
	return time.Now().Add(min(d, time.Minute))
}

func start[TTx any](ctx context.Context, driver riverdriver.Driver[TTx], migrate func(context.Context, *rivermigrate.Migrator[TTx]) error, o Options, pollOnly bool) (*river.Client[TTx], error) {
	mig, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: o.Logger})
	if err != nil {
		return nil, fmt.Errorf("river: %w", err)
	}
	if err := migrate(ctx, mig); err != nil {
		return nil, fmt.Errorf("river: migrate: %w", err)
	}
	ws, err := workers(o)
	if err != nil {
		return nil, fmt.Errorf("river: %w", err)
	}
	rc := &river.Config{
		ID:                   fmt.Sprintf("%s#%d", Process, clients.Add(1)),
		Logger:               o.Logger,
		Workers:              ws,
		RetryPolicy:          retryPolicy{base: max(o.Backoff, time.Millisecond)},
		RescueStuckJobsAfter: o.RescueAfter,
		JobTimeout:           PartitionTimeout(o.RescueAfter),
		FetchCooldown:        fetchCooldown,
		FetchPollInterval:    servicePoll,
		PeriodicJobs:         o.Periodic,
		PollOnly:             pollOnly,
		Queues:               map[string]river.QueueConfig{},
	}
	if o.Partition != nil {
		rc.Queues[Partitions] = river.QueueConfig{MaxWorkers: max(o.PartitionWorkers, 1), FetchPollInterval: partitionPoll}
	}
	if o.Notify != nil {
		rc.Queues[Notices] = river.QueueConfig{MaxWorkers: max(o.NotifyWorkers, 1)}
	}
	if o.Watch != nil {
		rc.Queues[Ticks] = river.QueueConfig{MaxWorkers: 1, FetchPollInterval: tickPoll}
	}
	if len(rc.Queues) == 0 {
		rc.Queues = nil
	}
	client, err := river.NewClient(driver, rc)
	if err != nil {
		return nil, fmt.Errorf("river: %w", err)
	}
	if rc.Queues != nil {
		// Not ctx itself: River cancels the jobs in flight when the
		// context it started with ends. Whoever opened the queue stops
		// it, letting them finish within its own grace first.
		if err := client.Start(context.WithoutCancel(ctx)); err != nil {
			return nil, fmt.Errorf("river: start: %w", err)
		}
	}
	return client, nil
}

// Insert queues partition jobs, each with up to attempts attempts, and
// returns how many it queued: queued again with the same arguments, a job
// already queued is not doubled.
func (q *Queue) Insert(ctx context.Context, jobs []PartitionArgs, attempts int) (int, error) {
	params := make([]river.InsertManyParams, len(jobs))
	for i, j := range jobs {
		params[i] = river.InsertManyParams{Args: j, InsertOpts: &river.InsertOpts{
			Queue:       Partitions,
			MaxAttempts: attempts,
			UniqueOpts:  river.UniqueOpts{ByArgs: true},
		}}
	}
	return q.c.insertMany(ctx, params)
}

// processOf is the process a River client id names (Process#n), "" when
// the id is not one of refill's.
func processOf(clientID string) string {
	p, _, ok := strings.Cut(clientID, "#")
	if !ok {
		return ""
	}
	return p
}

// Subscribe tells of jobs this client completed, failed or cancelled.
func (q *Queue) Subscribe() (<-chan *river.Event, func()) {
	return q.c.subscribe(river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled)
}

// Stop stops the client: with cancel, the jobs in flight are cancelled at
// once; without, they have until ctx ends, and are then cancelled (their
// transactions roll back). The queue can still be read until Close.
func (q *Queue) Stop(ctx context.Context, cancel bool) error {
	if cancel {
		return q.c.stopAndCancel(ctx)
	}
	err := q.c.stop(ctx)
	if err != nil {
		hard, stop := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer stop()
		err = q.c.stopAndCancel(hard)
	}
	return err
}

// Close lets go of the client's own connection (SQLite).
func (q *Queue) Close() { q.close() }

// GaveUp is a partition job River will not run again.
type GaveUp struct {
	Dataset, Partition string
	State              rivertype.JobState
	Attempts           int
	LastError          string
}

// GivenUp returns the partition jobs of one run of a plan that River gave
// up on (discarded or cancelled), with their last error.
func (q *Queue) GivenUp(ctx context.Context, planID string, run int) ([]GaveUp, error) {
	jobs, err := q.list(ctx, planID, run, "", rivertype.JobStateDiscarded, rivertype.JobStateCancelled)
	if err != nil {
		return nil, fmt.Errorf("river: listing given-up jobs: %w", err)
	}
	var out []GaveUp
	for _, j := range jobs {
		g := GaveUp{Dataset: j.args.Dataset, Partition: j.args.Partition, State: j.State, Attempts: j.Attempt}
		if n := len(j.Errors); n > 0 {
			g.LastError = j.Errors[n-1].Error
		}
		out = append(out, g)
	}
	return out, nil
}

// Started returns the partition jobs of one run of a plan that some worker
// has attempted and that neither completed nor were cancelled by refill
// (which says why when it cancels one): jobs that may have started
// something outside refill and not stopped it. (A job River interrupted
// when its client stopped is available again, its attempt given back;
// only attempted_at tells it was started.)
func (q *Queue) Started(ctx context.Context, planID string, run int) ([]PartitionArgs, error) {
	jobs, err := q.list(ctx, planID, run, " AND attempted_at IS NOT NULL", rivertype.JobStateAvailable, rivertype.JobStateDiscarded,
		rivertype.JobStatePending, rivertype.JobStateRetryable, rivertype.JobStateRunning, rivertype.JobStateScheduled)
	if err != nil {
		return nil, fmt.Errorf("river: listing started jobs: %w", err)
	}
	return argsOf(jobs), nil
}

// Running is a partition job River counts running, when its current
// attempt began, and the process working it (host:pid; "" when River
// does not say).
type Running struct {
	Args      PartitionArgs
	Attempted time.Time
	By        string
}

// Running returns the partition jobs of one run of a plan that River
// counts running, attempted before before.
func (q *Queue) Running(ctx context.Context, planID string, run int, before time.Time) ([]Running, error) {
	jobs, err := q.list(ctx, planID, run, "", rivertype.JobStateRunning)
	if err != nil {
		return nil, fmt.Errorf("river: listing running jobs: %w", err)
	}
	var out []Running
	for _, j := range jobs {
		if j.AttemptedAt != nil && !j.AttemptedAt.After(before) {
			r := Running{Args: j.args, Attempted: *j.AttemptedAt}
			if n := len(j.AttemptedBy); n > 0 {
				r.By = processOf(j.AttemptedBy[n-1])
			}
			out = append(out, r)
		}
	}
	return out, nil
}

type job struct {
	*rivertype.JobRow
	args PartitionArgs
}

func argsOf(jobs []job) []PartitionArgs {
	out := make([]PartitionArgs, len(jobs))
	for i, j := range jobs {
		out[i] = j.args
	}
	return out
}

// list returns the partition jobs of one run of a plan in states.
func (q *Queue) list(ctx context.Context, planID string, run int, and string, states ...rivertype.JobState) ([]job, error) {
	params := river.NewJobListParams().Kinds(PartitionArgs{}.Kind()).States(states...).
		Where(q.c.argsWhere()+and, river.NamedArgs{"plan": planID, "run": run}).First(10_000)
	res, err := q.c.jobList(ctx, params)
	if err != nil {
		return nil, err
	}
	var out []job
	for _, j := range res.Jobs {
		var a PartitionArgs
		if json.Unmarshal(j.EncodedArgs, &a) != nil {
			continue
		}
		out = append(out, job{j, a})
	}
	return out, nil
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

// Migrate brings River's schema up to date on the state store, taking
// turns with every other refill process as Open does: for a component that
// only inserts jobs (the notifier's outbox).
func Migrate(ctx context.Context, st *store.Store) error {
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

// Outbox queues notices inside the state store's own transactions: an
// insert-only River client on the store's database/sql handle, so that
// InsertTx can take the *sql.Tx of the store's transaction (River's SQLite
// driver on SQLite, its database/sql driver on PostgreSQL). It has no
// queues and is never started.
type Outbox struct{ c *river.Client[*sql.Tx] }

// NewOutbox returns the store's outbox.
func NewOutbox(st *store.Store) (*Outbox, error) {
	var driver riverdriver.Driver[*sql.Tx]
	if st.SQLitePath() != "" {
		driver = riversqlite.New(st.DB())
	} else {
		driver = riverdatabasesql.New(st.DB())
	}
	// River sends at most one insert notification per queue per
	// FetchCooldown; at the default (100ms) a notice queued right after
	// another would wait for the next poll instead.
	c, err := river.NewClient(driver, &river.Config{Logger: slog.New(slog.DiscardHandler), FetchCooldown: fetchCooldown, FetchPollInterval: servicePoll})
	if err != nil {
		return nil, fmt.Errorf("river: %w", err)
	}
	return &Outbox{c: c}, nil
}

// InsertTx queues a notice in tx.
func (o *Outbox) InsertTx(ctx context.Context, tx *sql.Tx, a NotifyArgs) error {
	_, err := o.c.InsertTx(ctx, tx, a, nil)
	return err
}

// Serve works o's kinds in one River client until ctx ends, then calls
// stopping (which should stop new work from starting), lets the jobs in
// flight finish for up to grace, and cancels the rest. A process runs one
// client for everything it works: an idle process polls its queues once,
// not once per service.
func Serve(ctx context.Context, st *store.Store, o Options, grace time.Duration, stopping func()) error {
	q, err := Open(ctx, st, o)
	if err != nil {
		return err
	}
	defer q.Close()
	<-ctx.Done()
	if stopping != nil {
		stopping()
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	return q.Stop(stopCtx, false)
}

// Works reports whether o works any kind.
func (o Options) Works() bool { return o.Partition != nil || o.Notify != nil || o.Watch != nil }
