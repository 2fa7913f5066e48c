package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
)

func checkFindings(t *testing.T, d string, code int, day string) []refill.Finding {
	t.Helper()
	r := run(t, d, nil, "check", "events_raw", "--from", day, "--to", day, "-o", "json")
	if r.code != code {
		t.Fatalf("check %s: exit %d, want %d\n%s%s", day, r.code, code, r.stdout, r.stderr)
	}
	var v struct {
		Findings []refill.Finding `json:"findings"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("check -o json: %v\n%s", err, r.stdout)
	}
	return v.Findings
}

func findingOf(fs []refill.Finding, check, column string) *refill.Finding {
	for i, f := range fs {
		if f.Check == check && f.Column == column {
			return &fs[i]
		}
	}
	return nil
}

// TestAcceptARealAnomaly: half of a Wednesday's events really did not
// happen (shops closed early). The gate fails it on volume and on the
// distinct users drift sees; each finding is accepted, with a name and a
// reason, and passes while the partition measures what it measured, in
// check, plan and history output; one more row makes both lapse.
func TestAcceptARealAnomaly(t *testing.T) {
	t.Parallel()
	d := setup(t)
	const day = "2026-11-25"
	warehouseExec(t, d, `DELETE FROM events_raw WHERE event_date = '`+day+`' AND event_id % 2 = 0`)
	rows := warehouseCount(t, d, `SELECT count(*) FROM events_raw WHERE event_date = '`+day+`'`)
	users := warehouseCount(t, d, `SELECT count(DISTINCT user_id) FROM events_raw WHERE event_date = '`+day+`'`)
	fs := checkFindings(t, d, 3, day)
	if f := findingOf(fs, "volume", ""); f == nil || f.Passed {
		t.Fatalf("halving %s did not fail volume: %+v", day, fs)
	}
	if f := findingOf(fs, "drift", "user_id"); f == nil || f.Passed {
		t.Fatalf("halving %s did not fail drift on user_id: %+v", day, fs)
	}

	accept := func(code int, want string, args ...string) result {
		t.Helper()
		return step(t, d, code, want, append([]string{"accept", "events_raw", "--partition", day}, args...)...)
	}
	const why = "Thanksgiving eve: shops closed at noon (INC-311)"
	accept(4, "needs an identity", "--check", "volume", "--reason", why)
	accept(2, "a reason is required (--reason)", "--check", "volume", "--as", "alice")
	accept(4, `unknown user "mallory"`, "--check", "volume", "--reason", why, "--as", "mallory")
	accept(2, "not_null on user_id passes", "--check", "not_null", "--column", "user_id", "--reason", why, "--as", "alice")
	accept(2, "--column is required for drift", "--check", "drift", "--reason", why, "--as", "alice")
	accept(2, `for column user_id, not "amount"`, "--check", "drift", "--column", "amount", "--reason", why, "--as", "alice")
	accept(2, "unknown check", "--check", "volumes", "--reason", why, "--as", "alice")
	accept(2, "refill schema accept", "--check", "schema_drift", "--reason", why, "--as", "alice")
	accept(2, "not a valid day partition", "--check", "volume", "--reason", why, "--as", "alice", "--partition", "2026-11-25T10")
	accept(2, "without control characters", "--check", "volume", "--reason", "fine\n  x events_raw 2026-11-25 volume: FAKE", "--as", "alice")
	accept(2, "at most 1000 characters", "--check", "volume", "--reason", strings.Repeat("x", 1001), "--as", "alice")
	step(t, d, 2, "has not begun", "accept", "events_raw", "--partition", "2026-12-15", "--check", "volume", "--reason", why, "--as", "alice")

	var acc struct {
		Check    string `json:"check"`
		By       string `json:"by"`
		Reason   string `json:"reason"`
		Measured string `json:"measured"`
	}
	// Six people at once: one acceptance, one audit entry.
	results := make(chan result, 6)
	for range 6 {
		go func() {
			results <- run(t, d, nil, "accept", "events_raw", "--partition", day, "--check", "volume", "--reason", why, "--as", "bob")
		}()
	}
	won := 0
	for range 6 {
		if r := <-results; r.code == 0 {
			won++
		} else if r.code != 2 || !strings.Contains(r.stderr, "already accepted") {
			t.Errorf("a concurrent accept: exit %d %s", r.code, r.stderr)
		}
	}
	if won != 1 {
		t.Fatalf("%d of 6 concurrent accepts were recorded, want 1", won)
	}
	// bob withdraws his; alice accepts it in her own name.
	accept(0, "", "--check", "volume", "--revoke", "--reason", "alice will own this one", "--as", "bob")
	r := accept(0, "", "--check", "volume", "--reason", why, "--as", "alice", "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &acc); err != nil || acc.By != "alice" || acc.Reason != why || acc.Measured != fmt.Sprintf("rows=%d", rows) {
		t.Fatalf("accept -o json: %v %+v\n%s", err, acc, r.stdout)
	}
	accept(2, "already accepted, by alice", "--check", "volume", "--reason", why, "--as", "bob")

	// Volume passes, accepted; drift on user_id still fails: accepting
	// one check passes no other.
	fs = checkFindings(t, d, 3, day)
	v := findingOf(fs, "volume", "")
	if v == nil || !v.Passed || v.Accepted == nil || v.Accepted.By != "alice" || v.Accepted.Reason != why || v.Accepted.At.IsZero() {
		t.Fatalf("accepted volume finding: %+v", v)
	}
	if f := findingOf(fs, "drift", "user_id"); f == nil || f.Passed || f.Accepted != nil {
		t.Fatalf("accepting volume passed drift too: %+v", f)
	}
	accept(0, "Accepted drift on user_id", "--check", "drift", "--column", "user_id", "--reason", "the same closures", "--as", "bob")
	checkFindings(t, d, 0, day)

	// A plan over the partition passes the gate and shows both.
	p := decode[planJSON](t, step(t, d, 0, "", "plan", "sessions", "--from", day, "--to", day, "--reason", "rebuild after the closures", "--as", "alice", "-o", "json").stdout)
	var accepted []string
	for _, raw := range p.Gate.Findings {
		var f refill.Finding
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatal(err)
		}
		if f.Accepted != nil && f.Passed {
			accepted = append(accepted, f.Check+" by "+f.Accepted.By)
		}
	}
	if !p.Gate.Passed || strings.Join(accepted, ", ") != "volume by alice, drift by bob" {
		t.Fatalf("plan over the accepted partition: passed %v, accepted %v: %s", p.Gate.Passed, accepted, p.Gate.Findings)
	}
	// A person's word passes the gate but never makes a plan auto.
	if p.Tier == "auto" || !strings.Contains(strings.Join(p.Reasons, "\n"), "pass only because a person accepted them as real data") {
		t.Errorf("plan over accepted findings: tier %s, reasons %q", p.Tier, p.Reasons)
	}
	text := step(t, d, 0, "accepted as real by bob", "show", p.ID).stdout
	if !strings.Contains(text, "= events_raw 2026-11-25 volume: accepted as real by alice") {
		t.Errorf("show does not mark the accepted finding:\n%s", text)
	}

	// History, in text and JSON, and the audit log.
	step(t, d, 0, "drift on user_id accepted by bob: the same closures", "history", "events_raw", "--partition", day)
	var hist struct {
		Acceptances []struct {
			Check, Column, By, Reason, Measured string
		} `json:"acceptances"`
	}
	if err := json.Unmarshal([]byte(step(t, d, 0, "", "history", "events_raw", "--partition", day, "-o", "json").stdout), &hist); err != nil {
		t.Fatal(err)
	}
	if len(hist.Acceptances) != 3 || hist.Acceptances[0].By != "bob" || hist.Acceptances[1].By != "alice" || hist.Acceptances[2].Column != "user_id" || !strings.Contains(hist.Acceptances[2].Measured, fmt.Sprintf("distinct=%d ", users)) {
		t.Fatalf("history acceptances: %+v", hist.Acceptances)
	}
	state, err := sql.Open("sqlite", filepath.Join(d, ".refill", "state.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()
	var n int
	if err := state.QueryRow(`SELECT count(*) FROM audit_log WHERE event = 'finding_accepted' AND dataset = 'events_raw' AND partition = ? AND detail LIKE '%INC-311%'`, day).Scan(&n); err != nil || n != 2 {
		t.Errorf("finding_accepted audit entries with the reason: %d %v", n, err)
	}
	step(t, d, 0, "intact", "audit", "verify")

	// One more row: the partition is not what was accepted any more.
	warehouseExec(t, d, `INSERT INTO events_raw (event_date, event_time, ingested_at, user_id, event_type, amount)
		SELECT event_date, event_time, ingested_at, user_id, event_type, amount FROM events_raw WHERE event_date = '`+day+`' LIMIT 1`)
	fs = checkFindings(t, d, 3, day)
	for _, k := range [][2]string{{"volume", ""}, {"drift", "user_id"}} {
		f := findingOf(fs, k[0], k[1])
		if f == nil || f.Passed || f.Accepted != nil || f.Lapsed == nil || !strings.Contains(f.Message, "the acceptance has lapsed") {
			t.Errorf("%s after the partition changed: %+v", k, f)
		}
	}
	if v := findingOf(fs, "volume", ""); v != nil && !strings.Contains(v.Message, fmt.Sprintf("then rows=%d, now rows=%d", rows, rows+1)) {
		t.Errorf("the lapse does not say what changed: %s", v.Message)
	}

	// A dataset tagged external needs a lead to accept (the default
	// accept_lead_tags are the manual tags).
	editConfig(t, d, "    partition: {column: event_date, grain: day}\n", "    partition: {column: event_date, grain: day}\n    tags: [external]\n")
	accept(4, "only a lead may accept", "--check", "volume", "--reason", why, "--as", "alice")
	accept(0, "by carol", "--check", "volume", "--reason", why+"; recounted", "--as", "carol")
	// With the extra row gone, the partition measures again what bob
	// accepted drift at; but bob's acceptance, made before the tag, is not
	// a lead's: it no longer counts.
	warehouseExec(t, d, `DELETE FROM events_raw WHERE event_id = (SELECT max(event_id) FROM events_raw WHERE event_date = '`+day+`')`)
	fs = checkFindings(t, d, 3, day)
	if f := findingOf(fs, "drift", "user_id"); f == nil || f.Passed || f.Lapsed == nil || f.Lapsed.By != "bob" || !strings.Contains(f.Message, "only a lead's acceptance counts") {
		t.Errorf("a non-lead's acceptance on a dataset tagged since: %+v", f)
	}
}

// TestCalendarIsSealedAndNeverAuto: on a calendar day a volume failure is
// a warning, which lets a plan through the gate but never as auto; the
// calendar is part of what a plan seals, so changing it makes a live plan
// stale.
func TestCalendarIsSealedAndNeverAuto(t *testing.T) {
	t.Parallel()
	d := setup(t)
	const day = "2026-11-25"
	warehouseExec(t, d, `DELETE FROM events_raw WHERE event_date = '`+day+`' AND event_id % 2 = 0`)
	step(t, d, 0, "", "accept", "events_raw", "--partition", day, "--check", "drift", "--column", "user_id", "--reason", "closures", "--as", "alice")
	plan := func(code int) planJSON {
		t.Helper()
		return decode[planJSON](t, step(t, d, code, "", "plan", "sessions", "--from", day, "--to", day, "--reason", "closures", "--as", "alice", "-o", "json").stdout)
	}
	if p := plan(3); p.Status != "blocked" {
		t.Fatalf("halved day without a calendar: %s", p.Status)
	}
	editConfig(t, d, "volume: {lookback: 28, max_z: 3}", `volume: {lookback: 28, max_z: 3, calendar: ["11-25", "2026-12-31"]}`)
	p := plan(0)
	var warned bool
	for _, raw := range p.Gate.Findings {
		var f refill.Finding
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatal(err)
		}
		warned = warned || (f.Check == "volume" && f.Warning && f.Passed && strings.Contains(f.Message, "on the calendar (11-25)"))
	}
	if !warned || !p.Gate.Passed || p.Tier == "auto" {
		t.Fatalf("calendar day: gate passed %v, warned %v, tier %s: %s", p.Gate.Passed, warned, p.Tier, p.Gate.Findings)
	}
	restore := editConfig(t, d, `calendar: ["11-25", "2026-12-31"]`, `calendar: ["11-25"]`)
	step(t, d, 4, "the checks of input events_raw changed", "approve", p.ID, "--as", "bob")
	restore()
	// A day partition is a calendar date: a timezone changes nothing about
	// it, so it is not sealed (at hour grain it is: control's TestStale).
	editConfig(t, d, "partition: {column: event_date, grain: day}", "partition: {column: event_date, grain: day, timezone: Asia/Seoul}")
	if out := step(t, d, 0, "", "show", p.ID).stdout; strings.Contains(out, "stale") || strings.Contains(out, "timezone") {
		t.Errorf("a timezone at day grain made the plan stale:\n%s", out)
	}
}

// TestRevokeAnAcceptance: a mistaken acceptance is withdrawn by its author
// or a lead, with a reason; the finding fails again, history says who
// withdrew it, and the finding can be accepted afresh.
func TestRevokeAnAcceptance(t *testing.T) {
	t.Parallel()
	d := setup(t)
	const day = "2026-11-25"
	warehouseExec(t, d, `DELETE FROM events_raw WHERE event_date = '`+day+`' AND event_id % 2 = 0`)
	revoke := func(code int, want string, args ...string) result {
		t.Helper()
		return step(t, d, code, want, append([]string{"accept", "events_raw", "--partition", day, "--check", "volume", "--revoke"}, args...)...)
	}
	revoke(2, "", "--reason", "nothing yet", "--as", "alice") // nothing in force: not found
	step(t, d, 0, "", "accept", "events_raw", "--partition", day, "--check", "volume", "--reason", "a half day", "--as", "alice")
	if v := findingOf(checkFindings(t, d, 3, day), "volume", ""); v == nil || v.Accepted == nil {
		t.Fatalf("accepted volume: %+v", v)
	}
	revoke(4, "only whoever accepted it (alice) or a lead", "--reason", "not a half day at all", "--as", "bob")
	revoke(2, "a reason is required", "--as", "alice")
	revoke(0, "Withdrew alice's acceptance of volume", "--reason", "it was not a holiday: the upstream lost half the files (INC-312)", "--as", "carol")
	if v := findingOf(checkFindings(t, d, 3, day), "volume", ""); v == nil || v.Passed || v.Accepted != nil {
		t.Fatalf("volume after the acceptance was withdrawn: %+v", v)
	}
	step(t, d, 0, "withdrawn  ", "history", "events_raw", "--partition", day)
	var hist struct {
		Acceptances []struct {
			By      string `json:"by"`
			Revoked *struct {
				By, Reason string
			} `json:"revoked"`
		} `json:"acceptances"`
	}
	if err := json.Unmarshal([]byte(step(t, d, 0, "", "history", "events_raw", "--partition", day, "-o", "json").stdout), &hist); err != nil {
		t.Fatal(err)
	}
	if len(hist.Acceptances) != 1 || hist.Acceptances[0].Revoked == nil || hist.Acceptances[0].Revoked.By != "carol" || !strings.Contains(hist.Acceptances[0].Revoked.Reason, "INC-312") {
		t.Fatalf("history after the withdrawal: %+v", hist.Acceptances)
	}
	step(t, d, 0, "Accepted volume", "accept", "events_raw", "--partition", day, "--check", "volume", "--reason", "recounted: it was a half day after all", "--as", "bob")
	checkFindings(t, d, 3, day) // drift on user_id still fails
	step(t, d, 0, "intact", "audit", "verify")
}
