package notify

import (
	"context"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/refill-dev/refill/queue"
)

// The retry policy backs off from retryBase, doubling, capped at
// retryCap: with queue.NotifyAttempts, about two and a half hours of
// trying.
const (
	retryBase    = 2 * time.Second
	retryCap     = 30 * time.Minute
	stopDeadline = 30 * time.Second
)

// retryPolicy backs off exponentially from retryBase, capped at retryCap.
type retryPolicy struct{}

func (retryPolicy) NextRetry(job *rivertype.JobRow) time.Time {
	d := retryBase << min(max(job.Attempt-1, 0), 20)
	return time.Now().Add(min(d, retryCap))
}

// quiet is the logger River's migrator and insert-only client write to:
// they say nothing a person needs.
var quiet = slog.New(slog.DiscardHandler)

// worker is River's side of a notice job. Its attempts are bounded by
// queue.NotifyTimeout and retried by the notice's own policy, whatever the
// client's defaults.
type worker struct {
	river.WorkerDefaults[queue.NotifyArgs]
	deliver func(ctx context.Context, a queue.NotifyArgs) error
	timeout time.Duration
}

func (w *worker) Work(ctx context.Context, job *river.Job[queue.NotifyArgs]) error {
	return w.deliver(ctx, job.Args)
}

func (w *worker) Timeout(*river.Job[queue.NotifyArgs]) time.Duration { return w.timeout }

func (w *worker) NextRetry(job *river.Job[queue.NotifyArgs]) time.Time {
	return retryPolicy{}.NextRetry(job.JobRow)
}
