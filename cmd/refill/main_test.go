package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/refill-dev/refill/internal/pgtest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// These tests drive the real binary, built once, as a user would.

var binary string

// buildTags are the build tags of these tests, for the binary they build.
var buildTags = ""

func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == "duckdb-job" && duckdbJob != nil {
		os.Exit(duckdbJob(os.Args[2])) // a command job of a test, not the tests
	}
	if path := os.Getenv(lockEnv); path != "" {
		lockSQLite(path) // the other process of a test, not the tests
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "refill-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "refill")
	// The binary is built with the tags these tests were (-tags duckdb).
	if out, err := exec.Command("go", "build", "-tags", buildTags, "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building refill: %v\n%s", err, out)
		os.Exit(1)
	}
	// Most of these tests wait on the processes they start (a job's
	// sleep, an outage, a lease): more of them at once than there are
	// cores keeps the cores busy. -parallel on the command line wins.
	flag.Parse()
	if !flagSet("test.parallel") {
		_ = flag.Set("test.parallel", strconv.Itoa(max(8, 4*runtime.GOMAXPROCS(0))))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// demoNow is the fixed clock the tests run the demo under.
const demoNow = "2026-11-30T12:00:00Z"

type result struct {
	code           int
	stdout, stderr string
}

func run(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "REFILL_NOW="+demoNow, "REFILL_USER=", "REFILL_CONFIG="), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, out.String(), errb.String()}
}

