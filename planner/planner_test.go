package planner

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/internal/whtest"
	"github.com/refill-dev/refill/store"
)

// bundle is what a planner test works with: the planner over a real
// warehouse and store, and raw access to the warehouse for fixtures.
type bundle struct {
	p    *Planner
	db   *sql.DB
	st   *store.Store
	cfg  *refill.Config
	ph   func(n int) string
	name string
}

// each runs fn against every warehouse driver.
func each(t *testing.T, datasets map[string]*refill.Dataset, fixtures []string, fn func(t *testing.T, b *bundle)) {
	whtest.Each(t, func(t *testing.T, w *whtest.Warehouse) {
		w.Exec(t, fixtures...)
		ctx := context.Background()
		wh, db := w.WH, w.DB
		st, err := store.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "state.db"), "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		// Each driver gets its own copy: tests edit jobs.
		datasets := clone(datasets)
		for n, ds := range datasets {
			ds.Name = n
			if ds.Partition.Grain == "" {
				ds.Partition.Grain = refill.GrainDay
			}
		}
		cfg := &refill.Config{Policy: refill.DefaultPolicy(), Datasets: datasets}
		p, err := New(cfg, wh, st)
		if err != nil {
			t.Fatal(err)
		}
		p.Now = func() time.Time { return time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) }
		fn(t, &bundle{p: p, db: db, st: st, cfg: cfg, name: w.Driver})
	})
}

func clone(in map[string]*refill.Dataset) map[string]*refill.Dataset {
	out := map[string]*refill.Dataset{}
	for n, d := range in {
		c := *d
		if d.Job != nil {
			j := *d.Job
			c.Job = &j
		}
		out[n] = &c
	}
	return out
}

func req(targets string, from, to string) Request {
	return Request{Targets: strings.Split(targets, ","), From: from, To: to, Reason: "test", Actor: "alice"}
}

// seasonal inserts rows for every day of [from, to]: weekdays get weekday
// rows, weekends weekend rows.
func seasonal(table string, from, to time.Time, weekday, weekend int) []string {
	var out []string
	for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
		n := weekday
		if d.Weekday() == time.Saturday || d.Weekday() == time.Sunday {
			n = weekend
		}
		var vals []string
		for i := 0; i < n; i++ {
			vals = append(vals, fmt.Sprintf("('%s', %d)", d.Format("2006-01-02"), i))
		}
		out = append(out, fmt.Sprintf("INSERT INTO %s (day, v) VALUES %s", table, strings.Join(vals, ",")))
	}
	return out
}

func day(s string) time.Time {
	t, _ := time.Parse("2006-01-02", s)
	return t
}

