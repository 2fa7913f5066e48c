package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
)

func editConfig(t *testing.T, dir, old, new string) (restore func()) {
	t.Helper()
	path := filepath.Join(dir, "refill.yaml")
	cfg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cfg), old) {
		t.Fatalf("refill.yaml has no %q", old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(cfg), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.WriteFile(path, cfg, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func warehouseExec(t *testing.T, dir string, stmts ...string) {
	t.Helper()
	warehouseExecIn(t, dir, "warehouse.db", stmts...)
}

// warehouseExecIn runs stmts on the SQLite database file in dir.
func warehouseExecIn(t *testing.T, dir, file string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(dir, file)+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func warehouseCount(t *testing.T, dir, query string) int {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(dir, "warehouse.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// TestRetargetAfterApproval: an approved plan whose table is changed in
// refill.yaml is stale — show says how, approve and apply refuse — and
// the other table is never touched.
func TestRetargetAfterApproval(t *testing.T) {
	t.Parallel()
	d, _, plans := demoPlans(t)
	semi := plans[1]
	warehouseExec(t, d, `CREATE TABLE precious AS SELECT * FROM sessions`)
	before := warehouseCount(t, d, `SELECT count(*) FROM precious`)
	step(t, d, 0, "", "approve", semi, "--as", "bob")
	restore := editConfig(t, d, "table: sessions", "table: precious")

	r := step(t, d, 0, "the table of sessions changed: sealed sessions, now precious", "show", semi)
	if !strings.Contains(r.stdout, "May run now: no") || !strings.Contains(r.stdout, "Stale") {
		t.Errorf("show of a retargeted plan:\n%s", r.stdout)
	}
	js := decode[struct {
		MayRun bool     `json:"may_run"`
		Stale  []string `json:"stale"`
	}](t, step(t, d, 0, "", "show", semi, "-o", "json").stdout)
	if js.MayRun || len(js.Stale) != 1 {
		t.Errorf("show -o json: may_run=%v stale=%q", js.MayRun, js.Stale)
	}
	step(t, d, 4, "stale", "apply", semi, "--as", "alice")
	if after := warehouseCount(t, d, `SELECT count(*) FROM precious`); after != before {
		t.Fatalf("precious went from %d to %d rows", before, after)
	}

	// The grain, the tags, the checks and the policy are sealed too.
	restore()
	for _, c := range []struct{ old, new, want string }{
		{"max_z: 3", "max_z: 30", "the checks of input events_raw changed"},
		{"auto_max_days: 7", "auto_max_days: 30", "the tier policy changed"},
		{"tags: [aggregate, billing]", "tags: [billing]", "the tags of revenue_daily changed"},
		{"warehouse: sqlite:warehouse.db", "warehouse: sqlite:other.db", "the warehouse changed: sealed sqlite:warehouse.db, now sqlite:other.db"},
		{"partition: {column: day}\n    upstream: [events_daily]\n    tags: [aggregate, billing]", "partition: {column: day, grain: hour}\n    upstream: [events_daily]\n    tags: [aggregate, billing]", "the grain of revenue_daily changed"},
	} {
		undo := editConfig(t, d, c.old, c.new)
		step(t, d, 0, c.want, "show", plans[2])
		undo()
	}
	// Restored, the plan may run again.
	step(t, d, 0, "May run now: yes", "show", semi)
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCheckChangesNothing: `refill check` needs no identity, so it may not
// change what later gates accept: no flags, no schema.
func TestCheckChangesNothing(t *testing.T) {
	t.Parallel()
	d := setup(t)
	stateCount := func() int {
		db, err := sql.Open("sqlite", filepath.Join(d, ".refill", "state.db")+"?_pragma=busy_timeout(5000)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var n int
		if err := db.QueryRow(`SELECT (SELECT count(*) FROM gate_flags) + (SELECT count(*) FROM schema_snapshots) + (SELECT count(*) FROM audit_log)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := stateCount()
	r := run(t, d, []string{"REFILL_NOW=2026-08-01T00:00:00Z"}, "check", "events_raw", "--from", "2026-08-01", "--to", "2026-10-31")
	if r.code != 3 {
		t.Fatalf("check over a range in the future of REFILL_NOW: exit %d, want 3\n%s%s", r.code, r.stdout, r.stderr)
	}
	if after := stateCount(); after != before {
		t.Errorf("check changed the state store: %d rows of flags, schemas and audit entries before, %d after", before, after)
	}
}

// TestSchemaDriftIsNotClearedByPlanning: drift is judged against the
// accepted schema; planning again, even another request, does not clear
// it; `schema accept` does, with an identity, a reason and an audit entry.
func TestSchemaDriftIsNotClearedByPlanning(t *testing.T) {
	t.Parallel()
	d := setup(t)
	plan := func(from, to string, code int) planJSON {
		t.Helper()
		r := run(t, d, nil, "plan", "sessions", "--from", from, "--to", to, "--reason", "drift", "--as", "alice", "-o", "json")
		if r.code != code {
			t.Fatalf("plan %s..%s: exit %d, want %d\n%s", from, to, r.code, code, r.stderr)
		}
		return decode[planJSON](t, r.stdout)
	}
	warehouseExec(t, d, `ALTER TABLE events_raw ADD COLUMN coupon TEXT`)
	for _, rng := range [][2]string{{"2026-11-06", "2026-11-08"}, {"2026-10-06", "2026-10-08"}, {"2026-11-06", "2026-11-08"}} {
		p := plan(rng[0], rng[1], 3)
		if p.Status != "blocked" || !strings.Contains(string(p.Gate.Findings[0]), "coupon") {
			t.Fatalf("plan %v after drift: %s %s", rng, p.Status, p.Gate.Findings)
		}
	}
	step(t, d, 2, "--reason is required", "schema", "accept", "events_raw", "--as", "alice")
	step(t, d, 0, "accepted by alice", "schema", "accept", "events_raw", "--reason", "coupon codes are new upstream (CHG-12)", "--as", "alice")
	if p := plan("2026-11-06", "2026-11-08", 0); p.Status == "blocked" {
		t.Fatalf("after schema accept the plan is still blocked: %s", p.Gate.Findings)
	}
	state, err := sql.Open("sqlite", filepath.Join(d, ".refill", "state.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()
	var who, detail string
	if err := state.QueryRow(`SELECT actor, detail FROM audit_log WHERE event = 'schema_accepted' AND dataset = 'events_raw' AND plan_id = ''`).Scan(&who, &detail); err != nil {
		t.Fatalf("no audit entry for the accepted schema: %v", err)
	}
	if who != "alice" || !strings.Contains(detail, "CHG-12") || !strings.Contains(detail, "coupon") {
		t.Errorf("schema_accepted entry: %s %s", who, detail)
	}
	// Moving the baseline shows in the history of the source's partitions.
	step(t, d, 0, "by alice: coupon codes are new upstream (CHG-12)\n    columns    +coupon", "history", "events_raw", "--partition", "2026-11-07")
	h := decode[struct {
		SchemaBaselines []struct {
			By    string   `json:"by"`
			Added []string `json:"added"`
		} `json:"schema_baselines"`
	}](t, step(t, d, 0, "", "history", "events_raw", "--partition", "2026-11-07", "-o", "json").stdout)
	if len(h.SchemaBaselines) != 1 || h.SchemaBaselines[0].By != "alice" || !slices.Equal(h.SchemaBaselines[0].Added, []string{"coupon"}) {
		t.Errorf("history -o json schema_baselines: %+v", h.SchemaBaselines)
	}
	step(t, d, 0, "intact", "audit", "verify")
}

// TestSnapshotRefusesUnderAnOlderPlan: a snapshot taken while an older
// overlapping plan can still run would, restored, silently undo that run.
func TestSnapshotRefusesUnderAnOlderPlan(t *testing.T) {
	t.Parallel()
	d := setup(t)
	id := func(r result) string { return decode[planJSON](t, r.stdout).ID }
	older := id(step(t, d, 0, "", "plan", "sessions", "--from", "2026-10-01", "--to", "2026-10-05", "--reason", "c", "--as", "alice", "-o", "json"))
	newer := id(step(t, d, 0, "", "plan", "events_raw", "--from", "2026-10-04", "--to", "2026-10-04", "--reason", "a", "--as", "alice", "-o", "json"))
	step(t, d, 4, "no snapshot while older plan "+older, "snapshot", newer, "--as", "alice")
	step(t, d, 0, "", "reject", older, "--as", "bob", "--note", "superseded by hand")
	step(t, d, 0, "", "snapshot", newer, "--as", "alice")
}

// TestSnapshotAndRollbackSurviveAFailedStateWrite: the warehouse is written
// between the intent and its record; a failure there is finished by
// running the command again, never stuck on "already exists".
func TestSnapshotAndRollbackSurviveAFailedStateWrite(t *testing.T) {
	t.Parallel()
	d := setup(t)
	id := decode[planJSON](t, step(t, d, 0, "", "plan", "events_raw", "--from", "2026-10-04", "--to", "2026-10-05", "--reason", "x", "--as", "alice", "-o", "json").stdout).ID
	r := run(t, d, []string{"REFILL_FAILPOINT=snapshot-after-warehouse"}, "snapshot", id, "--as", "alice")
	if r.code == 0 || !strings.Contains(r.stderr, "failpoint") {
		t.Fatalf("snapshot with a failpoint: exit %d\n%s", r.code, r.stderr)
	}
	step(t, d, 0, "", "snapshot", id, "--as", "alice")
	step(t, d, 0, "", "scope", id, "--as", "alice", "--note", "two days")
	step(t, d, 0, "", "approve", id, "--as", "carol")
	step(t, d, 0, "", "apply", id, "--as", "alice")
	if strings.Contains(step(t, d, 0, "", "show", id).stdout, "A rollback was begun") {
		t.Fatal("show speaks of a rollback before one was begun")
	}
	r = run(t, d, []string{"REFILL_FAILPOINT=rollback-after-warehouse"}, "rollback", id, "--as", "carol")
	if r.code == 0 {
		t.Fatalf("rollback with a failpoint: exit 0\n%s", r.stdout)
	}
	// The warehouse is restored, the plan still says applied: show says a
	// rollback is half done, and how to finish it.
	step(t, d, 0, "A rollback was begun by carol at ", "show", id)
	step(t, d, 0, "and not finished: the warehouse may already be restored while the plan still says applied. refill rollback "+id+" finishes it.", "show", id)
	js := decode[struct {
		Status  string `json:"status"`
		Pending *struct {
			Op    string `json:"op"`
			Actor string `json:"actor"`
		} `json:"rollback_pending"`
	}](t, step(t, d, 0, "", "show", id, "-o", "json").stdout)
	if js.Status != "applied" || js.Pending == nil || js.Pending.Op != "rollback" || js.Pending.Actor != "carol" {
		t.Errorf("show -o json after a half-done rollback: %+v", js)
	}
	step(t, d, 0, "rolled_back", "rollback", id, "--as", "carol", "-o", "json")
	if out := step(t, d, 0, "rolled_back", "show", id).stdout; strings.Contains(out, "A rollback was begun") {
		t.Errorf("show still speaks of an unfinished rollback once it finished:\n%s", out)
	}
	step(t, d, 0, "intact", "audit", "verify")
}

// TestMaxRangeDaysAboveTheOldLimit: a config that allows more than 3,660
// days makes plans that snapshot and apply rather than refuse later. The
// data is tiny, and a trigger stops the run at its third day: what is
// checked is that apply gets past the range and builds, without building
// ten years of partitions.
func TestMaxRangeDaysAboveTheOldLimit(t *testing.T) {
	t.Parallel()
	dir := smallProject(t, `version: 1
warehouse: sqlite:wh.db
max_range_days: 4000
run: {max_active: 1, attempts: 1}
users:
  alice: {roles: [engineer]}
  carol: {roles: [lead]}
datasets:
  raw: {table: raw, partition: {column: day}}
  mid:
    table: mid
    partition: {column: day}
    upstream: [raw]
    job: {query: "SELECT day, v FROM raw WHERE day = :partition"}
`, "CREATE TABLE raw (day TEXT, v INTEGER)", "CREATE TABLE mid (day TEXT, v INTEGER)",
		"INSERT INTO raw VALUES ('2016-11-01', 1), ('2016-11-02', 2), ('2016-11-03', 3), ('2026-11-29', 4)")
	p := decode[planJSON](t, step(t, dir, 0, "", "plan", "mid", "--from", "2016-11-01", "--to", "2026-11-29", "--reason", "a decade", "--as", "alice", "-o", "json").stdout)
	if len(p.Steps) != 1 || len(p.Steps[0].Partitions) != 3681 {
		t.Fatalf("plan over 3,681 days: %+v", p.Steps)
	}
	step(t, dir, 0, "", "snapshot", p.ID, "--as", "alice")
	step(t, dir, 0, "", "scope", p.ID, "--as", "alice", "--note", "a decade")
	step(t, dir, 0, "", "approve", p.ID, "--as", "carol")
	warehouseExecIn(t, dir, "wh.db", `CREATE TRIGGER stop_here BEFORE INSERT ON mid WHEN NEW.day = '2016-11-03' BEGIN SELECT RAISE(ABORT, 'stopped by the test'); END`)
	r := step(t, dir, 1, "stopped by the test", "apply", p.ID, "--as", "alice")
	if strings.Contains(r.stderr, "3660") || strings.Contains(r.stderr, "maximum") {
		t.Errorf("apply refused the range:\n%s", r.stderr)
	}
	// The trigger's message shows apply got past the range and built
	// partitions. How many were published before it is not asked: the
	// step's jobs wait for its one slot together, and under load the
	// third day may be the first to get it.
	if n := count(t, dir, `SELECT count(*) FROM mid WHERE day = '2016-11-03'`); n != 0 {
		t.Errorf("mid 2016-11-03 holds %d rows past the trigger", n)
	}
}

func mustAppend(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

// TestSecondApplyDoesNotResumeALiveRun: while one apply runs a plan, a
// second one is refused instead of building the same partitions twice.
func TestSecondApplyDoesNotResumeALiveRun(t *testing.T) {
	t.Parallel()
	dir := smallProject(t, `version: 1
warehouse: sqlite:wh.db
datasets:
  slow:
    job:
      command: ["sh", "-c", "echo {{partition}} >> builds.txt; sleep 3"]
`)
	id := approvedPlan(t, dir, "slow")
	first := exec.Command(binary, "apply", id, "--as", "alice")
	first.Dir = dir
	first.Env = append(os.Environ(), "REFILL_NOW="+demoNow, "REFILL_CONFIG=")
	var out bytes.Buffer
	first.Stdout, first.Stderr = &out, &out
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(mustReadOr(filepath.Join(dir, "builds.txt")), "2026-11-01") {
		if time.Now().After(deadline) {
			t.Fatalf("the first apply never started its job:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	step(t, dir, 4, "is running now", "apply", id, "--as", "alice")
	if err := first.Wait(); err != nil {
		t.Fatalf("first apply: %v\n%s", err, out.String())
	}
	if got := strings.Count(mustReadOr(filepath.Join(dir, "builds.txt")), "2026-11-01"); got != 1 {
		t.Errorf("the partition was built %d times, want 1", got)
	}
}

func mustReadOr(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// TestPlanFromBeforeSealingIsStale: a plan stored by an older refill (no
// sealed table, job or checks) still loads, and says it must be planned
// again rather than run on whatever the config says now.
func TestPlanFromBeforeSealingIsStale(t *testing.T) {
	t.Parallel()
	d, _, plans := demoPlans(t)
	id := plans[1]
	state := openState(t, d)
	var body string
	if err := state.QueryRow(`SELECT body FROM plans WHERE id = ?`, id).Scan(&body); err != nil {
		t.Fatal(err)
	}
	var p refill.Plan
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	p.Seal, p.SourceSeals, p.Run = 0, nil, nil
	for i := range p.Steps {
		p.Steps[i].Ref, p.Steps[i].Job, p.Steps[i].Checks = nil, nil, nil
	}
	// Recorded as an older refill recorded it, with its audit entry.
	p.ID, p.Status = "0ld5ea1d", refill.StatusPending
	p.Hash = p.ComputeHash()
	st, err := store.Open(t.Context(), "sqlite:.refill/state.db", d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.RecordPlan(t.Context(), refill.PlanRecord{Plan: &p}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	id = p.ID
	step(t, d, 0, "made by an older refill", "show", id)
	step(t, d, 4, "stale", "approve", id, "--as", "bob")
	step(t, d, 4, "stale", "apply", id, "--as", "alice")
	step(t, d, 0, "", "plans")
}

// TestRollbackRefusesSomeoneElsesWrite: a partition written since this
// plan published it is not the plan's to restore; a lead may force it with
// a reason, which the audit log keeps.
func TestRollbackRefusesSomeoneElsesWrite(t *testing.T) {
	t.Parallel()
	d := setup(t)
	id := decode[planJSON](t, step(t, d, 0, "", "plan", "sessions", "--from", "2026-10-03", "--to", "2026-10-04", "--reason", "r", "--as", "alice", "-o", "json").stdout).ID
	step(t, d, 0, "", "snapshot", id, "--as", "alice")
	step(t, d, 0, "", "approve", id, "--as", "bob")
	step(t, d, 0, "", "apply", id, "--as", "alice")
	warehouseExec(t, d, `UPDATE sessions SET events = events + 1 WHERE day = '2026-10-04'`)
	before := warehouseCount(t, d, `SELECT sum(events) FROM sessions WHERE day = '2026-10-04'`)
	step(t, d, 4, "sessions 2026-10-04: it was written since this plan published it", "rollback", id, "--as", "carol")
	if after := warehouseCount(t, d, `SELECT sum(events) FROM sessions WHERE day = '2026-10-04'`); after != before {
		t.Fatalf("a refused rollback changed sessions 2026-10-04: %d -> %d", before, after)
	}
	step(t, d, 2, "--force needs --reason", "rollback", id, "--as", "carol", "--force")
	step(t, d, 4, "only a lead may force", "rollback", id, "--as", "alice", "--force", "--reason", "mine")
	step(t, d, 0, "", "rollback", id, "--as", "carol", "--force", "--reason", "the manual fix was wrong too (INC-4712)")
	var detail string
	if err := openState(t, d).QueryRow(`SELECT detail FROM audit_log WHERE event = 'rollback' AND partition = '' ORDER BY seq DESC LIMIT 1`).Scan(&detail); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(detail, "INC-4712") || !strings.Contains(detail, "2026-10-04") {
		t.Errorf("the forced rollback's audit entry: %s", detail)
	}
}

// TestKilledApplyTakesItsJobsWithIt: a command job does not outlive the
// apply that started it, so the next apply (finding the lease's holder
// dead) is not building the same partition beside an orphan.
func TestKilledApplyTakesItsJobsWithIt(t *testing.T) {
	t.Parallel()
	dir := smallProject(t, `version: 1
warehouse: sqlite:wh.db
datasets:
  slow:
    job:
      command: ["sh", "-c", "echo $$ > pid-{{partition}}; exec sleep 30"]
`)
	id := approvedPlan(t, dir, "slow")
	apply := exec.Command(binary, "apply", id, "--as", "alice")
	apply.Dir = dir
	apply.Env = append(os.Environ(), "REFILL_NOW="+demoNow, "REFILL_CONFIG=")
	if err := apply.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	deadline := time.Now().Add(20 * time.Second)
	for pid == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the job never started")
		}
		if b, err := os.ReadFile(filepath.Join(dir, "pid-2026-11-01")); err == nil {
			fmt.Sscanf(string(b), "%d", &pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = apply.Process.Signal(syscall.SIGKILL)
	_ = apply.Wait()
	for deadline := time.Now().Add(5 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the job (pid %d) outlived the apply that started it", pid)
		}
	}
	// The plan still says running, but show tells that nothing runs it.
	step(t, dir, 0, "Nothing is running this plan: its run's holder", "show", id)
	type holder struct {
		Status    string `json:"status"`
		RunHolder struct {
			Holder   string `json:"holder"`
			Orphaned bool   `json:"orphaned"`
		} `json:"run_holder"`
	}
	st := decode[holder](t, step(t, dir, 0, "", "show", id, "-o", "json").stdout)
	if st.Status != "running" || !st.RunHolder.Orphaned || !strings.Contains(st.RunHolder.Holder, fmt.Sprint(apply.Process.Pid)) {
		t.Errorf("show -o json of a plan whose apply was killed: %+v", st)
	}
}

// TestEditedScriptMakesThePlanStale: a command job's script is part of the
// job: editing it after the plan was made (or proven) is a different job.
func TestEditedScriptMakesThePlanStale(t *testing.T) {
	t.Parallel()
	d, _, plans := demoPlans(t)
	manual := plans[2] // rebuilds partner_feed, whose job is ./export.sh
	step(t, d, 0, "", "show", manual)
	mustAppend(t, filepath.Join(d, "export.sh"), "\n# a hurried edit\n")
	step(t, d, 0, "the job of partner_feed changed: export.sh changed (sealed sha256:", "show", manual)
	step(t, d, 4, "stale", "snapshot", manual, "--as", "alice")
}

// TestStateStoreEditsDoNotOutrankTheLog: a proof verdict flipped in the
// proofs table, or a rejection erased from the plans and approvals tables,
// changes nothing: the audit log decides.
func TestStateStoreEditsDoNotOutrankTheLog(t *testing.T) {
	t.Parallel()
	dir := hostileProject(t)
	step(t, dir, 5, "a rerun adds rows", "prove", "append", "--partition", "2026-11-02", "--as", "alice")
	state := openState(t, dir)
	if _, err := state.Exec(`UPDATE proofs SET passed = 1, body = replace(body, '"passed":false', '"passed":true')`); err != nil {
		t.Fatal(err)
	}
	p := decode[planJSON](t, step(t, dir, 0, "", "plan", "append", "--from", "2026-11-02", "--to", "2026-11-02", "--reason", "r", "--as", "alice", "-o", "json").stdout)
	if p.Tier == "auto" {
		t.Fatalf("a proof flipped to passed in the state store made the plan auto: %v", p.Reasons)
	}

	d := setup(t)
	id := decode[planJSON](t, step(t, d, 0, "", "plan", "sessions", "--from", "2026-11-01", "--to", "2026-11-10", "--reason", "r", "--as", "alice", "-o", "json").stdout).ID
	step(t, d, 0, "", "reject", id, "--as", "carol", "--note", "no")
	s2 := openState(t, d)
	for _, q := range []string{`UPDATE plans SET status = 'pending' WHERE id = ?`, `DELETE FROM approvals WHERE plan_id = ?`} {
		if _, err := s2.Exec(q, id); err != nil {
			t.Fatal(err)
		}
	}
	step(t, d, 0, "the audit log records the plan rejected", "show", id)
	step(t, d, 4, "rejected", "approve", id, "--as", "bob")
	step(t, d, 4, "", "apply", id, "--as", "alice")
}

// TestReportJudgesByTheSealedTolerance: a plan made under run.tolerance
// 0.1 is judged by 10% however refill.yaml changes after it is approved
// (the tolerance is not part of what makes a plan stale, so the plan still
// runs): a partition 400% off its expectation is flagged, apply and report
// exit 5, where the edited tolerance of 1000% would have passed it.
func TestReportJudgesByTheSealedTolerance(t *testing.T) {
	t.Parallel()
	dir := smallProject(t, `version: 1
warehouse: sqlite:wh.db
run: {tolerance: 0.1}
datasets:
  raw: {table: raw, partition: {column: day}}
  mid:
    table: mid
    partition: {column: day}
    upstream: [raw]
    job: {query: "SELECT day, v FROM raw WHERE day = :partition"}
`,
		"CREATE TABLE raw (day TEXT, v INTEGER)",
		"CREATE TABLE mid (day TEXT, v INTEGER)",
		"INSERT INTO raw VALUES ('2026-11-01', 1)",
	)
	id := approvedPlan(t, dir, "mid") // expects 1 row
	db, err := sql.Open("sqlite", filepath.Join(dir, "wh.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO raw VALUES ('2026-11-01', 2), ('2026-11-01', 3), ('2026-11-01', 4), ('2026-11-01', 5)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	editConfig(t, dir, "run: {tolerance: 0.1}", "run: {tolerance: 10}")
	step(t, dir, 0, "May run now: yes", "show", id)

	r := run(t, dir, nil, "apply", id, "--as", "alice")
	if r.code != 5 || !strings.Contains(r.stdout, "1 of 1 partitions published, 1 flagged (tolerance 10%)") || !strings.Contains(r.stderr, "ALERT") {
		t.Fatalf("apply of a run 400%% off its expectation: exit %d, want 5 judged at the sealed 10%%\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	r = run(t, dir, nil, "report", id, "-o", "json")
	rep := decode[struct {
		Tolerance float64 `json:"tolerance"`
		Flagged   int     `json:"flagged"`
		Rows      []struct {
			Partition string   `json:"partition"`
			Deviation *float64 `json:"deviation"`
			Flagged   bool     `json:"flagged"`
		} `json:"rows"`
	}](t, r.stdout)
	if r.code != 5 || rep.Tolerance != 0.1 || rep.Flagged != 1 || len(rep.Rows) != 1 || !rep.Rows[0].Flagged || rep.Rows[0].Deviation == nil || *rep.Rows[0].Deviation != 4 {
		t.Errorf("report under tolerance 10 in refill.yaml: exit %d, %+v; want exit 5, tolerance 0.1 and 2026-11-01 flagged at +400%%\n%s", r.code, rep, r.stderr)
	}
}
