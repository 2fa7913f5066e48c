package main

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checklistOut is show -o json with the checklist steps that count.
type checklistOut struct {
	stateOut
	Checklist []struct {
		Step  string `json:"step"`
		Actor string `json:"actor"`
		Note  string `json:"note"`
	} `json:"checklist"`
}

// TestForgedChecklistRowsCountForNothing: a snapshot, scope or signoff row
// written into the checklist table with no audit entry completes nothing —
// show still lists the step, approve and apply refuse — and does not stop
// the step from being done for real.
func TestForgedChecklistRowsCountForNothing(t *testing.T) {
	t.Parallel()
	d, _, plans := demoPlans(t)
	manual := plans[2]
	forge := func(step, actor string) {
		t.Helper()
		if _, err := openState(t, d).Exec(`INSERT INTO checklist (plan_id, step, actor, note, detail, at) VALUES (?, ?, ?, 'forged', '{}', '2026-11-30T12:00:00.000000000Z')`, manual, step, actor); err != nil {
			t.Fatal(err)
		}
	}
	forge("snapshot", "alice")
	forge("scope", "alice")
	s := decode[checklistOut](t, step(t, d, 0, "", "show", manual, "-o", "json").stdout)
	unmet := strings.Join(s.Unmet, "\n")
	if len(s.Checklist) != 0 || !strings.Contains(unmet, "checklist 1/5: snapshot") || !strings.Contains(unmet, "checklist 2/5: state the scope") {
		t.Errorf("after forging the snapshot and scope rows: checklist %+v, unmet %q", s.Checklist, s.Unmet)
	}
	step(t, d, 0, "checklist 1/5: snapshot the partitions it will overwrite", "show", manual)
	step(t, d, 4, "its snapshot step is not done yet", "approve", manual, "--as", "carol")
	step(t, d, 4, "checklist 1/5", "apply", manual, "--as", "alice")
	step(t, d, 4, "snapshot first", "scope", manual, "--as", "alice", "--note", "n")

	// The real steps replace the forged rows.
	step(t, d, 0, "", "snapshot", manual, "--as", "alice")
	step(t, d, 0, "", "scope", manual, "--as", "alice", "--note", "the 72 hours of INC-4711")
	step(t, d, 0, "", "approve", manual, "--as", "carol")
	step(t, d, 0, "", "apply", manual, "--as", "alice")

	// A forged sign-off signs off nothing; the lead's own still can.
	forge("signoff", "carol")
	s = decode[checklistOut](t, step(t, d, 0, "", "show", manual, "-o", "json").stdout)
	for _, st := range s.Checklist {
		if st.Step == "signoff" {
			t.Errorf("a forged sign-off row counts: %+v", s.Checklist)
		}
	}
	step(t, d, 0, "", "signoff", manual, "--as", "carol", "--note", "matches the report")
	s = decode[checklistOut](t, step(t, d, 0, "", "show", manual, "-o", "json").stdout)
	var notes []string
	for _, st := range s.Checklist {
		notes = append(notes, st.Step+":"+st.Actor+":"+st.Note)
	}
	if got := strings.Join(notes, " "); got != "snapshot:alice: scope:alice:the 72 hours of INC-4711 signoff:carol:matches the report" {
		t.Errorf("checklist after the real steps: %s", got)
	}
	step(t, d, 4, "signed off already", "signoff", manual, "--as", "carol")
	step(t, d, 0, "intact", "audit", "verify")
}

