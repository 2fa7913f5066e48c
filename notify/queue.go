package notify

import (
	"context"
	"database/sql"
	"fmt"
	"github.com/refill-dev/refill/run"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
)

// JobKind is the River kind of a notice job.
const JobKind = run.NotifyKind

// Queue is the River queue notices wait in. It has a hyphen because a
// dataset's partition jobs wait in "refill_" + its name, and dataset names
// cannot hold one: a dataset called notify must not share this queue.
const Queue = "refill-notify"

// maxAttempts and the retry policy keep trying a notice for about two and
// a half hours (2s doubling, capped at 30 minutes), long enough to ride out
// an outage of Slack or a receiver, short enough that a stale alert is not
// delivered the next day.
const (
	maxAttempts  = 15
	retryBase    = 2 * time.Second
	retryCap     = 30 * time.Minute
	jobTimeout   = run.NotifyTimeout
	fetchPoll    = 50 * time.Millisecond
	fetchCool    = 10 * time.Millisecond
	stopDeadline = 30 * time.Second
)

// Args is one notice job: tell every target about audit entry Seq. The
// entry itself, and the plan it is about, are read again when the job
// runs, so a notice always shows the plan as it is then.
type Args struct {
	Seq    int64            `json:"seq"`
	Event  refill.EventKind `json:"kind"`
	PlanID string           `json:"plan_id,omitempty"`
}

// Kind implements river.JobArgs.
func (Args) Kind() string { return JobKind }

// InsertOpts implements river.JobArgsWithInsertOpts: notices wait in their
// own queue, and an entry is queued at most once however often it is
// offered.
func (Args) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, MaxAttempts: maxAttempts, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// retryPolicy backs off exponentially from retryBase, capped at retryCap.
type retryPolicy struct{}

func (retryPolicy) NextRetry(job *rivertype.JobRow) time.Time {
	d := retryBase << min(max(job.Attempt-1, 0), 20)
	return time.Now().Add(min(d, retryCap))
}

// quiet is the logger River's migrator and insert-only client write to:
// they say nothing a person needs.
var quiet = slog.New(slog.DiscardHandler)

// openSQLite opens a connection of River's own to the state's SQLite file.
// River's elector and producers contend with refill's writes, so it waits
// twice refill's usual busy timeout; an IMMEDIATE transaction takes the
// write lock when it begins, so two processes migrating at once go in turn.
func openSQLite(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("river: sqlite:%s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// migrate brings River's schema up to date on the state store. Processes
// starting together take turns: on SQLite under the write lock of an
// IMMEDIATE transaction, on PostgreSQL under a session advisory lock (River's
// versions cannot share one transaction there: one adds an enum value the
// next uses). The lock is the one refill's runner takes, so notices and runs
// never migrate River at the same time either.
func migrate(ctx context.Context, st *store.Store) error {
	if path := st.SQLitePath(); path != "" {
		db, err := openSQLite(path)
		if err != nil {
			return err
		}
		defer db.Close()
		mig, err := rivermigrate.New(riversqlite.New(db), &rivermigrate.Config{Logger: quiet})
		if err != nil {
			return fmt.Errorf("river: %w", err)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("river: migrate: %w", err)
		}
		defer tx.Rollback() //nolint:errcheck // a no-op after Commit
		if _, err := mig.MigrateTx(ctx, tx, rivermigrate.DirectionUp, nil); err != nil {
			return fmt.Errorf("river: migrate: %w", err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("river: migrate: %w", err)
		}
		return nil
	}
	pool := st.Pool()
	if pool == nil {
		return fmt.Errorf("river: the state store is neither a SQLite file nor a PostgreSQL pool")
	}
	mig, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: quiet})
	if err != nil {
		return fmt.Errorf("river: %w", err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("river: migrate: %w", err)
	}
	defer conn.Release()
	const lock = `hashtext('refill_river_migrate'), hashtext(coalesce(current_schema(), ''))`
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(`+lock+`)`); err != nil {
		return fmt.Errorf("river: migrate: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(`+lock+`)`) //nolint:errcheck // released with the session anyway
	if _, err := mig.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river: migrate: %w", err)
	}
	return nil
}

