package main

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// demoPlans gives a test the finished demo (setup) with fresh plans over
// its warehouse: the demo's blocked incident plan, and new auto, semi-auto
// and manual plans, all waiting. The plans are made once per test process,
// into a template each test gets a copy of, as setup does with the demo.
func demoPlans(t *testing.T) (dir string, blocked string, plans []string) {
	t.Helper()
	plansOnce.Do(func() {
		src := setup(t)
		for _, req := range [][]string{
			{"sessions", "2026-11-27", "2026-11-29"},
			{"sessions", "2026-11-06", "2026-11-19"},
			{"events_raw", "2026-11-21", "2026-11-23"},
		} {
			r := run(t, src, nil, "plan", req[0], "--from", req[1], "--to", req[2], "--reason", "upstream schema change broke 72h of events (INC-4711)", "--as", "alice", "-o", "json")
			if r.code != 0 {
				plansErr = fmt.Errorf("plan %v: exit %d\n%s", req, r.code, r.stderr)
				return
			}
			plansIDs = append(plansIDs, decode[planJSON](t, r.stdout).ID)
		}
		plansDir = filepath.Join(filepath.Dir(binary), "template-plans")
		plansErr = os.CopyFS(plansDir, os.DirFS(src))
	})
	if plansErr != nil {
		t.Fatal(plansErr)
	}
	if plansDir == "" {
		t.Fatal("the test that made the demo's plans stopped before it was done")
	}
	dir = filepath.Join(t.TempDir(), "d")
	if err := os.CopyFS(dir, os.DirFS(plansDir)); err != nil {
		t.Fatal(err)
	}
	out := decode[struct {
		Blocked planJSON `json:"blocked"`
	}](t, demoOut)
	return dir, out.Blocked.ID, slices.Clone(plansIDs)
}

var (
	plansOnce sync.Once
	plansDir  string
	plansIDs  []string
	plansErr  error
)

type stateOut struct {
	planJSON
	Unmet     []string `json:"unmet"`
	MayRun    bool     `json:"may_run"`
	Approvals []struct {
		Actor    string `json:"actor"`
		Decision string `json:"decision"`
		PlanHash string `json:"plan_hash"`
	} `json:"approvals"`
}

// step runs one command and checks its exit code and, when given, a
// substring of its output.
func step(t *testing.T, dir string, code int, want string, args ...string) result {
	t.Helper()
	r := run(t, dir, nil, args...)
	if r.code != code || !strings.Contains(r.stdout+r.stderr, want) {
		t.Fatalf("%v: exit %d, want %d with %q\nstdout: %s\nstderr: %s", args, r.code, code, want, r.stdout, r.stderr)
	}
	return r
}

