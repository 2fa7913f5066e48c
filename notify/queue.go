package notify

import (
	"context"
	"database/sql"
	"fmt"
	"github.com/refill-dev/refill/run"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivertype"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
)

// JobKind is the River kind of a notice job.
const JobKind = run.NotifyKind

// Queue is the River queue notices wait in, beside run.PartitionQueue and
// run.WatchQueue: one queue per kind of job.
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
	fetchPoll    = run.ServicePoll
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

// worker is River's side of a notice job. Its attempts are bounded by
// jobTimeout and retried by the notice's own policy, whatever the client's
// defaults.
type worker struct {
	river.WorkerDefaults[Args]
	deliver func(ctx context.Context, a Args) error
	timeout time.Duration
}

func (w *worker) Work(ctx context.Context, job *river.Job[Args]) error {
	return w.deliver(ctx, job.Args)
}

func (w *worker) Timeout(*river.Job[Args]) time.Duration { return w.timeout }

func (w *worker) NextRetry(job *river.Job[Args]) time.Time {
	return retryPolicy{}.NextRetry(job.JobRow)
}

// startConsumer starts River on the state store's database to work the
// notice queue (run.StartService: River's schema migrated first, so a
// process that runs notices without having installed them still works),
// with a stand-in for the watcher's ticks. It returns the function that
// stops it.
func startConsumer(ctx context.Context, st *store.Store, deliver func(context.Context, Args) error, rescueAfter time.Duration, periodic []*river.PeriodicJob, log *slog.Logger) (func(context.Context) error, error) {
	w := &worker{deliver: deliver, timeout: min(jobTimeout, rescueAfter*9/10)}
	register := func(workers *river.Workers) error {
		if err := river.AddWorkerSafely(workers, w); err != nil {
			return err
		}
		return run.AddWatchStandIn(workers)
	}
	return run.StartService(ctx, st, Queue, 2, register, periodic, rescueAfter, log)
}
