package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDryRunCountsDownstreamAfterTheUpstream: raw → mid → top of query
// jobs, with mid and top stale. The approver must see top go 1 -> 5, as the
// run will make it, not "1 -> 1 =" counted against today's mid; and a job
// behind a command (whose output refill cannot see ahead) is unknown, never
// "no change", and unknown in the totals too.
func TestDryRunCountsDownstreamAfterTheUpstream(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(dir, "wh.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"CREATE TABLE raw (day TEXT, v INTEGER)",
		"CREATE TABLE mid (day TEXT, v INTEGER)",
		"CREATE TABLE top (day TEXT, v INTEGER)",
		"CREATE TABLE behind (day TEXT, v INTEGER)",
		"CREATE TABLE sqldown (day TEXT, v INTEGER)",
		"INSERT INTO sqldown VALUES ('2026-11-02', 7)",
		"INSERT INTO raw VALUES ('2026-11-02', 1), ('2026-11-02', 2), ('2026-11-02', 3), ('2026-11-02', 4), ('2026-11-02', 5)",
		"INSERT INTO mid VALUES ('2026-11-02', 1)",
		"INSERT INTO top VALUES ('2026-11-02', 1)",
		"INSERT INTO behind VALUES ('2026-11-02', 1)",
	} {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	cfg := `version: 1
warehouse: sqlite:wh.db
datasets:
  raw: {table: raw, partition: {column: day}}
  mid:
    table: mid
    partition: {column: day}
    upstream: [raw]
    job: {query: "SELECT day, v FROM raw WHERE day = :partition"}
  top:
    table: top
    partition: {column: day}
    upstream: [mid]
    job: {query: "SELECT day, v FROM mid WHERE day = :partition"}
  sqldown:
    table: sqldown
    partition: {column: day}
    upstream: [mid]
    job: {sql: "DELETE FROM sqldown WHERE day = :partition; INSERT INTO sqldown SELECT day, v FROM mid WHERE day = :partition"}
  export:
    upstream: [raw]
    job: {command: ["true"]}
  behind:
    table: behind
    partition: {column: day}
    upstream: [export]
    job: {query: "SELECT day, v FROM raw WHERE day = :partition"}
`
	if err := os.WriteFile(filepath.Join(dir, "refill.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	r := step(t, dir, 0, "", "plan", "raw", "--from", "2026-11-02", "--to", "2026-11-02", "--reason", "stale chain", "--as", "alice")
	for _, want := range []string{
		`(?m)^\s+2026-11-02\s+1\s+->\s+5\s+\+4 .*rehearsal`,           // top, counted after mid
		`(?m)sqldown.*\n\s+2026-11-02\s+1\s+->\s+5\s+\+4 .*rehearsal`, // an sql job downstream too
		`(?m)^\s+2026-11-02\s+1\s+->\s+\?\s+depends_on_upstream\s*$`,  // behind the command
		`expected after ≥ 15 \(\+ 2 partitions unknown\)`,
	} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("the dry run lacks %s:\n%s", want, r.stdout)
		}
	}
	if regexp.MustCompile(`(?m)^\s+2026-11-02\s+1\s+->\s+1\s+=`).MatchString(r.stdout) {
		t.Errorf("the dry run shows \"no change\" where the run changes rows:\n%s", r.stdout)
	}
}

// TestPolicyRulesAreCheckedAtLoad: a misspelled field in a rule is a config
// error naming the file and line, before any plan is made.
func TestPolicyRulesAreCheckedAtLoad(t *testing.T) {
	t.Parallel()
	d := setup(t)
	restore := editConfig(t, d, "request.requested_by == 'watcher'", "request.requester == 'watcher'")
	defer restore()
	r := run(t, d, nil, "plan", "sessions", "--from", "2026-11-20", "--to", "2026-11-21", "--reason", "r", "--as", "alice")
	if r.code != 2 || !regexp.MustCompile(`refill\.yaml:\d+`).MatchString(r.stderr) || !regexp.MustCompile(`requester`).MatchString(r.stderr) {
		t.Fatalf("a misspelled rule field: exit %d\n%s", r.code, r.stderr)
	}
}

// TestDryRunCountsDownstreamThroughAView: raw → mid → v (a view, lineage
// only) → top. The view passes mid's rows through, so top must be rehearsed
// after mid and shown going 1 -> 5, as the run will make it, and the plan
// must not say that what reads the view reads its rows as they are. The
// view itself is compared before and after the rehearsal rebuilds mid,
// and listed as a view among what changes.
func TestDryRunCountsDownstreamThroughAView(t *testing.T) {
	t.Parallel()
	dir := smallProject(t, `version: 1
warehouse: sqlite:wh.db
datasets:
  raw: {table: raw, partition: {column: day}}
  mid:
    table: mid
    partition: {column: day}
    upstream: [raw]
    job: {query: "SELECT day, v FROM raw WHERE day = :partition"}
  v:
    table: v
    partition: {column: day}
    upstream: [mid]
    lineage_only: materialized as a view
  top:
    table: top
    partition: {column: day}
    upstream: [v]
    job: {query: "SELECT day, v FROM v WHERE day = :partition"}
`,
		"CREATE TABLE raw (day TEXT, v INTEGER)",
		"CREATE TABLE mid (day TEXT, v INTEGER)",
		"CREATE VIEW v AS SELECT day, v FROM mid",
		"CREATE TABLE top (day TEXT, v INTEGER)",
		"INSERT INTO raw VALUES ('2026-11-02', 1), ('2026-11-02', 2), ('2026-11-02', 3), ('2026-11-02', 4), ('2026-11-02', 5)",
		"INSERT INTO mid VALUES ('2026-11-02', 1)",
		"INSERT INTO top VALUES ('2026-11-02', 1)",
	)
	r := step(t, dir, 0, "", "plan", "raw", "--from", "2026-11-02", "--to", "2026-11-02", "--reason", "stale chain", "--as", "alice")
	for _, want := range []string{
		`(?m)~ top .*\n\s+2026-11-02\s+1\s+->\s+5\s+\+4 .*rehearsal  4 rows added, v 1 → 15\n\s+expected: counted after the plan rebuilds mid, read through v \(materialized as a view\), which passes its upstream's rows through`,
		`expected after 10\n`,
		`(?m)^  ~ v \(view\)\s+1 of 1 partition changes \(4 rows added, v 1 → 15\)$`,
	} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("the dry run lacks %s:\n%s", want, r.stdout)
		}
	}
	for _, bad := range []string{`(?m)^\s+2026-11-02\s+1\s+->\s+1\s+=`, `as they are`} {
		if regexp.MustCompile(bad).MatchString(r.stdout) {
			t.Errorf("the dry run shows %s where the view passes the rebuilt rows through:\n%s", bad, r.stdout)
		}
	}
	js := decode[planJSON](t, step(t, dir, 0, "", "plan", "raw", "--from", "2026-11-02", "--to", "2026-11-02", "--reason", "again", "--as", "alice", "-o", "json").stdout)
	for _, s := range js.Steps {
		if s.Dataset == "top" && (s.Partitions[0].ExpectedRows == nil || *s.Partitions[0].ExpectedRows != 5 || s.Partitions[0].ExpectedMethod != "rehearsal") {
			t.Errorf("top in -o json: %s rows by %s, want 5 by rehearsal", rowsOf(s.Partitions[0].ExpectedRows), s.Partitions[0].ExpectedMethod)
		}
	}
	// The view's diff in the plan JSON, as scripts read it.
	var views struct {
		Changed []struct {
			Dataset    string `json:"dataset"`
			Partitions []struct {
				Partition string `json:"partition"`
				Diff      struct {
					OnlyNew   int64 `json:"only_new"`
					Unchanged int64 `json:"unchanged"`
				} `json:"diff"`
			} `json:"partitions"`
		} `json:"changed_views"`
	}
	if err := json.Unmarshal([]byte(step(t, dir, 0, "", "show", js.ID, "-o", "json").stdout), &views); err != nil {
		t.Fatal(err)
	}
	if c := views.Changed; len(c) != 1 || c[0].Dataset != "v" || len(c[0].Partitions) != 1 || c[0].Partitions[0].Partition != "2026-11-02" ||
		c[0].Partitions[0].Diff.OnlyNew != 4 || c[0].Partitions[0].Diff.Unchanged != 1 {
		t.Errorf("changed_views in -o json = %+v, want v 2026-11-02 with 4 rows only new and 1 unchanged", c)
	}
}

