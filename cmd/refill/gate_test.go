package main

import (
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

// TestGateAndProofThroughTheBinary breaks the demo's source again and
// checks the exit codes scripts rely on: 3 for a failed gate, 5 for a
// failed proof, 2 for bad input.
func TestGateAndProofThroughTheBinary(t *testing.T) {
	t.Parallel()
	d := setup(t)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(d, "warehouse.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE events_raw SET user_id = NULL WHERE event_date = '2026-11-26' AND event_id % 4 = 0`); err != nil {
		t.Fatal(err)
	}
	// The demo fixed billing's job; put back the INSERT OR IGNORE its proof
	// must catch.
	cfgPath := filepath.Join(d, "refill.yaml")
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(cfg), "DELETE FROM revenue_daily WHERE day = :partition;\n        INSERT INTO revenue_daily", "INSERT OR IGNORE INTO revenue_daily", 1)
	if broken == string(cfg) {
		t.Fatal("the demo's billing job is not the fixed one")
	}
	if err := os.WriteFile(cfgPath, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	// Stale billing rows for the job to keep.
	if _, err := db.Exec(`UPDATE revenue_daily SET amount = amount + 1 WHERE day = '2026-11-28'`); err != nil {
		t.Fatal(err)
	}
	blockedBefore := len(decode[[]json.RawMessage](t, run(t, d, nil, "plans", "--status", "blocked", "-o", "json").stdout))

	r := run(t, d, nil, "check", "events_raw", "--from", "2026-11-24", "--to", "2026-11-27", "-o", "json")
	if r.code != 3 {
		t.Fatalf("check: exit %d, want 3: %s", r.code, r.stderr)
	}
	g := decode[struct {
		Passed   bool          `json:"passed"`
		Findings []findingJSON `json:"findings"`
	}](t, r.stdout)
	if g.Passed || len(g.Findings) != 1 || g.Findings[0].Partition != "2026-11-26" || g.Findings[0].Column != "user_id" || g.Findings[0].Observed < 0.2 {
		t.Errorf("gate = %+v, want one user_id null finding on 2026-11-26", g)
	}
	text := run(t, d, nil, "check", "events_raw", "--from", "2026-11-24", "--to", "2026-11-27")
	if !strings.Contains(text.stdout, "Source gate: FAILED") || !strings.Contains(text.stdout, "events_raw.user_id 2026-11-26 not_null") {
		t.Errorf("check text:\n%s", text.stdout)
	}

	r = run(t, d, nil, "plan", "sessions", "--from", "2026-11-25", "--to", "2026-11-27", "--reason", "x", "--as", "bob", "-o", "json")
	if r.code != 3 || decode[planJSON](t, r.stdout).Status != "blocked" {
		t.Errorf("plan over a failing source: exit %d, want 3 and a blocked plan: %s", r.code, r.stderr)
	}
	if after := len(decode[[]json.RawMessage](t, run(t, d, nil, "plans", "--status", "blocked", "-o", "json").stdout)); after != blockedBefore+1 {
		t.Errorf("blocked plans %d -> %d, want one more stored", blockedBefore, after)
	}

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"prove", "revenue_daily", "--partition", "2026-11-28"}, 5, "depends on what was there before"},
		{[]string{"prove", "sessions", "--partition", "2026-11-28"}, 0, "all four builds agree"},
		{[]string{"prove", "events_raw", "--partition", "2026-11-28"}, 2, "is a source"},
		{[]string{"prove", "sessions", "--partition", "2026-13-01"}, 2, "not a valid day partition"},
		{[]string{"prove", "sessions"}, 2, "--partition is required"},
		{[]string{"prove", "partner_feed", "--partition", "2026-11-28"}, 0, "proof_warehouse"},
		{[]string{"check", "events_raw", "--from", "2026-11-28", "--to", "2026-11-20"}, 2, "is after"},
	} {
		r := run(t, d, []string{"REFILL_USER=alice"}, c.args...)
		if r.code != c.code || !strings.Contains(r.stdout+r.stderr, c.want) {
			t.Errorf("%v: exit %d, want %d with %q\nstdout: %s\nstderr: %s", c.args, r.code, c.code, c.want, r.stdout, r.stderr)
		}
	}
}

// TestDemoRemappedDayFailsDrift checks the demo's planted fault: on one day
// the upstream sent every event as 'unknown', and the gate's drift check
// catches it on that day alone, on event_type, in words a reader takes in
// at once.
func TestDemoRemappedDayFailsDrift(t *testing.T) {
	t.Parallel()
	d := setup(t)
	r := run(t, d, nil, "check", "events_raw", "--from", "2026-10-27", "--to", "2026-10-29", "-o", "json")
	if r.code != 3 {
		t.Fatalf("check: exit %d, want 3: %s", r.code, r.stderr)
	}
	g := decode[struct {
		Findings []findingJSON `json:"findings"`
	}](t, r.stdout)
	for _, f := range g.Findings {
		if f.Partition != "2026-10-28" || f.Column != "event_type" || f.Check != "drift" {
			t.Errorf("finding %+v, want only drift on event_type on 2026-10-28", f)
		}
	}
	text := run(t, d, nil, "check", "events_raw", "--from", "2026-10-27", "--to", "2026-10-29")
	if !strings.Contains(text.stdout, "events_raw.event_type 2026-10-28 drift: event_type: top value share 100% (history ") {
		t.Errorf("check text:\n%s", text.stdout)
	}
}
