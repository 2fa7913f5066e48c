package project_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/demo"
	"github.com/refill-dev/refill/planner"
	"github.com/refill-dev/refill/project"
)

// TestTheCoreWithoutTheCLI is the kind of program a server is: it imports
// refill's core, not its command line, and plans, approves, applies and
// reports under the same rules — self-approval refused, a plan applied only
// once approved, the report's verdict returned as a classified error.
func TestTheCoreWithoutTheCLI(t *testing.T) {
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
	defer p.Close()
	c := p.Control

	plan, err := c.Plan(ctx, "alice", planner.Request{Targets: []string{"sessions"}, From: sc.Day(12), To: sc.Day(10), Reason: "late sessions"})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Tier == refill.TierAuto {
		t.Fatalf("an unproven job planned auto: %v", plan.Reasons)
	}
	if err := c.Apply(ctx, plan.ID, "alice"); !errors.Is(err, refill.ErrNotPermitted) {
		t.Fatalf("apply before approval: %v, want not permitted", err)
	}
	if _, err := c.Approve(ctx, plan.ID, "alice", ""); !errors.Is(err, refill.ErrNotPermitted) {
		t.Fatalf("self-approval: %v, want not permitted", err)
	}
	if _, err := c.Approve(ctx, plan.ID, "bob", "looks right"); err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(ctx, plan.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	rep, err := c.Report(ctx, plan.ID)
	if err != nil {
		t.Fatalf("report: %v", err)
	}
	if rep.Status != refill.StatusApplied || rep.Published != rep.Total || rep.Total != 3 {
		t.Errorf("report: %s, %d of %d published", rep.Status, rep.Published, rep.Total)
	}
	check, err := c.VerifyAudit(ctx)
	if err != nil || !check.Keyed || check.AuditReport.Anchor == nil {
		t.Errorf("audit: keyed %v, anchor %v, err %v", check.Keyed, check.AuditReport.Anchor, err)
	}
}