// TestDryRunSaysWhyARehearsalFailed: when rebuilding mid in the rehearsal
// fails (its table refuses the rows), top's rows cannot be counted after
// it: they depend on the upstream, and the approver is told why, in the
// text and in -o json.
func TestDryRunSaysWhyARehearsalFailed(t *testing.T) {
	t.Parallel()
	dir := smallProject(t, `version: 1
warehouse: sqlite:wh.db
datasets:
  raw: {table: raw, partition: {column: day}}
  mid:
    table: mid
    partition: {column: day}
    upstream: [raw]
    job: {query: "SELECT day, v FROM raw WHERE day = :partition"}
  top:
    table: top
    partition: {column: day}
    upstream: [mid]
    job: {query: "SELECT day, v FROM mid WHERE day = :partition"}
`,
		"CREATE TABLE raw (day TEXT, v INTEGER)",
		"CREATE TABLE mid (day TEXT, v INTEGER CHECK (v < 3))",
		"CREATE TABLE top (day TEXT, v INTEGER)",
		"INSERT INTO raw VALUES ('2026-11-02', 1), ('2026-11-02', 2), ('2026-11-02', 3), ('2026-11-02', 4), ('2026-11-02', 5)",
		"INSERT INTO mid VALUES ('2026-11-02', 1)",
		"INSERT INTO top VALUES ('2026-11-02', 1)",
	)
	r := step(t, dir, 0, "", "plan", "raw", "--from", "2026-11-02", "--to", "2026-11-02", "--reason", "stale chain", "--as", "alice")
	want := `(?m)~ top .*\n\s+2026-11-02\s+1\s+->\s+\?\s+depends_on_upstream\n\s+expected: the rehearsal that counts its rows after the upstream is rebuilt failed \(building mid 2026-11-02: .*CHECK constraint failed: v < 3.*\)`
	if !regexp.MustCompile(want).MatchString(r.stdout) {
		t.Errorf("the dry run lacks %s:\n%s", want, r.stdout)
	}
	p := decode[struct {
		Steps []struct {
			Dataset      string `json:"dataset"`
			ExpectedNote string `json:"expected_note"`
		} `json:"steps"`
	}](t, step(t, dir, 0, "", "plan", "raw", "--from", "2026-11-02", "--to", "2026-11-02", "--reason", "again", "--as", "alice", "-o", "json").stdout)
	for _, s := range p.Steps {
		switch {
		case s.Dataset == "top" && !strings.Contains(s.ExpectedNote, "CHECK constraint failed"):
			t.Errorf("top's expected_note in -o json: %q, want the rehearsal's failure", s.ExpectedNote)
		case s.Dataset == "mid" && s.ExpectedNote != "":
			t.Errorf("mid's own query counts it, yet it has a note: %q", s.ExpectedNote)
		}
	}
}

