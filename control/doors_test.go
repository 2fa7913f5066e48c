package control_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/planner"
	"github.com/refill-dev/refill/store"
	"github.com/refill-dev/refill/warehouse"
)

// The rules here are the ones every door (the CLI, the API, the web UI)
// once wrote for itself; each test drives control alone, wired as a door
// wires it, over the demo's SQLite warehouse.

// applied plans sessions over three days as alice, snapshots, has bob
// approve and applies it: a plan a rollback can restore.
func (b *bundle) applied(t *testing.T, c *control.Control) *refill.Plan {
	t.Helper()
	p, err := c.Plan(b.ctx, "alice", planner.Request{Targets: []string{"sessions"}, From: b.sc.Day(12), To: b.sc.Day(10), Reason: "late sessions"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Snapshot(b.ctx, p.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Approve(b.ctx, p.ID, "bob", ""); err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(b.ctx, p.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPlanBlockedIsAnError: a plan the source gate blocks is stored and
// returned, with an error every door maps to exit 3 (409); a plan whose
// gate passes comes without one.
func TestPlanBlockedIsAnError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.c
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

// TestRollbackOptions: forcing a rollback needs a reason, which the audit
// log keeps; a reason without force is no force at all.
func TestRollbackOptions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.c
	p := b.applied(t, c)
	b.exec(t, `UPDATE sessions SET events = events + 1 WHERE day = ?`, b.sc.Day(10))

	if _, _, err := c.Rollback(b.ctx, p.ID, "carol", control.RollbackOptions{Reason: "no force"}); !errors.Is(err, refill.ErrNotPermitted) ||
		!strings.Contains(err.Error(), "written since this plan published it") {
		t.Fatalf("rollback over someone else's write, with a reason but no force: %v, want it refused", err)
	}
	for _, reason := range []string{"", "  \t"} {
		if _, _, err := c.Rollback(b.ctx, p.ID, "carol", control.RollbackOptions{Force: true, Reason: reason}); !errors.Is(err, refill.ErrBadInput) ||
			!strings.Contains(err.Error(), "--force needs --reason") {
			t.Fatalf("forced rollback with reason %q: %v, want bad input", reason, err)
		}
	}
	if _, _, err := c.Rollback(b.ctx, p.ID, "alice", control.RollbackOptions{Force: true, Reason: "mine"}); !errors.Is(err, refill.ErrNotPermitted) ||
		!strings.Contains(err.Error(), "only a lead may force") {
		t.Fatalf("forced by an engineer: %v, want not permitted", err)
	}
	if st, err := c.Load(b.ctx, p.ID); err != nil || st.Plan.Status != refill.StatusApplied {
		t.Fatalf("refused rollbacks changed the plan: %v", err)
	}
	st, restored, err := c.Rollback(b.ctx, p.ID, "carol", control.RollbackOptions{Force: true, Reason: " the fix was wrong (INC-4712) "})
	if err != nil || st.Plan.Status != refill.StatusRolledBack || len(restored) != 3 {
		t.Fatalf("forced rollback: %v, %d restored", err, len(restored))
	}
	var detail struct {
		Forced []string `json:"forced"`
		Reason string   `json:"force_reason"`
	}
	for _, e := range b.entries(t, store.AuditFilter{PlanID: p.ID}) {
		if e.Kind == refill.EventRollback && e.Partition == "" {
			if err := json.Unmarshal(e.Detail, &detail); err != nil {
				t.Fatal(err)
			}
		}
	}
	if detail.Reason != "the fix was wrong (INC-4712)" || len(detail.Forced) != 1 || !strings.Contains(detail.Forced[0], b.sc.Day(10)) {
		t.Errorf("the forced rollback's audit entry: %+v", detail)
	}
}

// TestCheck: the gate alone — a failing verdict comes with ErrBlocked (exit
// 3), a passing one without; names are checked first; nothing is recorded.
func TestCheck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.c
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

// TestVerifyAuditWithoutTheWarehouse: an unreachable warehouse — never
// opened, or its anchors unreadable — does not stop the walk: the log is
// verified without the anchor, the note says so and why, and a tampered
// entry still fails.
func TestVerifyAuditWithoutTheWarehouse(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.c
	b.applied(t, c)
	if check, err := c.VerifyAudit(b.ctx); err != nil || check.Anchor == nil || !strings.Contains(check.AnchorNote, "matches the warehouse's anchor") {
		t.Fatalf("with the warehouse: %q, anchor %v, %v", check.AnchorNote, check.Anchor, err)
	}

	unopened := *c
	unopened.Warehouse, unopened.WarehouseErr = nil, errors.New("cannot connect to postgres 127.0.0.1:1/wh")
	closedWh, err := warehouse.Open(b.ctx, "sqlite:warehouse.db", b.sc.Dir)
	if err != nil {
		t.Fatal(err)
	}
	closedWh.Close()
	closed := *c
	closed.Warehouse = closedWh
	for _, k := range []struct {
		name string
		c    *control.Control
		why  string
	}{{"never opened", &unopened, "127.0.0.1:1"}, {"anchors unreadable", &closed, "reading the audit anchors"}} {
		check, err := k.c.VerifyAudit(b.ctx)
		if err != nil || check.Entries == 0 || check.Anchor != nil {
			t.Fatalf("%s: %d entries, anchor %v, %v; want the log verified without the anchor", k.name, check.Entries, check.Anchor, err)
		}
		if !strings.Contains(check.AnchorNote, "the warehouse is unreachable, so the anchor was not checked") || !strings.Contains(check.AnchorNote, k.why) {
			t.Errorf("%s: anchor note %q, want it to say the warehouse is unreachable and why (%s)", k.name, check.AnchorNote, k.why)
		}
	}

	b.execIn(t, ".refill/state.db", `UPDATE audit_log SET actor = 'mallory' WHERE seq = 2`)
	if _, err := unopened.VerifyAudit(b.ctx); !errors.Is(err, refill.ErrVerification) {
		t.Errorf("a tampered log, warehouse unreachable: %v, want a failed verification", err)
	}
}