func TestSemiAutoApprovalRules(t *testing.T) {
	t.Parallel()
	d, blocked, plans := demoPlans(t)
	semi := plans[1]

	step(t, d, 4, "nobody approves their own request", "approve", semi, "--as", "alice")
	step(t, d, 4, `unknown user "mallory"`, "approve", semi, "--as", "mallory")
	step(t, d, 4, "who are you?", "approve", semi)
	step(t, d, 4, "blocked by the source gate", "approve", blocked, "--as", "carol")
	step(t, d, 4, "auto: it needs no approval", "approve", plans[0], "--as", "bob")

	s := decode[stateOut](t, step(t, d, 0, "", "show", semi, "-o", "json").stdout)
	if s.MayRun || len(s.Unmet) != 1 || !strings.Contains(s.Unmet[0], "needs one approval by someone other than alice") {
		t.Errorf("before approval: may_run %v unmet %q", s.MayRun, s.Unmet)
	}
	s = decode[stateOut](t, step(t, d, 0, "", "approve", semi, "--as", "bob", "--note", "range checked", "-o", "json").stdout)
	if s.Status != "approved" || !s.MayRun || len(s.Approvals) != 1 || s.Approvals[0].PlanHash != s.Hash {
		t.Errorf("after approval: %+v", s)
	}
	step(t, d, 4, "already approved", "approve", semi, "--as", "carol")

	// A second plan over some of the same partitions is created but locked
	// while the first is live.
	r := step(t, d, 0, "", "plan", "sessions", "--from", "2026-11-12", "--to", "2026-11-19", "--reason", "overlap", "--as", "alice", "-o", "json")
	overlap := decode[planJSON](t, r.stdout).ID
	step(t, d, 4, "is locked: plan "+semi, "approve", overlap, "--as", "bob")
	s = decode[stateOut](t, step(t, d, 0, "", "show", overlap, "-o", "json").stdout)
	if !strings.Contains(strings.Join(s.Unmet, ";"), "plan "+semi+" (approved) holds 8 partition(s) of sessions") {
		t.Errorf("unmet of the locked plan: %q", s.Unmet)
	}

	// Re-planning the same request supersedes the approved plan: its
	// approval does not carry over.
	r = step(t, d, 0, "", "plan", "sessions", "--from", "2026-11-06", "--to", "2026-11-19", "--reason", "again", "--as", "alice", "-o", "json")
	replan := decode[planJSON](t, r.stdout).ID
	step(t, d, 4, "superseded", "approve", semi, "--as", "carol")
	if s := decode[stateOut](t, step(t, d, 0, "", "show", semi, "-o", "json").stdout); s.Status != "superseded" || s.MayRun {
		t.Errorf("the old plan: %s may_run %v", s.Status, s.MayRun)
	}
	// The overlapping plan, made before the re-plan, now holds the lock.
	step(t, d, 4, "is locked: plan "+overlap, "approve", replan, "--as", "carol")

	// Rejection needs a note, and a rejected plan cannot be approved; it
	// releases its partitions.
	step(t, d, 2, "--note is required", "reject", overlap, "--as", "bob")
	step(t, d, 0, "", "reject", overlap, "--as", "bob", "--note", "duplicate of "+semi)
	step(t, d, 4, "was rejected", "approve", overlap, "--as", "carol")
	step(t, d, 0, "", "approve", replan, "--as", "carol")

	step(t, d, 0, "audit log intact", "audit", "verify")
}

