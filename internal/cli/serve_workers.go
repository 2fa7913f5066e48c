package cli

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/jobs/airflow"
	"github.com/refill-dev/refill/queue"
	"github.com/refill-dev/refill/run"
	"github.com/refill-dev/refill/server"
	"github.com/refill-dev/refill/watch"
)

// serveWorkers starts what serve runs beside the HTTP server: River's
// workers, the watcher and the adopter of orphaned runs. It returns a
// function that waits for them to stop after ctx ends.
func (a *app) serveWorkers(ctx context.Context, e *env, c *control.Control, r *run.Runner, srv *server.Server, log *slog.Logger) (func(), error) {
	var wg sync.WaitGroup
	now, err := a.now()
	if err != nil {
		return nil, err
	}
	w := &watch.Watcher{Config: e.cfg, Store: e.st, Warehouse: e.wh, Control: c, Now: now, DAGRuns: watch.AirflowRuns(&airflow.Client{}, e.cfg.Dir),
		Apply: func(ctx context.Context, id string) error { return srv.StartApply(ctx, id, refill.Watcher) },
		Core: func(ctx context.Context) (*refill.Config, *control.Control, error) {
			core, err := srv.Current(ctx)
			if err != nil {
				return nil, nil, err
			}
			return core.Config, core.Control, nil
		}}
	// One River client works every kind this process serves: partitions
	// on a PostgreSQL state store (with SQLite, each apply does its own
	// work), notices, the watcher's ticks.
	var o queue.Options
	if e.st.SQLitePath() == "" {
		r.Partitions(&o)
	}
	e.notifier.Notices(&o, c, log.With(slog.String("component", "notify")))
	w.Ticks(&o, log.With(slog.String("component", "watch")))
	if o.Works() {
		if o.Logger == nil {
			o.Logger = slog.New(slog.DiscardHandler)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := queue.Serve(ctx, e.st, o, cmp.Or(r.Grace, 30*time.Second), r.Drain); err != nil {
				log.Error("River stopped", slog.String("error", err.Error()))
			}
		}()
	}
	// Runs nobody holds (paused by a restart, their holder dead) are
	// resumed here, at once and as they appear.
	wg.Add(1)
	go func() {
		defer wg.Done()
		adopt := log.With(slog.String("component", "adopt"))
		run.Adopt(ctx, c, func(ctx context.Context, id string) error { return srv.StartApply(ctx, id, refill.Adopter) },
			func(format string, args ...any) { adopt.Info(fmt.Sprintf(format, args...)) })
	}()
	return wg.Wait, nil
}