func TestExpectedRows(t *testing.T) {
	t.Parallel()
	fixtures := append([]string{
		"CREATE TABLE src (day TEXT, v INTEGER)",
		"CREATE TABLE agg (day TEXT, v INTEGER)",
		"CREATE TABLE copy (day TEXT, v INTEGER)",
	}, seasonal("src", day("2026-10-01"), day("2026-11-29"), 10, 4)...)
	// agg holds 5 rows a weekday and 2 a weekend day in its history, and a
	// broken 1 row on 2026-11-25 (a Wednesday).
	fixtures = append(fixtures, seasonal("agg", day("2026-10-01"), day("2026-11-24"), 5, 2)...)
	fixtures = append(fixtures, "INSERT INTO agg (day, v) VALUES ('2026-11-25', 0)")
	fixtures = append(fixtures, seasonal("copy", day("2026-11-20"), day("2026-11-29"), 10, 4)...)
	datasets := map[string]*refill.Dataset{
		"src": {Table: "src", Partition: refill.PartitionSpec{Column: "day"}},
		"agg": {Table: "agg", Partition: refill.PartitionSpec{Column: "day"}, Upstream: []string{"src"},
			Job: &refill.Job{Kind: refill.JobSQL, SQL: "DELETE FROM agg WHERE day = :partition"}},
		"copy": {Table: "copy", Partition: refill.PartitionSpec{Column: "day"}, Upstream: []string{"agg"},
			Job: &refill.Job{Kind: refill.JobQuery, Query: "SELECT day, v FROM src WHERE day = :partition AND v < 3"}},
		"feed": {Upstream: []string{"agg"}, Job: &refill.Job{Kind: refill.JobCommand, Command: []string{"true"}}},
	}
	each(t, datasets, fixtures, func(t *testing.T, b *bundle) {
		// 2026-11-25 is a Wednesday, 11-28 a Saturday, 11-30 has no data.
		plan, err := b.p.Plan(context.Background(), req("agg", "2026-11-25", "2026-11-30"))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, s := range plan.Steps {
			for _, pp := range s.Partitions {
				got[s.Dataset+" "+pp.Partition] = fmt.Sprintf("%s->%s %s", rowsOf(pp.CurrentRows), rowsOf(pp.ExpectedRows), pp.ExpectedMethod)
			}
		}
		want := map[string]string{
			"agg 2026-11-25":  "1->5 history",    // a Wednesday: the median of four Wednesdays
			"agg 2026-11-28":  "0->2 history",    // a Saturday: weekends are not weekdays
			"agg 2026-11-30":  "0->5 history",    // a Monday
			"copy 2026-11-25": "10->3 rehearsal", // downstream of a rebuilt agg: counted after it, in a rolled-back rehearsal
			"copy 2026-11-28": "4->3 rehearsal",  //
			"copy 2026-11-30": "0->0 rehearsal",  // no source rows yet
			"feed 2026-11-25": "?->? unknown",    // a command with no table
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s = %s, want %s", k, got[k], v)
			}
		}
		if len(plan.Steps) != 3 || plan.Steps[0].Dataset != "agg" || plan.Steps[0].Order != 1 || plan.Steps[1].Order != 2 {
			t.Errorf("steps = %v", plan.Datasets())
		}
		if strings.Join(plan.Sources, ",") != "src" {
			t.Errorf("sources = %v", plan.Sources)
		}
		// The query job left no trace: copy still holds what it held.
		var n int
		if err := b.db.QueryRow("SELECT count(*) FROM copy").Scan(&n); err != nil || n != 10*6+4*4 {
			t.Errorf("copy has %d rows (err %v), want the fixture's 76", n, err)
		}
	})
}

func rowsOf(n *int64) string {
	if n == nil {
		return "?"
	}
	return fmt.Sprint(*n)
}

func TestHashIsCanonical(t *testing.T) {
	t.Parallel()
	datasets := map[string]*refill.Dataset{
		"src": {Table: "src", Partition: refill.PartitionSpec{Column: "day"}},
		"a": {Table: "a", Partition: refill.PartitionSpec{Column: "day"}, Upstream: []string{"src"},
			Job: &refill.Job{Kind: refill.JobQuery, Query: "SELECT day, v FROM src WHERE day = :partition"}},
	}
	fixtures := append([]string{"CREATE TABLE src (day TEXT, v INTEGER)", "CREATE TABLE a (day TEXT, v INTEGER)"},
		seasonal("src", day("2026-11-01"), day("2026-11-05"), 3, 1)...)
	each(t, datasets, fixtures, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		p1, err := b.p.Plan(ctx, req("a", "2026-11-01", "2026-11-03"))
		if err != nil {
			t.Fatal(err)
		}
		p2, err := b.p.Plan(ctx, req("a", "2026-11-01", "2026-11-03"))
		if err != nil {
			t.Fatal(err)
		}
		if p1.ID == p2.ID || p1.Hash != p2.Hash {
			t.Errorf("same inputs: ids %s %s (want different), hashes %s %s (want equal)", p1.ID, p2.ID, p1.Hash, p2.Hash)
		}
		loaded, err := b.st.Plan(ctx, p1.ID)
		if err != nil {
			t.Fatal(err)
		}
		if loaded.Hash != p1.Hash || loaded.ComputeHash() != p1.Hash {
			t.Errorf("stored hash %s, recomputed %s, want %s", loaded.Hash, loaded.ComputeHash(), p1.Hash)
		}
		// Any change in what the plan decided from changes the hash: new
		// rows in the source change the query's expected count.
		if _, err := b.db.Exec("INSERT INTO src (day, v) VALUES ('2026-11-02', 99)"); err != nil {
			t.Fatal(err)
		}
		p3, err := b.p.Plan(ctx, req("a", "2026-11-01", "2026-11-03"))
		if err != nil {
			t.Fatal(err)
		}
		if p3.Hash == p1.Hash {
			t.Error("a plan over changed inputs has the same hash")
		}
		// So does a changed job definition (its fingerprint).
		b.cfg.Datasets["a"].Job.Query = "SELECT day, v FROM src WHERE day = :partition AND v >= 0"
		p4, err := b.p.Build(ctx, req("a", "2026-11-01", "2026-11-03"))
		if err != nil {
			t.Fatal(err)
		}
		if p4.Hash == p3.Hash || p4.Steps[0].Fingerprint == p3.Steps[0].Fingerprint {
			t.Error("a changed job left the hash or fingerprint unchanged")
		}
	})
}

