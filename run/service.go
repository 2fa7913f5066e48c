package run

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/refill-dev/refill/store"
)

// StartService starts a River client of another of refill's services (the
// watcher) on the state store's database, the same way a run starts its
// own: River's schema migrated in turn, SQLite on a connection of its own,
// PostgreSQL on the store's pool. It works queue with up to n jobs at a
// time, with the workers register adds (and a stand-in for partitions, so
// that if it leads River its rescuer never discards them), and enqueues
// periodic when it leads. Stop it with the returned func: it waits for
// the jobs in flight until ctx ends, then cancels them.
func StartService(ctx context.Context, st *store.Store, queue string, n int, register func(*river.Workers) error,
	periodic []*river.PeriodicJob, rescueAfter time.Duration, log *slog.Logger) (func(context.Context) error, error) {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	q, err := openQueue(ctx, st, queueConfig{register: register, queues: map[string]int{queue: n}, periodic: periodic,
		rescueAfter: rescueAfter, backoff: time.Second, logger: log})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		defer q.close()
		return q.stop(ctx, false)
	}, nil
}
