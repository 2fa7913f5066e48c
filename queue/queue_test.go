package queue

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/refill-dev/refill/store"
)

// TestEveryKindHasAWorkerOrAStandIn: whichever of refill's clients leads
// River, its rescuer knows every kind (a kind it has no worker for would
// be discarded), with the kind's own time limit.
func TestEveryKindHasAWorkerOrAStandIn(t *testing.T) {
	for name, o := range map[string]Options{
		"partitions": {Partition: &partitions{}},
		"notices":    {Notify: &standIn[NotifyArgs]{}},
		"ticks":      {Watch: &standIn[WatchArgs]{}},
		"inserter":   {},
	} {
		o.RescueAfter = 10 * time.Minute
		ws, err := workers(o)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// A second registration of a kind is refused: so each is there.
		for kind, add := range map[string]func() error{
			"partition": func() error { return river.AddWorkerSafely(ws, &partitions{}) },
			"notify":    func() error { return river.AddWorkerSafely(ws, &standIn[NotifyArgs]{}) },
			"watch":     func() error { return river.AddWorkerSafely(ws, &standIn[WatchArgs]{}) },
		} {
			if add() == nil {
				t.Errorf("%s: no worker for the %s kind", name, kind)
			}
		}
	}
	if got := (&standIn[PartitionArgs]{limit: PartitionTimeout(10 * time.Minute)}).Timeout(nil); got != 9*time.Minute {
		t.Errorf("a partition stand-in's limit is %s, want nine tenths of rescue_after", got)
	}
}

// partitions works partition jobs by handing them to a channel, and waits
// for release before returning.
type partitions struct {
	river.WorkerDefaults[PartitionArgs]
	started chan PartitionArgs
	release chan struct{}
	ended   chan error
}

func (p *partitions) Work(ctx context.Context, job *river.Job[PartitionArgs]) error {
	p.started <- job.Args
	select {
	case <-p.release:
		p.ended <- nil
		return nil
	case <-ctx.Done():
		p.ended <- ctx.Err()
		return ctx.Err()
	}
}

// TestStopLetsJobsInFlightFinish: the context a queue was opened with
// ending (a SIGTERM) cancels nothing; Stop without cancel waits for the
// job in flight, which completes.
func TestStopLetsJobsInFlightFinish(t *testing.T) {
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "state.db"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p := &partitions{started: make(chan PartitionArgs, 1), release: make(chan struct{}), ended: make(chan error, 1)}
	ctx, signal := context.WithCancel(context.Background())
	q, err := Open(ctx, st, Options{Partition: p, PartitionWorkers: 1, RescueAfter: time.Minute, Backoff: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	events, unsubscribe := q.Subscribe()
	defer unsubscribe()
	job := PartitionArgs{PlanID: "p1", Dataset: "d", Partition: "2026-11-01", Run: 1}
	if n, err := q.Insert(context.Background(), []PartitionArgs{job}, 3); err != nil || n != 1 {
		t.Fatalf("Insert = %d, %v; want 1 queued", n, err)
	}
	if n, err := q.Insert(context.Background(), []PartitionArgs{job}, 3); err != nil || n != 0 {
		t.Fatalf("Insert of the same job again = %d, %v; want none queued", n, err)
	}
	if got := <-p.started; got != job {
		t.Fatalf("worked %+v, want %+v", got, job)
	}
	running, err := q.Running(context.Background(), "p1", 1, time.Now().Add(time.Minute))
	if err != nil || len(running) != 1 || running[0].Args != job || running[0].Attempted.IsZero() || running[0].By != Process {
		t.Fatalf("Running = %+v, %v; want the job", running, err)
	}
	if other, err := q.Running(context.Background(), "p1", 2, time.Now().Add(time.Minute)); err != nil || len(other) != 0 {
		t.Errorf("Running of another run = %+v, %v", other, err)
	}
	signal()
	stopped := make(chan error, 1)
	go func() { stopped <- q.Stop(context.Background(), false) }()
	close(p.release)
	if err := <-p.ended; err != nil {
		t.Fatalf("the job in flight was cancelled when the opener's context ended: %v", err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if ev := <-events; ev.Kind != river.EventKindJobCompleted {
		t.Errorf("the job ended %s, want completed", ev.Kind)
	}
	if gone, err := q.GivenUp(context.Background(), "p1", 1); err != nil || len(gone) != 0 {
		t.Errorf("GivenUp = %+v, %v", gone, err)
	}
}
