package main

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGuards checks what a run and a rollback refuse, found by review: a
// job edited after approval, an approval forged in the state store, a
// tampered audit log, a blocked plan, a rollback under a later run, a
// sign-off by the requester, and a proof that would overwrite real files.
func TestGuards(t *testing.T) {
	t.Parallel()
	d, blocked, plans := demoPlans(t)
	semi := plans[1]
	id := func(r result) string { return decode[planJSON](t, r.stdout).ID }

	// A blocked plan exits 3 on apply too.
	step(t, d, 3, "can never run", "apply", blocked, "--as", "alice")

	// The job changed after approval: the approved plan may not run.
	step(t, d, 0, "", "approve", semi, "--as", "bob")
	cfgPath := filepath.Join(d, "refill.yaml")
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(cfg), "count(*) AS events,", "count(*) * 100 AS events,", 1)
	if err := os.WriteFile(cfgPath, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	step(t, d, 4, "the plan is stale", "apply", semi, "--as", "alice")
	step(t, d, 0, "the job of sessions changed: its query text", "show", semi)
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}

	// An approval written into the state store behind refill's back counts
	// for nothing.
	state, err := sql.Open("sqlite", "file:"+filepath.Join(d, ".refill", "state.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()
	forged := id(step(t, d, 0, "", "plan", "sessions", "--from", "2026-10-01", "--to", "2026-10-10", "--reason", "forge", "--as", "alice", "-o", "json"))
	var hash string
	if err := state.QueryRow(`SELECT hash FROM plans WHERE id = ?`, forged).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	if _, err := state.Exec(`INSERT INTO approvals (plan_id, plan_hash, actor, decision, note, at) VALUES (?, ?, 'bob', 'approve', '', '2026-11-30T12:00:00.000000000Z')`, forged, hash); err != nil {
		t.Fatal(err)
	}
	if _, err := state.Exec(`UPDATE plans SET status = 'approved' WHERE id = ?`, forged); err != nil {
		t.Fatal(err)
	}
	step(t, d, 4, "needs one approval by someone other than alice", "apply", forged, "--as", "alice")

	// A rollback under a later run is refused; so is a sign-off by the
	// requester.
	a := id(step(t, d, 0, "", "plan", "sessions", "--from", "2026-10-20", "--to", "2026-10-22", "--reason", "first", "--as", "alice", "-o", "json"))
	step(t, d, 0, "", "snapshot", a, "--as", "alice")
	// October has too little same-weekday history for the volume check to
	// score it, and an unscored check is no pass: these plans need a
	// second person.
	step(t, d, 0, "", "approve", a, "--as", "bob")
	step(t, d, 0, "", "apply", a, "--as", "alice")
	b := id(step(t, d, 0, "", "plan", "sessions", "--from", "2026-10-21", "--to", "2026-10-21", "--reason", "second", "--as", "bob", "-o", "json"))
	step(t, d, 0, "", "approve", b, "--as", "alice")
	step(t, d, 0, "", "apply", b, "--as", "bob")
	step(t, d, 4, "plan "+b+" published sessions 2026-10-21 after this plan did", "rollback", a, "--as", "carol")

	// A proof of the export job writes in a scratch directory, not over the
	// real export files.
	export := filepath.Join(d, "exports", "partner-2026-11-22.csv")
	before, err := os.ReadFile(export)
	if err != nil || len(before) == 0 {
		t.Fatalf("the demo's export of 2026-11-22: %q, %v", before, err)
	}
	step(t, d, 0, "all four builds agree", "prove", "partner_feed", "--partition", "2026-11-22", "--as", "alice")
	if after, _ := os.ReadFile(export); string(after) != string(before) {
		t.Errorf("a proof rewrote the real export: %q -> %q", before, after)
	}

	// A run whose published rows stray from the plan's expectation exits 5,
	// like its report.
	wh, err := sql.Open("sqlite", "file:"+filepath.Join(d, "warehouse.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	strays := id(step(t, d, 0, "", "plan", "sessions", "--from", "2026-10-25", "--to", "2026-10-27", "--reason", "late users", "--as", "alice", "-o", "json"))
	if _, err := wh.Exec(`INSERT INTO events_raw (event_date, event_time, ingested_at, user_id, event_type, amount)
		SELECT event_date, event_time, ingested_at, user_id + 400, event_type, amount FROM events_raw WHERE event_date = '2026-10-26' LIMIT 40`); err != nil {
		t.Fatal(err)
	}
	step(t, d, 5, "differ from the plan's expectation by more than 10%", "apply", strays, "--as", "alice")
	step(t, d, 5, "! +", "report", strays)

	// Nothing is recorded on top of a tampered audit log. The check before
	// each write starts from the last verified checkpoint (its cost must
	// not grow with the log), so it sees the newest entries; audit verify
	// walks them all.
	var head int
	var actor string
	if err := state.QueryRow(`SELECT seq, actor FROM audit_log ORDER BY seq DESC LIMIT 1`).Scan(&head, &actor); err != nil {
		t.Fatal(err)
	}
	if _, err := state.Exec(`UPDATE audit_log SET actor = 'mallory' WHERE seq = ?`, head); err != nil {
		t.Fatal(err)
	}
	step(t, d, 4, "refusing to change anything", "plan", "sessions", "--from", "2026-10-01", "--to", "2026-10-02", "--reason", "x", "--as", "alice")
	step(t, d, 5, "audit log entry "+itoa(head), "audit", "verify")
	if _, err := state.Exec(`UPDATE audit_log SET actor = ? WHERE seq = ?`, actor, head); err != nil {
		t.Fatal(err)
	}
	if _, err := state.Exec(`UPDATE audit_log SET actor = 'mallory' WHERE seq = 3`); err != nil {
		t.Fatal(err)
	}
	step(t, d, 5, "audit log entry 3", "audit", "verify")
}