func TestHourGrain(t *testing.T) {
	t.Parallel()
	datasets := map[string]*refill.Dataset{
		"clicks": {Table: "clicks", Partition: refill.PartitionSpec{Column: "hour", Grain: refill.GrainHour}},
		"hourly": {Table: "hourly", Partition: refill.PartitionSpec{Column: "hour", Grain: refill.GrainHour}, Upstream: []string{"clicks"},
			Job: &refill.Job{Kind: refill.JobQuery, Query: "SELECT hour, count(*) AS n FROM clicks WHERE hour = :partition GROUP BY hour"}},
	}
	fixtures := []string{
		"CREATE TABLE clicks (hour TEXT, id INTEGER)",
		"CREATE TABLE hourly (hour TEXT, n INTEGER)",
		"INSERT INTO clicks VALUES ('2026-11-02T13', 1), ('2026-11-02T13', 2), ('2026-11-02T14', 3)",
		"INSERT INTO hourly VALUES ('2026-11-02T13', 2)",
	}
	each(t, datasets, fixtures, func(t *testing.T, b *bundle) {
		plan, err := b.p.Build(context.Background(), req("hourly", "2026-11-02T12", "2026-11-02T14"))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, pp := range plan.Steps[0].Partitions {
			got = append(got, fmt.Sprintf("%s:%s->%s", pp.Partition, rowsOf(pp.CurrentRows), rowsOf(pp.ExpectedRows)))
		}
		if s := strings.Join(got, " "); s != "2026-11-02T12:0->0 2026-11-02T13:1->1 2026-11-02T14:0->1" {
			t.Errorf("partitions = %s", s)
		}
		if plan.Request.Days != 1 {
			t.Errorf("days = %d, want 1 (the hours touch one day)", plan.Request.Days)
		}
	})
}

func TestNothingToRebuild(t *testing.T) {
	t.Parallel()
	datasets := map[string]*refill.Dataset{"src": {Table: "src", Partition: refill.PartitionSpec{Column: "day"}}}
	each(t, datasets, []string{"CREATE TABLE src (day TEXT)"}, func(t *testing.T, b *bundle) {
		_, err := b.p.Build(context.Background(), req("src", "2026-11-01", "2026-11-02"))
		if refill.ExitCode(err) != refill.ExitBadInput || !strings.Contains(err.Error(), "nothing to rebuild") {
			t.Errorf("err = %v", err)
		}
	})
}

