package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFlowsOnPostgresState runs the semi-auto and manual flows end to end
// through the binary with the state store (and River) on PostgreSQL.
func TestFlowsOnPostgresState(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if r := run(t, root, nil, "demo", "d", "-o", "json"); r.code != 0 {
		t.Fatalf("demo: %s", r.stderr)
	}
	d := filepath.Join(root, "d")
	cfgPath := filepath.Join(d, "refill.yaml")
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	pg := strings.Replace(string(cfg), "state: sqlite:.refill/state.db", `state: "`+pgSchema(t)+`"`, 1)
	if pg == string(cfg) {
		t.Fatal("could not point state: at PostgreSQL")
	}
	if err := os.WriteFile(cfgPath, []byte(pg), 0o644); err != nil {
		t.Fatal(err)
	}
	id := func(r result) string { return decode[planJSON](t, r.stdout).ID }

	// Semi-auto: approve by another person, apply, report.
	semi := id(step(t, d, 0, "", "plan", "sessions", "--from", "2026-11-06", "--to", "2026-11-19", "--reason", "sessionization fix", "--as", "alice", "-o", "json"))
	step(t, d, 4, "needs one approval by someone other than alice", "apply", semi, "--as", "alice")
	step(t, d, 4, "nobody approves their own request", "approve", semi, "--as", "alice")
	step(t, d, 0, "", "approve", semi, "--as", "bob")
	rep := decode[struct {
		Status    string `json:"status"`
		Published int    `json:"published"`
		Total     int    `json:"partitions"`
	}](t, step(t, d, 0, "", "apply", semi, "--as", "alice", "-o", "json").stdout)
	if rep.Status != "applied" || rep.Published != 14 || rep.Total != 14 {
		t.Errorf("semi-auto run: %+v", rep)
	}

	// Manual: the whole checklist, a rollback, history, the audit chain.
	manual := id(step(t, d, 0, "", "plan", "events_raw", "--from", "2026-11-21", "--to", "2026-11-23", "--reason", "INC-4711 redo", "--as", "alice", "-o", "json"))
	step(t, d, 4, "checklist", "apply", manual, "--as", "alice")
	step(t, d, 0, "", "snapshot", manual, "--as", "alice")
	step(t, d, 0, "", "scope", manual, "--as", "alice", "--note", "72h only")
	step(t, d, 4, "only a lead", "approve", manual, "--as", "bob")
	step(t, d, 0, "", "approve", manual, "--as", "carol")
	step(t, d, 0, "Report of plan "+manual+" (applied): 12 of 12", "apply", manual, "--as", "alice")
	step(t, d, 0, "12 of 12 partitions published, 0 flagged", "report", manual)
	step(t, d, 4, "sign-off is a second person's review", "signoff", manual, "--as", "alice")
	step(t, d, 0, "", "signoff", manual, "--as", "carol", "--note", "matches")
	step(t, d, 4, "signed off already", "signoff", manual, "--as", "carol")
	r := step(t, d, 0, "", "rollback", manual, "--as", "carol", "-o", "json")
	if n := strings.Count(r.stdout, `"snapshot_table"`); n != 12 {
		t.Errorf("rollback restored %d partitions, want the 12 rewritten (sources are never restored)", n)
	}
	step(t, d, 0, "approved   by carol", "history", "revenue_daily", "--partition", "2026-11-22")
	step(t, d, 0, "audit log intact", "audit", "verify")
}
