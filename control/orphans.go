package control

import (
	"context"

	"github.com/refill-dev/refill"
)

// Orphans lists the running plans that nobody runs: the process that held
// the run let go of it as it shut down (a restart's drain), died, or lost
// the state store for longer than its patience and its lease lapsed. Any
// refill serve or worker, and the watcher, resumes them (Start), so that
// no plan stays running with nobody; of several that try at once, the
// run's lease lets one win.
func (c *Control) Orphans(ctx context.Context) ([]string, error) {
	list, err := c.Store.Plans(ctx, refill.PlanFilter{Status: refill.StatusRunning})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range list {
		h, err := c.Holder(ctx, p.ID)
		if err != nil {
			return nil, err
		}
		if h.Orphaned {
			out = append(out, p.ID)
		}
	}
	return out, nil
}
