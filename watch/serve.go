package watch

import (
	"context"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/queue"
)

// Ticks adds the watcher's tick worker and periodic tick to o and reports
// whether it did: not when no dataset has a schedule. River's elected
// leader enqueues one tick every watch.interval, whichever process it is,
// and one client works it, so replicas never tick twice.
func (w *Watcher) Ticks(o *queue.Options, log *slog.Logger) bool {
	periodic := queue.WatchPeriodic(w.Config)
	if periodic == nil {
		return false
	}
	o.Watch, o.Periodic = &ticker{w: w, log: log}, periodic
	if o.RescueAfter <= 0 {
		o.RescueAfter = time.Duration(w.Config.Run.RescueAfter)
		if o.RescueAfter <= 0 {
			o.RescueAfter = time.Duration(refill.DefaultRunConfig().RescueAfter)
		}
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	log.Info("watch: ticking", slog.Float64("every_s", time.Duration(w.Config.Watch.Interval).Seconds()))
	return true
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
