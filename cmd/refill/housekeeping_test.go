package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPlansExpireAndReleaseTheirPartitions: a plan left pending past
// policy.plan_ttl expires — show and history say so — and no longer holds
// its partitions against a newer plan. The TTL runs on the real clock:
// REFILL_NOW, which anyone may set, neither expires other people's plans
// nor keeps an expired one alive.
func TestPlansExpireAndReleaseTheirPartitions(t *testing.T) {
	t.Parallel()
	d := setup(t)
	const ttl = 6 * time.Second
	restore := editConfig(t, d, "policy:\n", "policy:\n  plan_ttl: 6s\n")
	defer restore()
	start := time.Now()
	old := decode[planJSON](t, step(t, d, 0, "", "plan", "sessions", "--from", "2026-10-05", "--to", "2026-10-09", "--reason", "left waiting", "--as", "alice", "-o", "json").stdout).ID
	newer := decode[planJSON](t, step(t, d, 0, "", "plan", "sessions", "--from", "2026-10-08", "--to", "2026-10-08", "--reason", "overlaps", "--as", "alice", "-o", "json").stdout).ID
	made := time.Now() // both plans exist: each expires plan_ttl after it was made
	step(t, d, 0, "holds 1 partition(s) of sessions", "show", newer)

	// A clock moved a year on expires nothing (judged only while the real
	// clock is still inside plan_ttl: a loaded machine may take longer).
	if r := run(t, d, []string{"REFILL_NOW=2027-12-01T00:00:00Z"}, "show", old); strings.Contains(r.stdout, "expired") && time.Since(start) < ttl {
		t.Fatalf("REFILL_NOW expired a plan:\n%s", r.stdout)
	}
	time.Sleep(time.Until(made.Add(ttl + 500*time.Millisecond))) // both past plan_ttl on the real clock

	r := run(t, d, nil, "show", old)
	if r.code != 0 || !strings.Contains(r.stdout, "the plan expired") {
		t.Fatalf("show of a plan past plan_ttl: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Reads tell the truth before any sweep has written it down.
	if got := ids(step(t, d, 0, "", "plans", "--status", "expired", "-o", "json").stdout); !slices.Contains(got, old) || !slices.Contains(got, newer) {
		t.Errorf("plans --status expired before a sweep lists %v, want %s and %s among them", got, old, newer)
	}
	if got := ids(step(t, d, 0, "", "plans", "--status", "pending", "-o", "json").stdout); slices.Contains(got, old) || slices.Contains(got, newer) {
		t.Errorf("plans --status pending still lists plans past plan_ttl: %v", got)
	}
	if r := run(t, d, nil, "history", "sessions", "--partition", "2026-10-06", "-o", "json"); !strings.Contains(r.stdout, `"status": "expired"`) {
		t.Errorf("history before a sweep does not read the plan as expired:\n%s", r.stdout)
	}
	// Moving the clock back does not revive it.
	r = run(t, d, []string{"REFILL_NOW=2026-10-01T00:00:00Z"}, "approve", old, "--as", "bob")
	if r.code != 4 || !strings.Contains(r.stderr, "expired") {
		t.Fatalf("approving an expired plan: exit %d\n%s", r.code, r.stderr)
	}
	// That write swept it: expired for good, in the log, and the newer
	// plan (also past the TTL now) no longer held by it.
	var who string
	if err := openState(t, d).QueryRow(`SELECT actor FROM audit_log WHERE event = 'expired' AND plan_id = ?`, old).Scan(&who); err != nil || who != "refill" {
		t.Errorf("no audit entry for the expiry (%q, %v)", who, err)
	}
	if r := run(t, d, nil, "show", newer); strings.Contains(r.stdout, "holds") {
		t.Errorf("an expired plan still holds partitions:\n%s", r.stdout)
	}
	if r := run(t, d, nil, "history", "sessions", "--partition", "2026-10-06"); !strings.Contains(r.stdout, "expired") {
		t.Errorf("history does not show the expiry:\n%s", r.stdout)
	}
	if got := ids(step(t, d, 0, "", "plans", "--status", "expired", "-o", "json").stdout); !slices.Contains(got, old) || !slices.Contains(got, newer) {
		t.Errorf("plans --status expired after the sweep lists %v, want %s and %s among them", got, old, newer)
	}
}

// TestSnapshotsAreDroppedWhenTheirPlanIsDone: a rejected plan's snapshot
// tables go once policy.snapshot_ttl has passed (by the real clock);
// `refill snapshot drop` drops a done plan's at once, audited, and refuses
// a plan that may still run or still be rolled back.
func TestSnapshotsAreDroppedWhenTheirPlanIsDone(t *testing.T) {
	t.Parallel()
	d := setup(t)
	restore := editConfig(t, d, "policy:\n", "policy:\n  snapshot_ttl: 3s\n")
	defer restore()
	plan := func(from, to string) string {
		return decode[planJSON](t, step(t, d, 0, "", "plan", "events_raw", "--from", from, "--to", to, "--reason", "r", "--as", "alice", "-o", "json").stdout).ID
	}
	tables := func(id string) int {
		return warehouseCount(t, d, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name LIKE 'refill_snap_`+id+`%'`)
	}
	a, b, c, e := plan("2026-10-04", "2026-10-05"), plan("2026-10-12", "2026-10-13"), plan("2026-10-20", "2026-10-20"), plan("2026-10-30", "2026-10-30")
	for _, id := range []string{a, b, c, e} {
		step(t, d, 0, "", "snapshot", id, "--as", "alice")
		if tables(id) == 0 {
			t.Fatalf("the snapshot of %s made no tables", id)
		}
	}
	step(t, d, 4, "drop it once the plan is done", "snapshot", "drop", b, "--reason", "early", "--as", "carol")
	step(t, d, 2, "--reason is required", "snapshot", "drop", b, "--as", "carol")
	// An applied plan not yet signed off may still be rolled back: its
	// snapshot stays.
	step(t, d, 0, "", "scope", c, "--as", "alice", "--note", "one day")
	step(t, d, 0, "", "approve", c, "--as", "carol")
	step(t, d, 0, "", "apply", c, "--as", "alice")
	step(t, d, 4, "not signed off", "snapshot", "drop", c, "--reason", "space", "--as", "alice")

	// A cancelled plan that never ran is done too; the plans list finds it
	// by its status.
	firstDone := time.Now() // snapshot_ttl runs from when a plan is done
	step(t, d, 0, "", "cancel", e, "--reason", "wrong range", "--as", "alice")
	if got := decode[[]planJSON](t, step(t, d, 0, "", "plans", "--status", "cancelled", "-o", "json").stdout); len(got) != 1 || got[0].ID != e {
		t.Errorf("plans --status cancelled: %+v, want only %s", got, e)
	}
	step(t, d, 0, "", "reject", a, "--as", "carol", "--note", "not now")
	step(t, d, 0, "", "reject", b, "--as", "carol", "--note", "not now")
	lastDone := time.Now()
	step(t, d, 0, "dropped", "snapshot", "drop", b, "--reason", "done with it", "--as", "carol")
	if tables(b) != 0 {
		t.Errorf("snapshot drop left %d table(s) of %s", tables(b), b)
	}
	// A clock moved on drops nothing early.
	// (judged only while the real clock is still inside snapshot_ttl: a
	// loaded machine may take longer to get here).
	early := run(t, d, []string{"REFILL_NOW=2027-12-01T00:00:00Z"}, "plan", "sessions", "--from", "2026-10-25", "--to", "2026-10-25", "--reason", "r", "--as", "alice")
	if tables(a) == 0 && time.Since(firstDone) < 3*time.Second {
		t.Fatal("REFILL_NOW dropped a snapshot before snapshot_ttl passed")
	}
	time.Sleep(time.Until(lastDone.Add(3500 * time.Millisecond))) // every done plan past snapshot_ttl on the real clock
	r := run(t, d, nil, "plan", "sessions", "--from", "2026-10-26", "--to", "2026-10-26", "--reason", "r", "--as", "alice")
	// On a loaded machine the real ttl may have passed by the first write
	// already, which then swept (rightly): one of the two says so.
	if r.code != 0 || !strings.Contains(early.stderr+r.stderr, "snapshot tables dropped") {
		t.Fatalf("a write after snapshot_ttl: exit %d\n%s", r.code, r.stderr)
	}
	for _, id := range []string{a, e} {
		if tables(id) != 0 {
			t.Errorf("the sweep left %d table(s) of %s", tables(id), id)
		}
	}
	if tables(c) == 0 {
		t.Error("the sweep dropped the snapshot of an applied plan that was never signed off")
	}
	step(t, d, 0, "intact", "audit", "verify")
}

// ids returns the plan IDs of `refill plans -o json`.
func ids(out string) []string {
	var list []planJSON
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return []string{"unreadable: " + err.Error()}
	}
	got := make([]string, len(list))
	for i, p := range list {
		got[i] = p.ID
	}
	return got
}
