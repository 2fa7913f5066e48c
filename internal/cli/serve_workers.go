package cli

import (
	"context"
	"log/slog"
	"sync"

	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/run"
	"github.com/refill-dev/refill/server"
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
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := e.notifier.Run(ctx, c, log.With(slog.String("component", "notify"))); err != nil {
			log.Error("notifier stopped", slog.String("error", err.Error()))
		}
	}()
	return wg.Wait, nil
}