// TestHourHistoryKnowsTheWeek: a command job's hour-grain table is
// expected from its history, and Saturday 10:00 from Saturdays at 10:00
// (3 rows), not from the weekday mornings (7), the other Saturday hours
// (2) or the weeks' median (5).
func TestHourHistoryKnowsTheWeek(t *testing.T) {
	t.Parallel()
	var values []string
	start := time.Date(2026, 10, 31, 0, 0, 0, 0, time.UTC) // 28 days before the Saturday planned
	for ts := start; ts.Before(time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)); ts = ts.Add(time.Hour) {
		weekend := ts.Weekday() == time.Saturday || ts.Weekday() == time.Sunday
		n := 5
		switch {
		case weekend && ts.Hour() == 10:
			n = 3
		case weekend:
			n = 2
		case ts.Hour() == 10:
			n = 7
		}
		if ts.Weekday() == time.Sunday && ts.Hour() == 10 {
			n = 1 // Sunday is not Saturday either
		}
		for i := range n {
			values = append(values, fmt.Sprintf("('%s', %d)", ts.Format("2006-01-02T15"), i))
		}
	}
	dir := smallProject(t, `version: 1
warehouse: sqlite:wh.db
datasets:
  hourly:
    table: hourly
    partition: {column: hour, grain: hour}
    job: {command: ["true"]}
`,
		"CREATE TABLE hourly (hour TEXT, n INTEGER)",
		"INSERT INTO hourly VALUES "+strings.Join(values, ", "),
	)
	p := decode[planJSON](t, step(t, dir, 0, "", "plan", "hourly", "--from", "2026-11-28T10", "--to", "2026-11-28T10", "--reason", "lost hour", "--as", "alice", "-o", "json").stdout)
	if len(p.Steps) != 1 || len(p.Steps[0].Partitions) != 1 {
		t.Fatalf("plan of one hour: %+v", p.Steps)
	}
	pp := p.Steps[0].Partitions[0]
	if pp.Partition != "2026-11-28T10" || pp.ExpectedMethod != "history" || rowsOf(pp.ExpectedRows) != "3" || rowsOf(pp.CurrentRows) != "0" {
		t.Errorf("Saturday 10:00: %s %s -> %s by %s, want 0 -> 3 by history (Saturdays at 10:00)",
			pp.Partition, rowsOf(pp.CurrentRows), rowsOf(pp.ExpectedRows), pp.ExpectedMethod)
	}
}

