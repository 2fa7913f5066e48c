package run

import (
	"context"
	"errors"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
)

// AdoptEvery is how often refill serve and refill worker look for running
// plans nobody runs (control.Orphans), besides once as they start.
var AdoptEvery = 5 * time.Second

// Adopt resumes the running plans nobody runs — their holder paused them
// for a restart, died, or lost the state store past its patience — at
// once, then every AdoptEvery, until ctx ends. start takes a plan's run
// for this process and carries it on in the background; a run another
// process took first (refill.ErrLocked) is left to it. A plan that may not
// run (stale, frozen) is told once in the log and left for a person.
func Adopt(ctx context.Context, c *control.Control, start func(ctx context.Context, id string) error, logf func(format string, args ...any)) {
	told := map[string]string{}
	tick := time.NewTicker(AdoptEvery)
	defer tick.Stop()
	for {
		ids, err := c.Orphans(ctx)
		if err != nil && ctx.Err() == nil && told[""] != err.Error() {
			told[""] = err.Error()
			logf("looking for runs nobody holds: %v", err)
		}
		for _, id := range ids {
			err := start(ctx, id)
			switch {
			case err == nil:
				delete(told, id)
				logf("plan %s: nobody was running it; resumed here", id)
			case errors.Is(err, refill.ErrLocked), ctx.Err() != nil:
			case told[id] != err.Error():
				told[id] = err.Error()
				logf("plan %s: nobody is running it, and it may not be resumed here: %v", id, err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
