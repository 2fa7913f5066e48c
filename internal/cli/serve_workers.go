package cli

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/jobs/airflow"
	"github.com/refill-dev/refill/run"
	"github.com/refill-dev/refill/server"
	"github.com/refill-dev/refill/watch"
)

// serveWorkers starts what serve runs beside the HTTP server: partition
// workers on a PostgreSQL state store (with SQLite, each apply does its own
// work). It returns a function that waits for them to stop after ctx ends.
func (a *app) serveWorkers(ctx context.Context, e *env, c *control.Control, r *run.Runner, srv *server.Server, log *slog.Logger) (func(), error) {
	var wg sync.WaitGroup
	if e.st.SQLitePath() == "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.Work(ctx); err != nil {
				log.Error("partition workers stopped", slog.String("error", err.Error()))
			}
		}()
	}
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
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := w.Serve(ctx, log.With(slog.String("component", "watch"))); err != nil {
			log.Error("watcher stopped", slog.String("error", err.Error()))
		}
	}()
	// Runs nobody holds (paused by a restart, their holder dead) are
	// resumed here, at once and as they appear.
	wg.Add(1)
	go func() {
		defer wg.Done()
		adopt := log.With(slog.String("component", "adopt"))
		run.Adopt(ctx, c, func(ctx context.Context, id string) error { return srv.StartApply(ctx, id, refill.Adopter) },
			func(format string, args ...any) { adopt.Info(fmt.Sprintf(format, args...)) })
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := e.notifier.Run(ctx, c, log.With(slog.String("component", "notify"))); err != nil {
			log.Error("notifier stopped", slog.String("error", err.Error()))
		}
	}()
	return wg.Wait, nil
}