func TestManualChecklist(t *testing.T) {
	t.Parallel()
	d, _, plans := demoPlans(t)
	manual := plans[2]

	step(t, d, 4, "its snapshot step is not done yet", "approve", manual, "--as", "carol")
	step(t, d, 4, "snapshot first", "scope", manual, "--as", "alice", "--note", "72h of INC-4711")
	step(t, d, 4, "has no snapshot", "rollback", manual, "--as", "alice")
	r := step(t, d, 0, "", "snapshot", manual, "--as", "alice", "-o", "json")
	snap := decode[struct {
		Partitions []struct {
			Dataset   string `json:"dataset"`
			Partition string `json:"partition"`
			Source    bool   `json:"source"`
			Digest    struct {
				Rows int64 `json:"rows"`
			} `json:"digest"`
			SnapshotTable string `json:"snapshot_table"`
		} `json:"partitions"`
	}](t, r.stdout)
	// 4 datasets with tables plus the source, 3 partitions each.
	if len(snap.Partitions) != 15 {
		t.Fatalf("snapshot has %d partitions, want 15: %+v", len(snap.Partitions), snap.Partitions)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(d, "warehouse.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, p := range snap.Partitions {
		col := "day"
		if p.Source {
			col = "event_date"
		}
		var n int64
		if err := db.QueryRow(`SELECT count(*) FROM "`+p.SnapshotTable+`" WHERE `+col+` = ?`, p.Partition).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != p.Digest.Rows || (p.Dataset == "events_daily" && n != 5) {
			t.Errorf("%s %s: snapshot table holds %d rows, recorded %d", p.Dataset, p.Partition, n, p.Digest.Rows)
		}
	}
	step(t, d, 4, "already has a snapshot", "snapshot", manual, "--as", "alice")
	step(t, d, 4, "only a lead may approve it", "approve", manual, "--as", "bob")
	step(t, d, 4, "its scope step is not done yet", "approve", manual, "--as", "carol")
	r = step(t, d, 0, "", "scope", manual, "--as", "alice", "--note", "the 72 hours of INC-4711 only", "-o", "json")
	if !strings.Contains(r.stdout, "Rebuild events_daily, sessions, partner_feed, revenue_daily for 2026-11-21..2026-11-23 (3 days): 12 partitions") {
		t.Errorf("the scope statement lacks the impact summary: %s", r.stdout)
	}
	step(t, d, 4, "sign off after the run finished", "signoff", manual, "--as", "carol")
	s := decode[stateOut](t, step(t, d, 0, "", "approve", manual, "--as", "carol", "-o", "json").stdout)
	if s.Status != "approved" || !s.MayRun {
		t.Errorf("after the lead's approval: %s, unmet %q", s.Status, s.Unmet)
	}
	step(t, d, 4, "after a finished, failed or cancelled run", "rollback", manual, "--as", "carol")

	h := step(t, d, 0, "", "history", "events_daily", "--partition", "2026-11-22")
	for _, want := range []string{"was in 4 plan(s)", "plan " + manual + "  manual  approved", "upstream schema change broke 72h of events (INC-4711)", "approved   by carol", "snapshot by alice", "planned    5 -> 5 rows"} {
		if !strings.Contains(h.stdout, want) {
			t.Errorf("history lacks %q:\n%s", want, h.stdout)
		}
	}

	// Tampering with the audit log is caught, naming the entry.
	step(t, d, 0, "audit log intact", "audit", "verify")
	state, err := sql.Open("sqlite", "file:"+filepath.Join(d, ".refill", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()
	var seq int
	if err := state.QueryRow(`SELECT seq FROM audit_log WHERE event = 'approval'`).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	if _, err := state.Exec(`UPDATE audit_log SET actor = 'mallory' WHERE seq = ?`, seq); err != nil {
		t.Fatal(err)
	}
	r = step(t, d, 5, "was altered", "audit", "verify")
	if !regexp.MustCompile(`audit log entry \d+`).MatchString(r.stderr) || !strings.Contains(r.stderr, "entry "+itoa(seq)) {
		t.Errorf("audit verify does not name entry %d: %s", seq, r.stderr)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestWithoutUsers checks a users-less config serves one person: semi-auto
// plans can be approved by another name, manual plans are refused with a
// way forward.
func TestWithoutUsers(t *testing.T) {
	t.Parallel()
	d, _, plans := demoPlans(t)
	cfg, err := os.ReadFile(filepath.Join(d, "refill.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	noUsers := regexp.MustCompile(`(?s)users:\n(  [a-z]+: \{roles: \[[a-z]+\]\}\n)+`).ReplaceAllString(string(cfg), "")
	if noUsers == string(cfg) {
		t.Fatal("could not remove users: from the demo config")
	}
	if err := os.WriteFile(filepath.Join(d, "refill.yaml"), []byte(noUsers), 0o644); err != nil {
		t.Fatal(err)
	}
	step(t, d, 0, "", "snapshot", plans[2], "--as", "alice")
	step(t, d, 0, "", "scope", plans[2], "--as", "alice", "--note", "n")
	step(t, d, 4, "add users: to refill.yaml with a lead", "approve", plans[2], "--as", "dave")
	// Without users:, every decision says plainly that four-eyes is not
	// enforced: at the terminal, in JSON and in its audit entry.
	step(t, d, 0, "Four-eyes is NOT enforced", "approve", plans[1], "--as", "dave")
	js := decode[struct {
		FourEyes *bool `json:"four_eyes_enforced"`
	}](t, step(t, d, 0, "", "show", plans[1], "-o", "json").stdout)
	if js.FourEyes == nil || *js.FourEyes {
		t.Errorf("show -o json: four_eyes_enforced = %v, want false", js.FourEyes)
	}
	state, err := sql.Open("sqlite", filepath.Join(d, ".refill", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()
	for _, kind := range []string{"approval", "snapshot", "scope"} {
		var detail string
		if err := state.QueryRow(`SELECT detail FROM audit_log WHERE event = ? AND partition = '' ORDER BY seq DESC LIMIT 1`, kind).Scan(&detail); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(detail, `"four_eyes_enforced":false`) {
			t.Errorf("%s audit entry does not say four-eyes is off: %s", kind, detail)
		}
	}
}