// TestDownstreamExpectationsFollowThePlan: raw → mid → top of query jobs,
// with mid and top stale. Counted against today's mid, top would read
// "1 -> 1, no change"; counted as mid will be after the plan, it reads 5.
// Behind a command job the count cannot be known and says so.
func TestDownstreamExpectationsFollowThePlan(t *testing.T) {
	t.Parallel()
	fixtures := []string{
		"CREATE TABLE raw (day TEXT, v INTEGER)",
		"CREATE TABLE mid (day TEXT, v INTEGER)",
		"CREATE TABLE top (day TEXT, v INTEGER)",
		"CREATE TABLE after_cmd (day TEXT, v INTEGER)",
		"INSERT INTO raw VALUES ('2026-11-02', 1), ('2026-11-02', 2), ('2026-11-02', 3), ('2026-11-02', 4), ('2026-11-02', 5)",
		"INSERT INTO mid VALUES ('2026-11-02', 1)",
		"INSERT INTO top VALUES ('2026-11-02', 1)",
	}
	datasets := map[string]*refill.Dataset{
		"raw": {Table: "raw", Partition: refill.PartitionSpec{Column: "day"}},
		"mid": {Table: "mid", Partition: refill.PartitionSpec{Column: "day"}, Upstream: []string{"raw"},
			Job: &refill.Job{Kind: refill.JobQuery, Query: "SELECT day, v FROM raw WHERE day = :partition"}},
		"top": {Table: "top", Partition: refill.PartitionSpec{Column: "day"}, Upstream: []string{"mid"},
			Job: &refill.Job{Kind: refill.JobQuery, Query: "SELECT day, v FROM mid WHERE day = :partition"}},
		"cmd": {Upstream: []string{"raw"}, Job: &refill.Job{Kind: refill.JobCommand, Command: []string{"true"}}},
		"after_cmd": {Table: "after_cmd", Partition: refill.PartitionSpec{Column: "day"}, Upstream: []string{"cmd"},
			Job: &refill.Job{Kind: refill.JobQuery, Query: "SELECT day, v FROM raw WHERE day = :partition"}},
	}
	each(t, datasets, fixtures, func(t *testing.T, b *bundle) {
		plan, err := b.p.Plan(context.Background(), req("raw", "2026-11-02", "2026-11-02"))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, s := range plan.Steps {
			pp := s.Partitions[0]
			got[s.Dataset] = fmt.Sprintf("%s->%s %s", rowsOf(pp.CurrentRows), rowsOf(pp.ExpectedRows), pp.ExpectedMethod)
		}
		want := map[string]string{
			"mid":       "1->5 query",
			"top":       "1->5 rehearsal",
			"after_cmd": "0->? depends_on_upstream",
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s = %s, want %s", k, got[k], v)
			}
		}
		for _, s := range plan.Steps {
			if s.Dataset == "after_cmd" && !strings.Contains(s.ExpectedNote, "what cmd will write") {
				t.Errorf("after_cmd depends on the upstream without saying why: note %q", s.ExpectedNote)
			}
		}
		// The rehearsal left nothing behind.
		var n int
		if err := b.db.QueryRow("SELECT count(*) FROM top").Scan(&n); err != nil || n != 1 {
			t.Errorf("top after planning: %d rows (%v), want 1", n, err)
		}
	})
}

