package watch

import (
	"context"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/queue"
)

// Serve ticks the watcher as River's periodic job until ctx ends: River's
// elected leader enqueues one tick every watch.interval, whichever process
// it is, and one client works it, so replicas never tick twice. It returns
// at once when no dataset has a schedule.
func (w *Watcher) Serve(ctx context.Context, log *slog.Logger) error {
	periodic := queue.WatchPeriodic(w.Config)
	if periodic == nil {
		return nil
	}
	rescueAfter := time.Duration(w.Config.Run.RescueAfter)
	if rescueAfter <= 0 {
		rescueAfter = time.Duration(refill.DefaultRunConfig().RescueAfter)
	}
	q, err := queue.Open(ctx, w.Store, queue.Options{Watch: &ticker{w: w, log: log}, Periodic: periodic, RescueAfter: rescueAfter, Backoff: time.Second})
	if err != nil {
		return err
	}
	defer q.Close()
	log.Info("watch: ticking", slog.Duration("every", time.Duration(w.Config.Watch.Interval)))
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return q.Stop(sctx, false)
}

// ticker is River's side of a tick.
type ticker struct {
	river.WorkerDefaults[queue.WatchArgs]
	w   *Watcher
	log *slog.Logger
}

func (t *ticker) Work(ctx context.Context, job *river.Job[queue.WatchArgs]) error {
	rep, err := t.w.Tick(ctx)
	if err != nil {
		t.log.Error("watch: tick failed", slog.String("error", err.Error()))
		return err
	}
	for _, d := range rep.Decisions {
		lvl := slog.LevelInfo
		if d.Err != "" {
			lvl = slog.LevelWarn
		}
		t.log.Log(ctx, lvl, "watch: "+string(d.Action), slog.String("dataset", d.Dataset), slog.String("from", d.From),
			slog.String("to", d.To), slog.String("plan", d.PlanID), slog.String("why", d.Why), slog.String("error", d.Err))
	}
	t.log.Info("watch: tick", slog.Int("datasets", rep.Datasets), slog.Int("gaps", len(rep.Gaps)))
	return nil
}

// Timeout bounds a tick.
func (t *ticker) Timeout(*river.Job[queue.WatchArgs]) time.Duration { return queue.WatchTimeout }