// setup gives a test its own finished demo, as `refill demo d` leaves it,
// and returns its directory. The demo runs once per test process, into a
// template that each test gets a copy of: it plans, proves and applies, and
// copying its files is a hundred times faster than running it again.
func setup(t *testing.T) string {
	t.Helper()
	demoOnce.Do(func() {
		demoDir = filepath.Join(filepath.Dir(binary), "template")
		if err := os.Mkdir(demoDir, 0o755); err != nil {
			demoErr = err
			return
		}
		r := run(t, demoDir, nil, "demo", "d", "-o", "json")
		if r.code != 0 {
			demoErr = fmt.Errorf("demo: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		demoOut = r.stdout
	})
	if demoErr != nil {
		t.Fatal(demoErr)
	}
	dst := filepath.Join(t.TempDir(), "d")
	if err := os.CopyFS(dst, os.DirFS(filepath.Join(demoDir, "d"))); err != nil {
		t.Fatal(err)
	}
	return dst
}

var (
	demoOnce sync.Once
	demoDir  string
	demoOut  string // what the demo wrote, -o json
	demoErr  error
)

type planJSON struct {
	ID      string   `json:"id"`
	Hash    string   `json:"hash"`
	Status  string   `json:"status"`
	Tier    string   `json:"tier"`
	Reasons []string `json:"reasons"`
	Request struct {
		Targets     []string `json:"targets"`
		From, To    string
		Reason      string `json:"reason"`
		RequestedBy string `json:"requested_by"`
	} `json:"request"`
	Steps []struct {
		Dataset    string `json:"dataset"`
		Order      int    `json:"order"`
		Partitions []struct {
			Partition      string `json:"partition"`
			CurrentRows    *int64 `json:"current_rows"`
			ExpectedRows   *int64 `json:"expected_rows"`
			ExpectedMethod string `json:"expected_method"`
		} `json:"partitions"`
	} `json:"steps"`
	Gate struct {
		Passed   bool              `json:"passed"`
		Findings []json.RawMessage `json:"findings"`
	} `json:"gate"`
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("stdout is not one JSON document: %v\n%s", err, s)
	}
	return v
}

type findingJSON struct {
	Dataset   string  `json:"dataset"`
	Partition string  `json:"partition"`
	Check     string  `json:"check"`
	Column    string  `json:"column"`
	Observed  float64 `json:"observed"`
	Limit     float64 `json:"limit"`
	Passed    bool    `json:"passed"`
	Warning   bool    `json:"warning"`
}

type proofJSON struct {
	Dataset string `json:"dataset"`
	Passed  bool   `json:"passed"`
	Failure string `json:"failure"`
	Message string `json:"message"`
}

// demoEngines are the warehouse engines the demo tests play on: DuckDB's
// too when the tests are built with -tags duckdb.
var demoEngines = []string{"sqlite"}

// eachEngine runs fn as a parallel subtest per demo engine.
func eachEngine(t *testing.T, fn func(t *testing.T, engine string)) {
	for _, e := range demoEngines {
		t.Run(e, func(t *testing.T) {
			t.Parallel()
			fn(t, e)
		})
	}
}

func TestDemoPlaysOutTheIncident(t *testing.T) {
	t.Parallel()
	eachEngine(t, testDemoPlaysOutTheIncident)
}

func testDemoPlaysOutTheIncident(t *testing.T, engine string) {
	dir := t.TempDir()
	r := run(t, dir, nil, "demo", "d", "--warehouse", engine, "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	// The warehouse is the engine's own file, and the config names it.
	file := map[string]string{"sqlite": "warehouse.db", "duckdb": "warehouse.duckdb"}[engine]
	cfg, err := os.ReadFile(filepath.Join(dir, "d", "refill.yaml"))
	if _, serr := os.Stat(filepath.Join(dir, "d", file)); serr != nil || err != nil || !strings.Contains(string(cfg), "warehouse: "+engine+":"+file) {
		t.Fatalf("the %s demo's warehouse: %v, %v; config %q", engine, serr, err, cfg)
	}
	out := decode[struct {
		Broken   []string    `json:"broken"`
		Blocked  planJSON    `json:"blocked"`
		Proofs   []proofJSON `json:"proofs"`
		Repaired int         `json:"repaired_rows"`
		Plans    []planJSON  `json:"plans"`
	}](t, r.stdout)

	// 1. Over the broken source, the gate blocks the plan, with findings on
	// exactly the 72 broken hours.
	if out.Blocked.Status != "blocked" || out.Blocked.Gate.Passed {
		t.Errorf("incident plan over the broken source: status %s, gate passed %v", out.Blocked.Status, out.Blocked.Gate.Passed)
	}
	var bad []string
	for _, raw := range out.Blocked.Gate.Findings {
		f := decode[findingJSON](t, string(raw))
		if !f.Passed && !f.Warning {
			bad = append(bad, f.Check+":"+f.Column+":"+f.Partition)
			if f.Observed != 1 || f.Limit != 0.01 {
				t.Errorf("finding %+v: want observed 1 (all null), limit 0.01", f)
			}
		}
	}
	want := []string{"not_null:amount:2026-11-21", "not_null:amount:2026-11-22", "not_null:amount:2026-11-23"}
	if strings.Join(bad, " ") != strings.Join(want, " ") || strings.Join(out.Broken, "..") != "2026-11-21..2026-11-23" {
		t.Errorf("gate failures = %v, want %v", bad, want)
	}

	// 2. Proofs: billing's INSERT OR IGNORE keeps stale rows; the query
	// jobs are proven.
	got := map[string]proofJSON{} // the first proof of each dataset
	for _, p := range out.Proofs {
		if _, ok := got[p.Dataset]; !ok {
			got[p.Dataset] = p
		}
	}
	if p := got["revenue_daily"]; p.Passed || p.Failure != "depends_on_prior" {
		t.Errorf("revenue_daily proof = %+v, want a depends_on_prior failure", p)
	}
	if !got["sessions"].Passed || !got["events_daily"].Passed {
		t.Errorf("query jobs not proven: %+v", out.Proofs)
	}
	if out.Repaired < 500 {
		t.Errorf("repaired %d rows", out.Repaired)
	}

	// 3. Three plans, three tiers.
	if len(out.Plans) != 3 {
		t.Fatalf("%d plans, want 3", len(out.Plans))
	}
	for i, tier := range []string{"auto", "semi-auto", "manual"} {
		if p := out.Plans[i]; p.Tier != tier || !p.Gate.Passed {
			t.Errorf("plan %d: tier %s gate %v, want %s and a passing gate (%q)", i+1, p.Tier, p.Gate.Passed, tier, p.Reasons)
		}
	}
	if out.Plans[0].Status != "ready" {
		t.Errorf("the auto plan's status is %s, want ready", out.Plans[0].Status)
	}
	if !strings.Contains(strings.Join(out.Plans[1].Reasons, ";"), "range is 14 days, over the auto limit of 7") {
		t.Errorf("plan 2 reasons: %q", out.Plans[1].Reasons)
	}
	// The manual plan rebuilds everything downstream of the source, in
	// lineage order, with honest counts.
	p := out.Plans[2]
	var names []string
	for _, s := range p.Steps {
		names = append(names, fmt.Sprintf("%s:%d", s.Dataset, s.Order))
	}
	if got := strings.Join(names, " "); got != "events_daily:1 sessions:1 partner_feed:2 revenue_daily:2" {
		t.Errorf("steps = %s", got)
	}
	for _, pp := range p.Steps[0].Partitions {
		if *pp.CurrentRows != 1 || *pp.ExpectedRows != 5 || pp.ExpectedMethod != "query" {
			t.Errorf("events_daily %s: current %d expected %d (%s), want 1 -> 5 (query)", pp.Partition, *pp.CurrentRows, *pp.ExpectedRows, pp.ExpectedMethod)
		}
	}
	for _, pp := range p.Steps[3].Partitions {
		// Downstream of events_daily, which the plan rebuilds: counted by
		// rehearsing the plan in order (its INSERT OR IGNORE keeps the one
		// row there is).
		if pp.ExpectedMethod != "rehearsal" || *pp.ExpectedRows != 1 || *pp.CurrentRows != 1 {
			t.Errorf("revenue_daily %s: %d -> %d (%s), want 1 -> 1 (rehearsal)", pp.Partition, *pp.CurrentRows, *pp.ExpectedRows, pp.ExpectedMethod)
		}
	}
	reasons := strings.Join(p.Reasons, ";")
	if p.Tier != "manual" || !strings.Contains(reasons, "revenue_daily is tagged billing") || !strings.Contains(reasons, "partner_feed is tagged external") {
		t.Errorf("manual reasons: %q", p.Reasons)
	}
}

// TestDemoRunsItsPlans checks the second half of the demo: every plan runs,
// the manual one through its checklist, a rollback, a fixed billing job
// and a redo that signs off.
func TestDemoRunsItsPlans(t *testing.T) {
	t.Parallel()
	eachEngine(t, testDemoRunsItsPlans)
}

func testDemoRunsItsPlans(t *testing.T, engine string) {
	r := run(t, t.TempDir(), nil, "demo", "d", "--warehouse", engine, "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	type digest struct {
		Rows     int64  `json:"rows"`
		Checksum string `json:"checksum"`
	}
	out := decode[struct {
		Plans []planJSON `json:"plans"`
		Runs  []struct {
			PlanID    string `json:"plan_id"`
			Status    string `json:"status"`
			Total     int    `json:"partitions"`
			Published int    `json:"published"`
			Flagged   int    `json:"flagged"`
			Rows      []struct {
				Dataset   string  `json:"dataset"`
				Partition string  `json:"partition"`
				Before    *digest `json:"before"`
				After     *digest `json:"after"`
				Expected  *int64  `json:"expected_rows"`
			} `json:"rows"`
		} `json:"runs"`
		Proofs     []proofJSON `json:"proofs"`
		RolledBack string      `json:"rolled_back"`
		Redo       string      `json:"redo"`
		History    []struct {
			PlanID string `json:"plan_id"`
			Status string `json:"status"`
		} `json:"history"`
		Audit int `json:"audit_entries"`
	}](t, r.stdout)
	if len(out.Runs) != 4 {
		t.Fatalf("%d runs, want auto, semi-auto, manual and the redo", len(out.Runs))
	}
	for _, run := range out.Runs {
		if run.Status != "applied" || run.Published != run.Total || run.Flagged != 0 {
			t.Errorf("run %s: %s, %d of %d published, %d flagged", run.PlanID, run.Status, run.Published, run.Total, run.Flagged)
		}
	}
	// The manual run repaired the aggregate but not billing; the redo, with
	// the fixed job, repaired billing too.
	for i, run := range out.Runs[2:] {
		for _, row := range run.Rows {
			changed := row.Before.Checksum != row.After.Checksum
			switch {
			case row.Dataset == "events_daily" && (row.Before.Rows != 1 || row.After.Rows != 5):
				t.Errorf("run %d events_daily %s: %d -> %d rows, want 1 -> 5", i, row.Partition, row.Before.Rows, row.After.Rows)
			case row.Dataset == "revenue_daily" && changed != (i == 1):
				t.Errorf("run %d revenue_daily %s: checksum changed %v", i, row.Partition, changed)
			}
		}
	}
	if out.RolledBack != out.Plans[2].ID || out.Redo == "" {
		t.Errorf("rolled back %q (want the manual plan %q), redo %q", out.RolledBack, out.Plans[2].ID, out.Redo)
	}
	if last := out.Proofs[len(out.Proofs)-1]; last.Dataset != "revenue_daily" || !last.Passed {
		t.Errorf("the fixed billing job's proof: %+v", last)
	}
	var hist []string
	for _, h := range out.History {
		hist = append(hist, h.Status)
	}
	if strings.Join(hist, ",") != "blocked,rolled_back,applied" {
		t.Errorf("history of revenue_daily: %v", hist)
	}
	if out.Audit < 50 {
		t.Errorf("audit entries: %d", out.Audit)
	}
}

func TestPlanShowPlansRoundTrip(t *testing.T) {
	t.Parallel()
	d := setup(t)
	r := run(t, d, nil, "plan", "sessions", "--from", "2026-11-25", "--to", "2026-11-27", "--reason", "late events", "--as", "bob", "-o", "json")
	if r.code != 0 {
		t.Fatalf("plan: exit %d %s", r.code, r.stderr)
	}
	p := decode[planJSON](t, r.stdout)
	// The demo proved sessions, so a 3-day plan of it is auto.
	if p.Tier != "auto" || p.Status != "ready" || p.Request.RequestedBy != "bob" || !strings.HasPrefix(p.Hash, "sha256:") {
		t.Errorf("plan = %+v", p)
	}
	if len(p.Steps) != 1 || len(p.Steps[0].Partitions) != 3 {
		t.Fatalf("steps = %+v", p.Steps)
	}
	for _, pp := range p.Steps[0].Partitions {
		// sessions is built by exactly its own query, so now == expected.
		if pp.CurrentRows == nil || *pp.CurrentRows == 0 || *pp.CurrentRows != *pp.ExpectedRows {
			t.Errorf("%s: %v -> %v", pp.Partition, pp.CurrentRows, pp.ExpectedRows)
		}
	}
	for i := 0; i < 2; i++ {
		s := run(t, d, nil, "show", p.ID, "-o", "json")
		if s.code != 0 {
			t.Fatalf("show: %d %s", s.code, s.stderr)
		}
		if got := decode[planJSON](t, s.stdout); got.Hash != p.Hash || got.ID != p.ID {
			t.Errorf("show gives hash %s, plan gave %s", got.Hash, p.Hash)
		}
	}
	text := run(t, d, nil, "show", p.ID)
	for _, want := range []string{"Plan " + p.ID, "~ sessions  query job -> sessions", "2026-11-25", "Tier: AUTO", "refill apply " + p.ID} {
		if !strings.Contains(text.stdout, want) {
			t.Errorf("show text lacks %q:\n%s", want, text.stdout)
		}
	}
	list := decode[[]struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}](t, run(t, d, nil, "plans", "-o", "json").stdout)
	if len(list) != 7 || list[0].ID != p.ID {
		t.Errorf("plans = %+v, want the demo's 6 (the watcher's among them) and this one, newest first", list)
	}
	ready := decode[[]json.RawMessage](t, run(t, d, nil, "plans", "--status", "ready", "-o", "json").stdout)
	if len(ready) != 1 {
		t.Errorf("ready plans: %d, want this one (the demo ran its own)", len(ready))
	}
	// Editing the job makes the proof stale: the same request is semi-auto.
	cfg, err := os.ReadFile(filepath.Join(d, "refill.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(cfg), "count(*) AS events,", "count(*) AS events, -- edited\n", 1)
	if err := os.WriteFile(filepath.Join(d, "refill.yaml"), []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	r = run(t, d, nil, "plan", "sessions", "--from", "2026-11-25", "--to", "2026-11-27", "--reason", "late events", "--as", "bob", "-o", "json")
	stale := decode[planJSON](t, r.stdout)
	if stale.Tier != "semi-auto" || !strings.Contains(strings.Join(stale.Reasons, ";"), "idempotency proof is stale for sessions") {
		t.Errorf("after editing the job: %s %q", stale.Tier, stale.Reasons)
	}
}

func TestLineageText(t *testing.T) {
	t.Parallel()
	d := setup(t)
	r := run(t, d, nil, "lineage", "events_daily", "--format", "mermaid")
	if r.code != 0 {
		t.Fatal(r.stderr)
	}
	for _, want := range []string{"flowchart LR", "events_raw --> events_daily", "events_daily --> revenue_daily", "class events_daily target"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("mermaid lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "sessions") {
		t.Error("sessions is not in events_daily's neighbourhood")
	}
	dot := run(t, d, nil, "lineage", "--format", "dot")
	if !strings.Contains(dot.stdout, `"events_raw" -> "sessions"`) {
		t.Errorf("dot: %s", dot.stdout)
	}
}

// TestBadInput checks every bad input exits with its code, says what and
// where, and stores nothing.
func TestBadInput(t *testing.T) {
	t.Parallel()
	d := setup(t)
	count := func() int {
		return len(decode[[]json.RawMessage](t, run(t, d, nil, "plans", "-o", "json").stdout))
	}
	before := count()
	plan := func(extra ...string) []string {
		return append([]string{"plan", "--reason", "x", "--as", "alice"}, extra...)
	}
	writeConfig := func(name, body string) string {
		p := filepath.Join(d, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base, err := os.ReadFile(filepath.Join(d, "refill.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	missingTable := writeConfig("missing-table.yaml", strings.Replace(string(base), "table: sessions", "table: sessionz", 1))
	missingCol := writeConfig("missing-col.yaml", strings.Replace(string(base), "partition: {column: event_date, grain: day}", "partition: {column: evt_date, grain: day}", 1))
	malformed := writeConfig("malformed.yaml", "version: 1\nwarehouse: sqlite:warehouse.db\ndatasets:\n  a: [unclosed\n")
	injection := writeConfig("inject.yaml", strings.Replace(string(base), "table: events_raw", "table: \"events; DROP TABLE x\"", 1))
	unreachable := writeConfig("unreachable.yaml", strings.Replace(string(base), "warehouse: sqlite:warehouse.db", "warehouse: postgres://refill:s3cr3tpw@127.0.0.1:1/wh?sslmode=disable&connect_timeout=2", 1))

	cases := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"unknown dataset", plan("nope", "--from", "2026-11-01", "--to", "2026-11-02"), 2, []string{`unknown dataset "nope"`, "known:"}},
		{"from after to", plan("sessions", "--from", "2026-11-05", "--to", "2026-11-02"), 2, []string{"--from 2026-11-05 is after --to 2026-11-02"}},
		{"impossible date", plan("sessions", "--from", "2026-02-30", "--to", "2026-03-02"), 2, []string{`"2026-02-30" is not a valid date`}},
		{"range too long", plan("sessions", "--from", "2000-01-01", "--to", "2026-11-02"), 2, []string{"over the maximum of 3660"}},
		{"no reason", []string{"plan", "sessions", "--from", "2026-11-01", "--to", "2026-11-02", "--as", "alice"}, 2, []string{"--reason is required"}},
		{"unknown user", plan("sessions", "--from", "2026-11-01", "--to", "2026-11-02", "--as", "mallory"), 4, []string{`unknown user "mallory"`}},
		{"missing table", append(plan("sessions", "--from", "2026-11-01", "--to", "2026-11-02"), "--config", missingTable), 2, []string{"table sessionz does not exist", "missing-table.yaml"}},
		{"missing partition column", append(plan("sessions", "--from", "2026-11-01", "--to", "2026-11-02"), "--config", missingCol), 2, []string{`no partition column "evt_date"`}},
		{"malformed yaml", append(plan("sessions", "--from", "2026-11-01", "--to", "2026-11-02"), "--config", malformed), 2, []string{"malformed.yaml:"}},
		{"sql injection identifier", append(plan("sessions", "--from", "2026-11-01", "--to", "2026-11-02"), "--config", injection), 2, []string{"inject.yaml:", "events; DROP TABLE x"}},
		{"bad output flag", []string{"plans", "-o", "yaml"}, 2, []string{"want text or json"}},
		{"unknown flag", []string{"plans", "--frobnicate"}, 2, []string{"frobnicate"}},
		{"unknown plan", []string{"show", "deadbeef"}, 2, []string{"deadbeef"}},
		{"unreachable warehouse", append(plan("sessions", "--from", "2026-11-01", "--to", "2026-11-02"), "--config", unreachable), 1, []string{"127.0.0.1:1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := run(t, d, nil, c.args...)
			if r.code != c.code {
				t.Fatalf("exit %d, want %d\nstderr: %s", r.code, c.code, r.stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
			if strings.Contains(r.stderr, "s3cr3tpw") {
				t.Errorf("the password leaked: %s", r.stderr)
			}
			if strings.Contains(r.stderr, "goroutine") || strings.Contains(r.stderr, "panic") {
				t.Errorf("a Go stack reached the user: %s", r.stderr)
			}
		})
	}
	if after := count(); after != before {
		t.Errorf("bad input stored plans: %d before, %d after", before, after)
	}
	// With -o json the error is one JSON document on stdout.
	r := run(t, d, nil, append(plan("nope", "--from", "2026-11-01", "--to", "2026-11-02"), "-o", "json")...)
	e := decode[struct {
		Error string `json:"error"`
		Code  int    `json:"code"`
	}](t, r.stdout)
	if e.Code != 2 || !strings.Contains(e.Error, "nope") {
		t.Errorf("json error = %+v", e)
	}
}

// TestVersion: refill --version prints one line from the binary's build
// information, and refill version -o json the same as a document.
func TestVersion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	line := step(t, dir, 0, "refill ", "--version").stdout
	v := decode[struct {
		Version string `json:"version"`
		Go      string `json:"go"`
		Module  string `json:"module"`
	}](t, step(t, dir, 0, "", "version", "-o", "json").stdout)
	if v.Module != "github.com/refill-dev/refill" || !strings.HasPrefix(v.Go, "go") || !strings.HasPrefix(line, "refill "+v.Version) || strings.Count(line, "\n") != 1 {
		t.Errorf("--version %q, version -o json %+v", line, v)
	}
}

// flagSet reports whether the command line set the flag name.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// pgSchema is pgtest.Schema for a binary test, which first waits for one
// of pgTurns: each refill process these tests start holds its own pools
// on the one PostgreSQL server, and eight such tests at once (twice that
// with another suite beside) would pass its max_connections. A test takes
// one turn however many schemas it makes, and gives it back when it ends.
func pgSchema(t *testing.T) string {
	t.Helper()
	if _, had := pgHolding.LoadOrStore(t.Name(), true); !had {
		pgTurns <- struct{}{}
		t.Cleanup(func() {
			pgHolding.Delete(t.Name())
			<-pgTurns
		})
	}
	return pgtest.Schema(t)
}

var (
	pgTurns   = make(chan struct{}, 3)
	pgHolding sync.Map
)
