package project_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// TestTheCoreProvesCommandJobs: a program that wires the core, as a server
// does, proves a command job against proof_warehouse with the job's
// upstream partition copied there first. The job refuses to build from an
// empty input, so its passing proof shows the copy happened.
func TestTheCoreProvesCommandJobs(t *testing.T) {
	if _, err := exec.LookPath("sqlite3"); err != nil {
		t.Skip("the command job needs the sqlite3 shell")
	}
	ctx := context.Background()
	dir := t.TempDir()
	exec1 := func(db string, stmts ...string) {
		t.Helper()
		conn, err := sql.Open("sqlite", filepath.Join(dir, db))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		for _, s := range stmts {
			if _, err := conn.Exec(s); err != nil {
				t.Fatalf("%s: %s: %v", db, s, err)
			}
		}
	}
	count := func(db, query string, args ...any) int {
		t.Helper()
		conn, err := sql.Open("sqlite", filepath.Join(dir, db))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var n int
		if err := conn.QueryRow(query, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %s: %v", db, query, err)
		}
		return n
	}
	exec1("wh.db",
		`CREATE TABLE src (day TEXT NOT NULL, v INTEGER NOT NULL)`,
		`INSERT INTO src VALUES ('2026-11-01', 1), ('2026-11-02', 10), ('2026-11-02', 20), ('2026-11-02', 30), ('2026-11-03', 5)`,
		`CREATE TABLE out (day TEXT NOT NULL, n INTEGER NOT NULL)`)
	exec1("proof.db", `VACUUM`) // an empty database: the proof creates what it needs there
	script := `#!/bin/sh
set -eu
db="${REFILL_WAREHOUSE#sqlite:}"
n=$(sqlite3 "$db" "SELECT count(*) FROM src WHERE day = '$1'")
if [ "$n" -eq 0 ]; then
	echo "no rows in src on $1" >&2
	exit 3
fi
sqlite3 "$db" "DELETE FROM out WHERE day = '$1'; INSERT INTO out (day, n) VALUES ('$1', $n);"
`
	if err := os.WriteFile(filepath.Join(dir, "build.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := `version: 1
warehouse: sqlite:wh.db
proof_warehouse: sqlite:proof.db
datasets:
  src:
    table: src
    partition: {column: day}
  out:
    table: out
    partition: {column: day}
    upstream: [src]
    job:
      command: ["./build.sh", "{{partition}}"]
`
	if err := os.WriteFile(filepath.Join(dir, "refill.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := project.Open(ctx, project.Options{Config: filepath.Join(dir, "refill.yaml"), Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	pr, err := p.Control.Prove(ctx, "out", "2026-11-02", "alice")
	if err != nil {
		t.Fatalf("prove: %v", err)
	}
	if !pr.Passed || pr.Kind != refill.JobCommand || len(pr.Builds) != 4 || pr.Builds[3].Digest.Rows != 1 {
		t.Errorf("proof: passed %v, kind %s, builds %+v: %s", pr.Passed, pr.Kind, pr.Builds, pr.Message)
	}
	if want := "proof_warehouse sqlite:" + filepath.Join(dir, "proof.db"); pr.Warehouse != want {
		t.Errorf("the proof ran in %q, want %q", pr.Warehouse, want)
	}
	// The upstream's partition, and only it, was copied into proof_warehouse;
	// the job built from it there and nowhere else.
	if n := count("proof.db", `SELECT count(*) FROM src WHERE day = '2026-11-02'`); n != 3 {
		t.Errorf("proof_warehouse holds %d src rows on 2026-11-02, want the warehouse's 3", n)
	}
	if n := count("proof.db", `SELECT count(*) FROM src WHERE day <> '2026-11-02'`); n != 0 {
		t.Errorf("proof_warehouse holds %d src rows of other days, want none", n)
	}
	if n := count("proof.db", `SELECT n FROM out WHERE day = '2026-11-02'`); n != 3 {
		t.Errorf("the job counted %d input rows in proof_warehouse, want 3", n)
	}
	if n := count("wh.db", `SELECT count(*) FROM out`); n != 0 {
		t.Errorf("the proof wrote %d rows to the production warehouse", n)
	}
	if proofs, err := p.Store.Proofs(ctx, "out"); err != nil || len(proofs) != 1 || !proofs[0].Passed {
		t.Errorf("stored proofs: %+v (%v), want one passing proof", proofs, err)
	}

	// Where the upstream has no rows the job refuses to build: what made
	// the proof above pass was the copied input.
	if _, err := p.Control.Prove(ctx, "out", "2026-11-05", "alice"); err == nil || !strings.Contains(err.Error(), "no rows in src on 2026-11-05") {
		t.Errorf("prove over an empty input: %v, want the job's refusal", err)
	}
}