// newInserter is an insert-only River client on the store's own
// database/sql handle, so that InsertTx can take the *sql.Tx of the store's
// transaction: River's SQLite driver on SQLite, its database/sql driver on
// PostgreSQL. It has no queues and is never started.
func newInserter(st *store.Store) (*river.Client[*sql.Tx], error) {
	var driver riverdriver.Driver[*sql.Tx]
	if st.SQLitePath() != "" {
		driver = riversqlite.New(st.DB())
	} else {
		driver = riverdatabasesql.New(st.DB())
	}
	// River sends at most one insert notification per queue per
	// FetchCooldown; at the default (100ms) a notice queued right after
	// another would wait for the next poll instead.
	c, err := river.NewClient(driver, &river.Config{Logger: quiet, FetchCooldown: fetchCool, FetchPollInterval: fetchPoll})
	if err != nil {
		return nil, fmt.Errorf("river: %w", err)
	}
	return c, nil
}

// worker is River's side of a notice job.
type worker struct {
	river.WorkerDefaults[Args]
	deliver func(ctx context.Context, a Args) error
}

func (w *worker) Work(ctx context.Context, job *river.Job[Args]) error {
	return w.deliver(ctx, job.Args)
}

// consumer is a started River client working the notice queue, whatever
// its driver.
type consumer interface {
	Stop(ctx context.Context) error
	StopAndCancel(ctx context.Context) error
}

// startConsumer starts River on the state store's database to work the
// notice queue: its SQLite driver on a connection of its own (closed by the
// returned func), its pgx driver on the store's pool. River's schema is
// migrated first, so a process that runs notices without having installed
// them still works.
func startConsumer(ctx context.Context, st *store.Store, deliver func(context.Context, Args) error, rescueAfter time.Duration, periodic []*river.PeriodicJob, log *slog.Logger) (consumer, func(), error) {
	if err := migrate(ctx, st); err != nil {
		return nil, nil, err
	}
	w := &worker{deliver: deliver}
	if path := st.SQLitePath(); path != "" {
		db, err := openSQLite(path)
		if err != nil {
			return nil, nil, err
		}
		c, err := startRiver(ctx, riversqlite.New(db), w, rescueAfter, periodic, log)
		if err != nil {
			db.Close()
			return nil, nil, err
		}
		return c, func() { db.Close() }, nil
	}
	c, err := startRiver[pgx.Tx](ctx, riverpgxv5.New(st.Pool()), w, rescueAfter, periodic, log)
	if err != nil {
		return nil, nil, err
	}
	return c, func() {}, nil
}

func startRiver[TTx any](ctx context.Context, driver riverdriver.Driver[TTx], w *worker, rescueAfter time.Duration, periodic []*river.PeriodicJob, log *slog.Logger) (*river.Client[TTx], error) {
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, w); err != nil {
		return nil, fmt.Errorf("river: %w", err)
	}
	// If this client leads River, its rescuer must retry the runner's
	// stuck partition jobs, not discard them (see run.StandIn).
	if err := run.AddPartitionStandIn(workers, rescueAfter); err != nil {
		return nil, fmt.Errorf("river: %w", err)
	}
	if err := run.AddWatchStandIn(workers); err != nil {
		return nil, fmt.Errorf("river: %w", err)
	}
	timeout := min(jobTimeout, rescueAfter*9/10)
	c, err := river.NewClient(driver, &river.Config{
		Logger:      log,
		Workers:     workers,
		Queues:      map[string]river.QueueConfig{Queue: {MaxWorkers: 2}},
		RetryPolicy: retryPolicy{},
		JobTimeout:  timeout,
		// The same as refill's runner: whichever client leads River
		// rescues every client's jobs, so they must agree on when.
		RescueStuckJobsAfter: rescueAfter,
		FetchCooldown:        fetchCool,
		FetchPollInterval:    fetchPoll,
		// Whichever client leads River enqueues the watcher's ticks.
		PeriodicJobs: periodic,
	})
	if err != nil {
		return nil, fmt.Errorf("river: %w", err)
	}
	// River's jobs inherit Start's context; Run stops the client itself,
	// gracefully, when its own context ends.
	if err := c.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, fmt.Errorf("river: start: %w", err)
	}
	return c, nil
}
