package control_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/demo"
	"github.com/refill-dev/refill/planner"
	"github.com/refill-dev/refill/project"
	"github.com/refill-dev/refill/store"
)

// The rules here are the ones every door (the CLI, the API, the web UI)
// once wrote for itself; each test drives control alone, wired as a door
// wires it, over the demo's SQLite warehouse.

type bundle struct {
	ctx context.Context
	sc  *demo.Scenario
	p   *project.Project
}

// setup writes the demo (events_raw still broken for 72 hours) and wires
// the core over it, keyed, on the demo's clock.
func setup(t *testing.T) (*control.Control, *bundle) {
	t.Helper()
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	sc, err := demo.Write(ctx, filepath.Join(t.TempDir(), "demo"), now)
	if err != nil {
		t.Fatal(err)
	}
	p, err := project.Open(ctx, project.Options{Config: sc.Config, Now: func() time.Time { return now },
		Getenv: func(name string) string {
			if name == "REFILL_AUDIT_KEY" {
				return "a key kept outside the state store"
			}
			return ""
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p.Control, &bundle{ctx: ctx, sc: sc, p: p}
}

func (b *bundle) entries(t *testing.T, f store.AuditFilter) []refill.Event {
	t.Helper()
	evs, err := b.p.Store.Audit(b.ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestPlanBlockedIsAnError: a plan the source gate blocks is stored and
// returned, with an error every door maps to exit 3 (409); a plan whose
// gate passes comes without one.
func TestPlanBlockedIsAnError(t *testing.T) {
	c, b := setup(t)
	p, err := c.Plan(b.ctx, "alice", planner.Request{Targets: []string{"events_raw"}, From: b.sc.BrokenFrom, To: b.sc.BrokenTo, Reason: "INC-4711"})
	if p == nil || p.Status != refill.StatusBlocked {
		t.Fatalf("plan over the broken source: %+v, %v; want a blocked plan", p, err)
	}
	if !errors.Is(err, refill.ErrBlocked) || refill.ExitCode(err) != refill.ExitBlocked || !strings.Contains(err.Error(), p.ID) {
		t.Fatalf("blocked plan's error = %v (exit %d), want ErrBlocked naming %s", err, refill.ExitCode(err), p.ID)
	}
	if st, err := c.Load(b.ctx, p.ID); err != nil || st.Plan.Status != refill.StatusBlocked {
		t.Fatalf("the blocked plan is not stored: %v", err)
	}
	ok, err := c.Plan(b.ctx, "alice", planner.Request{Targets: []string{"sessions"}, From: b.sc.Day(12), To: b.sc.Day(10), Reason: "late sessions"})
	if err != nil || ok == nil || ok.Status == refill.StatusBlocked {
		t.Fatalf("plan over a clean source: %v, %v", ok, err)
	}
}

// TestCheck: the gate alone — a failing verdict comes with ErrBlocked (exit
// 3), a passing one without; names are checked first; nothing is recorded.
func TestCheck(t *testing.T) {
	c, b := setup(t)
	before := len(b.entries(t, store.AuditFilter{}))
	broken, err := refill.ParseRange(b.sc.BrokenFrom, b.sc.BrokenTo, refill.NoRangeLimit)
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.Check(b.ctx, []string{"events_raw"}, broken)
	if v == nil || v.Passed || v.Failed() == 0 {
		t.Fatalf("check over the broken days: %+v, %v; want a failing verdict", v, err)
	}
	if !errors.Is(err, refill.ErrBlocked) || refill.ExitCode(err) != refill.ExitBlocked {
		t.Fatalf("failing check: %v, want ErrBlocked", err)
	}
	clean, err := refill.ParseRange(b.sc.Day(12), b.sc.Day(10), refill.NoRangeLimit)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := c.Check(b.ctx, []string{"events_raw"}, clean); err != nil || v == nil || !v.Passed {
		t.Fatalf("check over clean days: %+v, %v", v, err)
	}
	if v, err := c.Check(b.ctx, []string{"events_raw", "nope"}, clean); v != nil || !errors.Is(err, refill.ErrNotFound) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown dataset: %+v, %v", v, err)
	}
	c.Config.Datasets["tableless"] = &refill.Dataset{Name: "tableless"}
	if v, err := c.Check(b.ctx, []string{"tableless"}, clean); v != nil || !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), "no table") {
		t.Errorf("dataset without a table: %+v, %v", v, err)
	}
	delete(c.Config.Datasets, "tableless")
	if after := len(b.entries(t, store.AuditFilter{})); after != before {
		t.Errorf("check recorded %d audit entries", after-before)
	}
}