// TestApplyOverSchemaDriftIsRefused: a source whose schema changed after
// the plan was approved blocks the apply, which names the drift. The
// re-check judges by the schema the plan itself saw: accepting the new
// schema for later plans does not wave through one approved on the old.
func TestApplyOverSchemaDriftIsRefused(t *testing.T) {
	t.Parallel()
	d, _, plans := demoPlans(t)
	semi := plans[1] // sessions, read from events_raw
	step(t, d, 0, "", "approve", semi, "--as", "bob")
	warehouseExec(t, d, `ALTER TABLE events_raw ADD COLUMN coupon TEXT`)
	step(t, d, 0, "", "schema", "accept", "events_raw", "--reason", "coupon codes are new upstream (CHG-12)", "--as", "alice")
	r := step(t, d, 3, "events_raw.coupon schema_drift: column coupon (text) was added since the schema this plan saw when it was made", "apply", semi, "--as", "alice")
	if !strings.Contains(r.stderr, "nothing was written") || !strings.Contains(r.stderr, "this plan cannot run over it") || !strings.Contains(r.stderr, "and plan again") {
		t.Errorf("apply over a drifted source:\n%s", r.stderr)
	}
	if n := countPublished(t, d, semi); n != 0 {
		t.Errorf("%d partitions published over a drifted source", n)
	}
	// show says the gate failed at apply, with the finding, rather than
	// the plan-time "passed" alone and "0 findings".
	r = step(t, d, 0, "status blocked", "show", semi)
	for _, want := range []string{"When the run began, the source gate was checked again and failed", "x events_raw.coupon", "failed when the run began (1 finding(s))"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("show of a plan blocked at apply does not say %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "(0 finding(s))") {
		t.Errorf("show counts no findings for a plan blocked at apply:\n%s", r.stdout)
	}
	g := decode[struct {
		ApplyGate *struct {
			Passed   bool `json:"passed"`
			Findings []struct {
				Column string `json:"column"`
			} `json:"findings"`
		} `json:"apply_gate"`
	}](t, step(t, d, 0, "", "show", semi, "-o", "json").stdout)
	if g.ApplyGate == nil || g.ApplyGate.Passed || len(g.ApplyGate.Findings) == 0 {
		t.Errorf("show -o json apply_gate: %+v", g.ApplyGate)
	}
	step(t, d, 3, "blocked", "apply", semi, "--as", "alice")
}

// TestSideEffectsJobIsNeverRerunOrAuto: a job declared side_effects (an
// export, an upload) is never proven by running it three times — prove
// refuses without running it — and a plan over it is never auto, for that
// reason rather than for want of a proof.
func TestSideEffectsJobIsNeverRerunOrAuto(t *testing.T) {
	t.Parallel()
	dir := smallProject(t, `version: 1
warehouse: sqlite:wh.db
proof_warehouse: sqlite:proof.db
datasets:
  raw: {table: raw, partition: {column: day}}
  export:
    table: exported
    partition: {column: day}
    upstream: [raw]
    job:
      command: ["sh", "-c", "echo {{partition}} >> uploads.txt"]
      side_effects: true
`, "CREATE TABLE raw (day TEXT, v INTEGER)", "CREATE TABLE exported (day TEXT, v INTEGER)", "INSERT INTO raw VALUES ('2026-11-01', 1)")
	// A proof warehouse to run it in, were it run.
	proofDB, err := sql.Open("sqlite", filepath.Join(dir, "proof.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer proofDB.Close()
	for _, q := range []string{"CREATE TABLE raw (day TEXT, v INTEGER)", "CREATE TABLE exported (day TEXT, v INTEGER)"} {
		if _, err := proofDB.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	step(t, dir, 2, "export declares side_effects: it writes outside the warehouse, so refill never proves it by running it three times", "prove", "export", "--partition", "2026-11-01", "--as", "alice")
	if got := mustReadOr(filepath.Join(dir, "uploads.txt")); got != "" {
		t.Fatalf("prove ran a side-effecting job: uploads.txt holds %q", got)
	}
	p := decode[planJSON](t, step(t, dir, 0, "", "plan", "export", "--from", "2026-11-01", "--to", "2026-11-01", "--reason", "r", "--as", "alice", "-o", "json").stdout)
	reasons := strings.Join(p.Reasons, "; ")
	if p.Tier == "auto" || !strings.Contains(reasons, "export declares side_effects: it writes outside the warehouse, so it is never proven by rerunning and never auto") || strings.Contains(reasons, "no idempotency proof") {
		t.Errorf("a plan over a side-effecting job: tier %s, reasons %q", p.Tier, p.Reasons)
	}
}

// TestClockSetAheadIsNeverAuto: REFILL_NOW set after the real clock
// moves the planning clock but no decision: rows dated after the real
// clock fail no_future, and the plan records both clocks and is not auto.
func TestClockSetAheadIsNeverAuto(t *testing.T) {
	t.Parallel()
	d := setup(t)
	step(t, d, 0, "", "prove", "sessions", "--partition", "2026-11-25", "--as", "alice")
	warehouseExec(t, d, `UPDATE events_raw SET event_time = '2031-06-01T10:00:00Z', ingested_at = '2031-06-01T10:05:00Z' WHERE event_date = '2026-11-28' AND event_id % 2 = 0`)
	ahead := []string{"REFILL_NOW=2032-01-01T00:00:00Z"}
	r := run(t, d, ahead, "plan", "sessions", "--from", "2026-11-28", "--to", "2026-11-28", "--reason", "as of 2032", "--as", "alice", "-o", "json")
	type clockPlan struct {
		planJSON
		Clock *struct {
			Real string `json:"real"`
			AsOf string `json:"as_of"`
		} `json:"clock"`
	}
	p := decode[clockPlan](t, r.stdout)
	if r.code != 3 || p.Status != "blocked" || p.Tier == "auto" || p.Clock == nil || p.Clock.AsOf != "2032-01-01T00:00:00Z" || !strings.HasPrefix(p.Clock.Real, "20") {
		t.Fatalf("plan as of 2032 over rows dated 2031: exit %d, %s %s, clock %+v\n%s", r.code, p.Status, p.Tier, p.Clock, r.stderr)
	}
	if c := run(t, d, ahead, "check", "events_raw", "--from", "2026-11-28", "--to", "2026-11-28"); c.code != 3 || !strings.Contains(c.stdout, "no_future") {
		t.Errorf("check as of 2032: exit %d\n%s", c.code, c.stdout)
	}
	if n := warehouseCount(t, d, `SELECT count(*) FROM sessions WHERE last_seen LIKE '2031%'`); n != 0 {
		t.Errorf("%d sessions rows dated 2031 were published", n)
	}
}

// TestStateRowsCountOnlyWithTheirEntry reproduces two bypasses by someone
// who can write the state store: an acceptance row copied from a real one
// onto another partition silenced not_null there and showed in history as
// the lead's; a deleted freeze row let an auto plan apply. Both count for
// nothing now, and audit verify names them (exit 5).
func TestStateRowsCountOnlyWithTheirEntry(t *testing.T) {
	t.Parallel()
	d := setup(t)
	// Two days whose amounts went missing: not_null fails on both.
	for _, day := range []string{"2026-11-24", "2026-11-25"} {
		warehouseExec(t, d, `UPDATE events_raw SET amount = NULL WHERE event_date = '`+day+`'`)
	}
	step(t, d, 0, "", "accept", "events_raw", "--partition", "2026-11-24", "--check", "not_null", "--column", "amount", "--reason", "the amounts were never sent (INC-9)", "--as", "carol")
	st := openState(t, d)
	if _, err := st.Exec(`INSERT INTO acceptances (dataset, partition, check_name, column_name, measured, accepted_by, reason, accepted_at)
		SELECT dataset, '2026-11-25', check_name, column_name, measured, accepted_by, reason, accepted_at FROM acceptances`); err != nil {
		t.Fatal(err)
	}
	if f := findingOf(checkFindings(t, d, 3, "2026-11-25"), "not_null", "amount"); f == nil || f.Passed || f.Accepted != nil {
		t.Errorf("a copied acceptance row silenced not_null on 2026-11-25: %+v", f)
	}
	if r := step(t, d, 0, "", "history", "events_raw", "--partition", "2026-11-25"); strings.Contains(r.stdout, "INC-9") {
		t.Errorf("history shows an acceptance nobody made:\n%s", r.stdout)
	}
	r := step(t, d, 5, "acceptances row", "audit", "verify")
	if !strings.Contains(r.stderr, "the acceptance of events_raw 2026-11-25 not_null by carol has no audit entry") {
		t.Errorf("audit verify does not name the forged acceptance:\n%s", r.stderr)
	}
	if _, err := st.Exec(`DELETE FROM acceptances WHERE partition = '2026-11-25'`); err != nil {
		t.Fatal(err)
	}
	step(t, d, 0, "audit log intact", "audit", "verify")

	auto := decode[planJSON](t, step(t, d, 0, "", "plan", "sessions", "--from", "2026-11-20", "--to", "2026-11-21", "--reason", "late events", "--as", "alice", "-o", "json").stdout)
	if auto.Tier != "auto" {
		t.Fatalf("plan tier %s, want auto: %v", auto.Tier, auto.Reasons)
	}
	step(t, d, 0, "FROZEN by carol", "freeze", "--reason", "quarter close", "--as", "carol")
	if _, err := st.Exec(`DELETE FROM freezes`); err != nil {
		t.Fatal(err)
	}
	step(t, d, 4, "refill is frozen by carol", "apply", auto.ID, "--as", "alice")
	if n := countRows(t, d, "SELECT count(*) FROM refill_published WHERE plan_id = ?", auto.ID); n != 0 {
		t.Fatalf("%d partitions published while frozen", n)
	}
	step(t, d, 5, "(freeze by carol) is in force, but its row is gone", "audit", "verify")
	step(t, d, 0, "unfrozen", "unfreeze", "--reason", "closed", "--as", "carol")
	step(t, d, 0, "audit log intact", "audit", "verify")
}

// TestCommandPublishesAnchorTheLog reproduces an older copy of the state
// store put back on a project of command jobs, which passed audit verify:
// only the transactional publish wrote the audit anchor into the
// warehouse. Every publish writes it now.
func TestCommandPublishesAnchorTheLog(t *testing.T) {
	t.Parallel()
	dir := smallProject(t, `version: 1
warehouse: sqlite:wh.db
users:
  alice: {roles: [engineer]}
  bob: {roles: [engineer]}
datasets:
  feed:
    job:
      command: ["sh", "-c", "echo exported {{partition}}"]
`)
	applied := func(day string) {
		t.Helper()
		id := decode[planJSON](t, step(t, dir, 0, "", "plan", "feed", "--from", day, "--to", day, "--reason", "resend", "--as", "alice", "-o", "json").stdout).ID
		step(t, dir, 0, "", "approve", id, "--as", "bob")
		step(t, dir, 0, "", "apply", id, "--as", "alice")
	}
	applied("2026-11-01")
	step(t, dir, 0, "matches the warehouse's anchor at entry", "audit", "verify")
	state := filepath.Join(dir, ".refill", "state.db")
	old, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	applied("2026-11-02")
	// Put the older copy back (its WAL was checkpointed by the last close).
	for _, f := range []string{state + "-wal", state + "-shm"} {
		os.Remove(f)
	}
	if err := os.WriteFile(state, old, 0o600); err != nil {
		t.Fatal(err)
	}
	step(t, dir, 5, "the anchor outside the state store says the log held entry", "audit", "verify")
	// Nothing is written over it, so it cannot grow past the anchor
	// and be laundered.
	step(t, dir, 4, "the state store is older than the warehouse", "plan", "feed", "--from", "2026-11-03", "--to", "2026-11-03", "--reason", "resend", "--as", "alice")
}
