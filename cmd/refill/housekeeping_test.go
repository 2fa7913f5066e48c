package main

import (
	"strings"
	"testing"
)

// TestPlansExpireAndReleaseTheirPartitions: a plan left pending past
// policy.plan_ttl expires — show and history say so — and no longer holds
// its partitions against a newer plan.
func TestPlansExpireAndReleaseTheirPartitions(t *testing.T) {
	d := setup(t)
	later := []string{"REFILL_NOW=2026-12-09T12:00:00Z"} // eight days on
	old := decode[planJSON](t, step(t, d, 0, "", "plan", "sessions", "--from", "2026-10-05", "--to", "2026-10-09", "--reason", "left waiting", "--as", "alice", "-o", "json").stdout).ID
	newer := decode[planJSON](t, step(t, d, 0, "", "plan", "sessions", "--from", "2026-10-08", "--to", "2026-10-08", "--reason", "overlaps", "--as", "alice", "-o", "json").stdout).ID
	step(t, d, 0, "holds 1 partition(s) of sessions", "show", newer)

	r := run(t, d, later, "show", old)
	if r.code != 0 || !strings.Contains(r.stdout, "the plan expired") {
		t.Fatalf("show of a plan past plan_ttl: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = run(t, d, later, "approve", old, "--as", "bob")
	if r.code != 4 || !strings.Contains(r.stderr, "expired") {
		t.Fatalf("approving an expired plan: exit %d\n%s", r.code, r.stderr)
	}
	// That write swept it: expired for good, in the log, and the newer
	// plan is no longer held.
	if r := run(t, d, later, "show", newer); strings.Contains(r.stdout, "holds") {
		t.Errorf("an expired plan still holds partitions:\n%s", r.stdout)
	}
	var who string
	if err := openState(t, d).QueryRow(`SELECT actor FROM audit_log WHERE event = 'expired' AND plan_id = ?`, old).Scan(&who); err != nil || who != "refill" {
		t.Errorf("no audit entry for the expiry (%q, %v)", who, err)
	}
	if r := run(t, d, later, "history", "sessions", "--partition", "2026-10-06"); !strings.Contains(r.stdout, "expired") {
		t.Errorf("history does not show the expiry:\n%s", r.stdout)
	}
}

// TestSnapshotsAreDroppedWhenTheirPlanIsDone: a rejected plan's snapshot
// tables go once policy.snapshot_ttl has passed; `refill snapshot drop`
// drops a done plan's at once, audited, and refuses a plan that may still
// run.
func TestSnapshotsAreDroppedWhenTheirPlanIsDone(t *testing.T) {
	d := setup(t)
	plan := func(from, to string) string {
		return decode[planJSON](t, step(t, d, 0, "", "plan", "events_raw", "--from", from, "--to", to, "--reason", "r", "--as", "alice", "-o", "json").stdout).ID
	}
	tables := func(id string) int {
		return warehouseCount(t, d, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name LIKE 'refill_snap_`+id+`%'`)
	}
	a, b := plan("2026-10-04", "2026-10-05"), plan("2026-10-12", "2026-10-13")
	step(t, d, 0, "", "snapshot", a, "--as", "alice")
	step(t, d, 0, "", "snapshot", b, "--as", "alice")
	if tables(a) == 0 || tables(b) == 0 {
		t.Fatalf("snapshots made no tables: %d, %d", tables(a), tables(b))
	}
	step(t, d, 4, "drop it once the plan is done", "snapshot", "drop", b, "--reason", "early", "--as", "carol")
	step(t, d, 2, "--reason is required", "snapshot", "drop", b, "--as", "carol")
	step(t, d, 0, "", "reject", a, "--as", "carol", "--note", "not now")
	step(t, d, 0, "", "reject", b, "--as", "carol", "--note", "not now")
	step(t, d, 0, "dropped", "snapshot", "drop", b, "--reason", "done with it", "--as", "carol")
	if tables(b) != 0 {
		t.Errorf("snapshot drop left %d table(s) of %s", tables(b), b)
	}
	if tables(a) == 0 {
		t.Fatal("a's snapshot went before snapshot_ttl passed")
	}
	// Fifteen days on, any write sweeps a's snapshot away.
	r := run(t, d, []string{"REFILL_NOW=2026-12-16T12:00:00Z"}, "plan", "sessions", "--from", "2026-10-20", "--to", "2026-10-20", "--reason", "r", "--as", "alice")
	if r.code != 0 || !strings.Contains(r.stderr, "snapshot tables dropped") {
		t.Fatalf("a write after snapshot_ttl: exit %d\n%s", r.code, r.stderr)
	}
	if tables(a) != 0 {
		t.Errorf("the sweep left %d table(s) of %s", tables(a), a)
	}
	step(t, d, 0, "intact", "audit", "verify")
}