// TestDownstreamExpectationsReadThroughAView: raw → mid → mid_v (a view,
// lineage only) → top. The view passes mid's rows through, on every
// warehouse: top is rehearsed after mid and counted 5, and its note says
// it was read through the view (not through raw_v, a view of a source the
// plan does not rebuild). An unpartitioned table in the same place
// keeps its rows, so what reads it is counted as it is.
func TestDownstreamExpectationsReadThroughAView(t *testing.T) {
	t.Parallel()
	fixtures := []string{
		"CREATE TABLE raw (day TEXT, v INTEGER)",
		"CREATE TABLE mid (day TEXT, v INTEGER)",
		"CREATE VIEW mid_v AS SELECT day, v FROM mid",
		"CREATE VIEW raw_v AS SELECT day, v FROM raw",
		"CREATE TABLE mid_copy AS SELECT day, v FROM mid",
		"CREATE TABLE top (day TEXT, v INTEGER)",
		"CREATE TABLE from_copy (day TEXT, v INTEGER)",
		"INSERT INTO raw VALUES ('2026-11-02', 1), ('2026-11-02', 2), ('2026-11-02', 3), ('2026-11-02', 4), ('2026-11-02', 5)",
		"INSERT INTO mid VALUES ('2026-11-02', 1)",
		"INSERT INTO mid_copy VALUES ('2026-11-02', 1)",
		"INSERT INTO top VALUES ('2026-11-02', 1)",
		"INSERT INTO from_copy VALUES ('2026-11-02', 1)",
	}
	datasets := map[string]*refill.Dataset{
		"raw": {Table: "raw", Partition: refill.PartitionSpec{Column: "day"}},
		"mid": {Table: "mid", Partition: refill.PartitionSpec{Column: "day"}, Upstream: []string{"raw"},
			Job: &refill.Job{Kind: refill.JobQuery, Query: "SELECT day, v FROM raw WHERE day = :partition"}},
		"mid_v":    {Upstream: []string{"mid"}, LineageOnly: true, Why: "materialized as a view"},
		"mid_copy": {Upstream: []string{"mid"}, LineageOnly: true, Why: "no partition column"},
		"raw_v":    {Upstream: []string{"raw"}, LineageOnly: true, Why: "view"},
		"top": {Table: "top", Partition: refill.PartitionSpec{Column: "day"}, Upstream: []string{"raw_v", "mid_v"},
			Job: &refill.Job{Kind: refill.JobQuery, Query: "SELECT day, v FROM mid_v WHERE day = :partition"}},
		"from_copy": {Table: "from_copy", Partition: refill.PartitionSpec{Column: "day"}, Upstream: []string{"mid_copy"},
			Job: &refill.Job{Kind: refill.JobQuery, Query: "SELECT day, v FROM mid_copy WHERE day = :partition"}},
	}
	each(t, datasets, fixtures, func(t *testing.T, b *bundle) {
		plan, err := b.p.Build(context.Background(), req("raw", "2026-11-02", "2026-11-02"))
		if err != nil {
			t.Fatal(err)
		}
		got, notes := map[string]string{}, map[string]string{}
		for _, s := range plan.Steps {
			pp := s.Partitions[0]
			got[s.Dataset] = fmt.Sprintf("%s->%s %s", rowsOf(pp.CurrentRows), rowsOf(pp.ExpectedRows), pp.ExpectedMethod)
			notes[s.Dataset] = s.ExpectedNote
		}
		for k, v := range map[string]string{"mid": "1->5 query", "top": "1->5 rehearsal", "from_copy": "1->1 query"} {
			if got[k] != v {
				t.Errorf("%s = %s, want %s", k, got[k], v)
			}
		}
		if want := "counted after the plan rebuilds mid, read through mid_v (materialized as a view), which passes its upstream's rows through"; notes["top"] != want {
			t.Errorf("top's note = %q, want %q", notes["top"], want)
		}
		if notes["from_copy"] != "" || notes["mid"] != "" {
			t.Errorf("notes where the job's own count stands: %q", notes)
		}
	})
}

// TestHourExpectationsKnowTheWeek: an hour is expected to look like the
// same hour of the same weekday — Saturday 10:00 like Saturdays at 10:00,
// not like Tuesday mornings.
func TestHourExpectationsKnowTheWeek(t *testing.T) {
	t.Parallel()
	counts := map[string]int64{}
	var history []string
	start := time.Date(2026, 10, 3, 0, 0, 0, 0, time.UTC) // a Saturday
	for h := 0; h < HistoryDepth*24; h++ {
		ts := start.Add(time.Duration(h) * time.Hour)
		p := ts.Format("2006-01-02T15")
		history = append(history, p)
		n := int64(100)
		if ts.Weekday() == time.Saturday || ts.Weekday() == time.Sunday {
			n = 40
		}
		counts[p] = n
	}
	for _, c := range []struct {
		part string
		want int64
	}{
		{"2026-10-31T10", 40},  // a Saturday
		{"2026-11-03T10", 100}, // a Tuesday
	} {
		got, ok := expectedFromHistory(c.part, refill.Season{Grain: refill.GrainHour, Loc: time.UTC}, history, counts)
		if !ok || got != c.want {
			t.Errorf("%s: expected %d (%v), want %d", c.part, got, ok, c.want)
		}
	}
}

