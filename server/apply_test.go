package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/internal/pgtest"
	"github.com/refill-dev/refill/store"
)

// otherProcess is the holder a refill apply in another process (on
// another host) writes: its lease is alive until it expires.
const otherProcess = "cli-host:4242"

// approvedPlan plans sessions over three days as alice and has bob approve
// it: a semi-auto plan that may run.
func (e *apiEnv) approvedPlan(t *testing.T) string {
	t.Helper()
	st, plan := e.call("alice", "POST", "/api/v1/plans", `{"targets":["sessions"],"from":"`+e.sc.Day(12)+`","to":"`+e.sc.Day(10)+`","reason":"late sessions"}`)
	if st != http.StatusCreated {
		t.Fatalf("plan: HTTP %d %v", st, plan)
	}
	id, _ := plan["id"].(string)
	if st, res := e.call("bob", "POST", "/api/v1/plans/"+id+"/approve", ""); st != http.StatusOK {
		t.Fatalf("approve: HTTP %d %v", st, res)
	}
	return id
}

// startElsewhere does what refill apply in another process does as its
// run begins, in one transaction: it takes the run's lease, marks the plan
// running and records the start. It fails when that process lost the race.
func (e *apiEnv) startElsewhere(ctx context.Context, id string) error {
	return e.p.Store.Update(ctx, func(tx *store.Tx) error {
		if err := tx.TakeLease(ctx, id, otherProcess, time.Now().Add(time.Minute), store.Lease.HolderAlive); err != nil {
			return err
		}
		if err := tx.SetStatus(ctx, id, refill.StatusApproved, refill.StatusRunning); err != nil {
			return err
		}
		return tx.Append(ctx, &refill.Event{Kind: refill.EventRunStarted, Actor: "carol", PlanID: id, At: time.Now(),
			Detail: refill.Detail(map[string]any{"run": 1, "resumed_from": refill.StatusApproved, "holder": otherProcess})})
	})
}

// runsStarted lists the holders of the plan's recorded run starts.
func (e *apiEnv) runsStarted(t *testing.T, id string) []string {
	t.Helper()
	evs, err := e.p.Store.Audit(context.Background(), store.AuditFilter{PlanID: id, Kind: refill.EventRunStarted})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		var d struct {
			Holder string `json:"holder"`
		}
		_ = json.Unmarshal(ev.Detail, &d)
		out = append(out, d.Holder)
	}
	return out
}

// racing is the run's executor with another process's apply slipped in
// just before it takes the run: the moment a check made before the take
// cannot see.
type racing struct {
	control.Executor
	first func(ctx context.Context, p *refill.Plan) error
}

func (r racing) Start(ctx context.Context, p *refill.Plan, actor string) (control.HeldRun, error) {
	if err := r.first(ctx, p); err != nil {
		return nil, err
	}
	return r.Executor.Start(ctx, p, actor)
}

// TestAPIApplyLosesTheRaceWith409: another process's apply takes the run
// after the server has checked that nobody holds it and before the server
// takes it. The server answers 409 with the CLI's exit code 4, never 202
// for a run it then refuses in its log; the run is the other process's.
func TestAPIApplyLosesTheRaceWith409(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			dsn := ""
			if engine == "postgres" {
				dsn = pgtest.Schema(t)
			}
			e := apiServe(t, dsn)
			id := e.approvedPlan(t)
			c := e.p.Control
			c.Executor = racing{Executor: c.Executor, first: func(ctx context.Context, p *refill.Plan) error {
				return e.startElsewhere(ctx, p.ID)
			}}
			st, res := e.call("bob", "POST", "/api/v1/plans/"+id+"/apply", "")
			wantError(t, "apply that lost the race", st, res, http.StatusConflict, refill.ExitNotPermitted)
			if msg, _ := res["error"].(string); !strings.Contains(msg, otherProcess) || !strings.Contains(msg, "is running now") {
				t.Errorf("the 409 does not say who runs the plan: %q", msg)
			}
			if got := e.runsStarted(t, id); len(got) != 1 || got[0] != otherProcess {
				t.Errorf("run starts recorded: %q, want the other process's alone", got)
			}
			if l, held, err := e.p.Store.Lease(context.Background(), id); err != nil || !held || l.Holder != otherProcess {
				t.Errorf("the run's lease: %+v held=%v (%v), want %s's", l, held, err, otherProcess)
			}
			if e.srv.Running(id) {
				t.Error("the server says it runs a plan it answered 409 for")
			}
		})
	}
}

// TestAPIApplyRace: several applies of one plan over the API at once, and
// refill apply in another process at the same moment. Exactly one of them
// gets the run: a 202 means the server took it (its start is the one
// recorded, and the other process was refused), and every other answer is
// 409 with code 4.
func TestAPIApplyRace(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			dsn := ""
			if engine == "postgres" {
				dsn = pgtest.Schema(t)
			}
			e := apiServe(t, dsn)
			id := e.approvedPlan(t)
			const requests = 6
			type answer struct {
				status int
				res    map[string]any
			}
			answers := make([]answer, requests)
			var elsewhere error
			var wg sync.WaitGroup
			gate := make(chan struct{})
			for i := range requests {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-gate
					st, res := e.call([]string{"bob", "carol"}[i%2], "POST", "/api/v1/plans/"+id+"/apply", "")
					answers[i] = answer{st, res}
				}()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				elsewhere = e.startElsewhere(context.Background(), id)
			}()
			close(gate)
			wg.Wait()

			accepted := 0
			for i, a := range answers {
				switch a.status {
				case http.StatusAccepted:
					accepted++
				case http.StatusConflict:
					wantError(t, "a losing apply", a.status, a.res, http.StatusConflict, refill.ExitNotPermitted)
				default:
					t.Errorf("apply %d: HTTP %d %v, want 202 or 409", i, a.status, a.res)
				}
			}
			started := e.runsStarted(t, id)
			switch {
			case elsewhere == nil:
				if accepted != 0 || len(started) != 1 || started[0] != otherProcess {
					t.Errorf("the other process took the run, yet %d apply(s) got 202; starts recorded %q", accepted, started)
				}
			case accepted == 1:
				if !errors.Is(elsewhere, refill.ErrLocked) && !errors.Is(elsewhere, refill.ErrNotPermitted) {
					t.Errorf("the other process was refused with %v, want the lock (or the plan no longer approved)", elsewhere)
				}
				if len(started) != 1 || started[0] == otherProcess {
					t.Errorf("starts recorded %q, want the server's alone", started)
				}
			default:
				t.Errorf("%d apply(s) got 202 and the other process was refused (%v): nobody or too many got the run", accepted, elsewhere)
			}
		})
	}
}