// TestDryRunShowsWhatChanges: on the demo after its story, one day's
// purchase amount in events_daily is wrong with its rows all there (the
// incident counts cannot see). The dry run over that day and its
// neighbours lists exactly that partition as changed, by the configured
// key, with the column's sums as the warehouse computes them; the
// neighbours and billing (rebuilt from a correct upstream) unchanged; the
// partner export not diffed, and why; and the warehouse is untouched.
func TestDryRunShowsWhatChanges(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	db, err := sql.Open("sqlite", filepath.Join(dir, "warehouse.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const broken = "2026-11-15"
	if _, err := db.Exec(`UPDATE events_daily SET amount = 0 WHERE day = ? AND event_type = 'purchase'`, broken); err != nil {
		t.Fatal(err)
	}
	var oldSum, newSum, purchase float64
	if err := db.QueryRow(`SELECT sum(amount) FROM events_daily WHERE day = ?`, broken).Scan(&oldSum); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT coalesce(sum(amount), 0) FROM events_raw WHERE event_date = ?`, broken).Scan(&newSum); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT coalesce(sum(amount), 0) FROM events_raw WHERE event_date = ? AND event_type = 'purchase'`, broken).Scan(&purchase); err != nil {
		t.Fatal(err)
	}

	r := step(t, dir, 0, "", "plan", "events_daily", "--from", "2026-11-14", "--to", "2026-11-16", "--reason", "purchase amounts lost on one day", "--as", "alice", "-o", "json")
	type diffJSON struct {
		Skipped   string   `json:"skipped"`
		OnlyOld   int64    `json:"only_old"`
		OnlyNew   int64    `json:"only_new"`
		Changed   *int64   `json:"changed"`
		Unchanged int64    `json:"unchanged"`
		Key       []string `json:"key"`
		Columns   map[string]struct {
			OldSum  *float64 `json:"old_sum"`
			NewSum  *float64 `json:"new_sum"`
			Changed *int64   `json:"changed"`
		} `json:"columns"`
		Sample []struct {
			Old map[string]*string `json:"old"`
			New map[string]*string `json:"new"`
		} `json:"sample"`
	}
	plan := decode[struct {
		ID    string `json:"id"`
		Steps []struct {
			Dataset    string `json:"dataset"`
			Partitions []struct {
				Partition string    `json:"partition"`
				Diff      *diffJSON `json:"diff"`
			} `json:"partitions"`
		} `json:"steps"`
	}](t, r.stdout)
	got := map[string]*diffJSON{}
	for _, st := range plan.Steps {
		for _, pp := range st.Partitions {
			got[st.Dataset+" "+pp.Partition] = pp.Diff
		}
	}
	for _, part := range []string{"events_daily 2026-11-14", "events_daily 2026-11-16", "revenue_daily 2026-11-14", "revenue_daily 2026-11-15", "revenue_daily 2026-11-16"} {
		d := got[part]
		if d == nil || d.Skipped != "" || d.Changed == nil || *d.Changed != 0 || d.OnlyOld != 0 || d.OnlyNew != 0 || d.Unchanged == 0 {
			t.Errorf("%s: diff %+v, want unchanged", part, d)
		}
	}
	d := got["events_daily "+broken]
	if d == nil || d.Changed == nil || *d.Changed != 1 || d.OnlyOld != 0 || d.OnlyNew != 0 || d.Unchanged != 4 {
		t.Fatalf("events_daily %s: diff %+v, want 1 changed and 4 unchanged", broken, d)
	}
	if strings.Join(d.Key, ",") != "event_type" {
		t.Errorf("key %v, want the configured [event_type]", d.Key)
	}
	amount := d.Columns["amount"]
	near := func(p *float64, want float64) bool { return p != nil && *p > want-1e-6 && *p < want+1e-6 }
	if !near(amount.OldSum, oldSum) || !near(amount.NewSum, newSum) || amount.Changed == nil || *amount.Changed != 1 {
		t.Errorf("amount: %+v, want sums %v → %v and 1 row changed", amount, oldSum, newSum)
	}
	if ev := d.Columns["events"]; ev.Changed == nil || *ev.Changed != 0 {
		t.Errorf("events: %+v, want no row changed", ev)
	}
	if len(d.Sample) != 1 || d.Sample[0].Old == nil || d.Sample[0].New == nil || *d.Sample[0].Old["event_type"] != "purchase" {
		t.Fatalf("sample %+v, want the purchase row old and new", d.Sample)
	}
	if o, n := d.Sample[0].Old["amount"], d.Sample[0].New["amount"]; o == nil || *o != "0.0" || n == nil {
		t.Errorf("sample amount %v → %v, want 0.0 → the purchases' %v", o, n, purchase)
	} else if v, err := strconv.ParseFloat(*n, 64); err != nil || !near(&v, purchase) {
		t.Errorf("sample's new amount %s, want the purchases' %v", *n, purchase)
	}
	if fe := got["partner_feed "+broken]; fe == nil || !strings.Contains(fe.Skipped, "a command job writes outside the warehouse's transaction") {
		t.Errorf("partner_feed: %+v, want skipped with its reason", fe)
	}
	var after float64
	if err := db.QueryRow(`SELECT sum(amount) FROM events_daily WHERE day = ?`, broken).Scan(&after); err != nil || after != oldSum {
		t.Errorf("events_daily %s sums %v after the dry run (%v), want %v: the rehearsal must roll back", broken, after, err, oldSum)
	}

	// The text leads with it.
	text := step(t, dir, 0, "", "show", plan.ID).stdout
	for _, want := range []string{
		`(?m)^What changes`,
		`(?m)^  ~ events_daily\s+1 of 3 partitions changes \(1 row changed, amount [0-9,.]+ → [0-9,.]+\)$`,
		`(?m)^  = revenue_daily\s+unchanged \(3 partitions compared\)$`,
		`(?m)^\s+` + broken + `\s.*query  1 row changed, amount`,
		`(?m)^\s+event_type=purchase: amount 0.0 → `,
	} {
		if !regexp.MustCompile(want).MatchString(text) {
			t.Errorf("show lacks %s:\n%s", want, text)
		}
	}
	if i, j := strings.Index(text, "What changes"), strings.Index(text, "Source gate:"); i < 0 || i > j {
		t.Errorf("the change does not lead the plan:\n%s", text)
	}
}

// TestReportFlagsWhatTheDryRunDidNotForesee: the dry run found sessions
// unchanged; someone edits one of its partitions before the run, so the
// run does change it. Its row counts are as expected, so only the content
// diff can tell: apply and report exit 5 and name that partition alone.
func TestReportFlagsWhatTheDryRunDidNotForesee(t *testing.T) {
	t.Parallel()
	d := setup(t)
	id := func(r result) string { return decode[planJSON](t, r.stdout).ID }
	p := id(step(t, d, 0, "", "plan", "sessions", "--from", "2026-10-20", "--to", "2026-10-22", "--reason", "recompute", "--as", "alice", "-o", "json"))
	wh, err := sql.Open("sqlite", "file:"+filepath.Join(d, "warehouse.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	if _, err := wh.Exec(`UPDATE sessions SET events = events + 1 WHERE day = '2026-10-21' AND user_id = (SELECT min(user_id) FROM sessions WHERE day = '2026-10-21')`); err != nil {
		t.Fatal(err)
	}
	step(t, d, 0, "", "approve", p, "--as", "bob")
	r := step(t, d, 5, "1 partition(s) changed otherwise than the dry run's content diff foresaw", "apply", p, "--as", "alice")
	if strings.Contains(r.stderr, "differ from the plan's expectation") {
		t.Errorf("the row counts were as expected, yet: %s", r.stderr)
	}
	rep := step(t, d, 5, "", "report", p).stdout
	if !strings.Contains(rep, "! sessions 2026-10-21: the dry run foresaw no change, yet the run changed it") {
		t.Errorf("report does not name the partition:\n%s", rep)
	}
	if n := strings.Count(rep, "not as the dry run foresaw"); n != 1 {
		t.Errorf("%d partitions marked, want 1:\n%s", n, rep)
	}
	js := decode[struct {
		Mismatches int `json:"dry_run_mismatches"`
		Flagged    int `json:"flagged"`
	}](t, step(t, d, 5, "", "report", p, "-o", "json").stdout)
	if js.Mismatches != 1 || js.Flagged != 1 {
		t.Errorf("report -o json: %+v, want 1 mismatch, 1 flagged", js)
	}
}