// TestRangeRules: what a plan's range may be, beyond parsing it. Hours
// for targets all partitioned by day are refused, naming the grain and
// the dataset, rather than widened to whole days; a range that starts
// after the last partition that could exist — by the later of the real
// clock and the "as of" one — is refused, naming that partition; years
// out of bounds are refused before anything is asked of the warehouse.
func TestRangeRules(t *testing.T) {
	t.Parallel()
	datasets := map[string]*refill.Dataset{
		"src": {Table: "src", Partition: refill.PartitionSpec{Column: "day"}},
		"agg": {Table: "agg", Partition: refill.PartitionSpec{Column: "day"}, Upstream: []string{"src"},
			Job: &refill.Job{Kind: refill.JobQuery, Query: "SELECT day, v FROM src WHERE day = :partition"}},
		"clicks": {Table: "clicks", Partition: refill.PartitionSpec{Column: "hour", Grain: refill.GrainHour}, Upstream: []string{"src"},
			Job: &refill.Job{Kind: refill.JobQuery, Query: "SELECT hour, v FROM clicks WHERE hour = :partition"}},
	}
	fixtures := []string{
		"CREATE TABLE src (day TEXT, v INTEGER)",
		"CREATE TABLE agg (day TEXT, v INTEGER)",
		"CREATE TABLE clicks (hour TEXT, v INTEGER)",
	}
	each(t, datasets, fixtures, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		refused := func(t *testing.T, r Request, want ...string) {
			t.Helper()
			_, err := b.p.Build(ctx, r)
			if refill.ExitCode(err) != refill.ExitBadInput {
				t.Fatalf("%v..%v of %v: %v, want bad input", r.From, r.To, r.Targets, err)
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v..%v of %v: %v, want it to say %q", r.From, r.To, r.Targets, err, w)
				}
			}
		}
		refused(t, req("agg", "2026-11-01T05", "2026-11-01T07"), "agg is partitioned by day", "would rebuild 2026-11-01..2026-11-01")
		refused(t, req("agg", "9999-12-30", "9999-12-31"), "in the year 9999")
		refused(t, req("agg", "0000-01-01", "0000-01-05"), "in the year 0000")
		// An hour-grain target keeps its hours, a day-grain one beside it
		// too: the hours say what to rebuild.
		for _, targets := range []string{"clicks", "agg,clicks"} {
			if _, err := b.p.Build(ctx, req(targets, "2026-11-01T05", "2026-11-01T07")); err != nil {
				t.Errorf("hours for %s: %v", targets, err)
			}
		}

		// The "as of" clock is days behind the real one: a range to
		// come by it but begun by the real clock is planned.
		real := time.Now().UTC()
		today, tomorrow := real.Format("2006-01-02"), real.AddDate(0, 0, 1).Format("2006-01-02")
		b.p.Now = func() time.Time { return real.AddDate(0, 0, -3) }
		if _, err := b.p.Build(ctx, req("agg", today, today)); err != nil {
			t.Errorf("today by the real clock, as of three days ago: %v", err)
		}
		refused(t, req("agg", tomorrow, tomorrow), "--from "+tomorrow+" is after "+today+", the last partition that could exist yet", "the later of the real clock and REFILL_NOW")
		hour := real.Add(time.Hour).Format("2006-01-02T15")
		refused(t, req("clicks", hour, hour), "after "+real.Format("2006-01-02T15")+", the last partition")
		// Ahead of the real clock, the "as of" clock decides: the plan
		// records both clocks (and is never auto).
		ahead := real.AddDate(0, 0, 10)
		b.p.Now = func() time.Time { return ahead }
		plan, err := b.p.Build(ctx, req("agg", tomorrow, tomorrow))
		if err != nil || plan.Clock == nil {
			t.Errorf("tomorrow, as of ten days ahead: %v (clock %+v)", err, plan)
		}
		later := ahead.AddDate(0, 0, 1).Format("2006-01-02")
		refused(t, req("agg", later, later), "after "+ahead.Format("2006-01-02")+", the last partition")
	})
}
