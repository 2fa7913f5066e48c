package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/mattn/go-isatty"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/refill-dev/refill/run"
	"github.com/refill-dev/refill/store"
)

// terminal reports whether w writes to a terminal a progress display can
// redraw.
func terminal(w io.Writer) bool {
	f, ok := raw(w).(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}

// showProgress draws one bar per dataset of the plan — partitions done of
// total, rows published, elapsed — above which the run's log lines scroll.
// It returns a function that stops the display. Off a terminal it does
// nothing and the log lines go to stderr as they are.
func (a *app) showProgress(ctx context.Context, st *store.Store, planID string, r *run.Runner) func() {
	if a.json() || !terminal(a.stderr) {
		return func() {}
	}
	p, err := st.Plan(ctx, planID)
	if err != nil {
		return func() {}
	}
	published, err := st.Published(ctx, planID)
	if err != nil {
		return func() {}
	}
	done := map[string]int{}
	for _, pb := range published {
		done[pb.Dataset]++
	}
	// The bars draw with escape sequences of their own, so they go to the
	// terminal as they are; the run's log lines above them are escaped.
	prog := mpb.NewWithContext(ctx, mpb.WithOutput(raw(a.stderr)), mpb.WithWidth(30), mpb.WithRefreshRate(150*time.Millisecond))
	var mu sync.Mutex
	rows := map[string]int64{}
	bars := map[string]*mpb.Bar{}
	width := 0
	for _, s := range p.Steps {
		width = max(width, len(s.Dataset))
	}
	for _, s := range p.Steps {
		name := s.Dataset
		bar := prog.AddBar(int64(len(s.Partitions)),
			mpb.PrependDecorators(
				decor.Name(fmt.Sprintf("order %d  %-*s", s.Order, width, name)),
				decor.CountersNoUnit("  %d/%d partitions"),
			),
			mpb.AppendDecorators(
				decor.Any(func(decor.Statistics) string {
					mu.Lock()
					defer mu.Unlock()
					return humanize.Comma(rows[name]) + " rows  "
				}),
				decor.Elapsed(decor.ET_STYLE_GO),
			),
		)
		bar.SetCurrent(int64(done[name]))
		bars[name] = bar
	}
	logs := newEscaper(prog)
	r.Log = logs
	r.OnPublished = func(dataset, _ string, n *int64, _ time.Duration) {
		mu.Lock()
		if n != nil {
			rows[dataset] += *n
		}
		mu.Unlock()
		if b := bars[dataset]; b != nil {
			b.Increment()
		}
	}
	return func() {
		for _, b := range bars {
			if !b.Completed() {
				b.Abort(false)
			}
		}
		logs.Flush()
		prog.Wait()
		r.Log, r.OnPublished = a.stderr, nil
	}
}
