package planner

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
)

// diffFixtures: src holds the truth for three days; tgt, rebuilt from it,
// is right on 11-25, has a wrong amount for id 2 on 11-26 and lacks id 3
// on 11-27; total sums tgt per day and was built from the wrong tgt.
var diffFixtures = []string{
	"CREATE TABLE src (day TEXT, id INTEGER, amount INTEGER, email TEXT)",
	"CREATE TABLE tgt (day TEXT, id INTEGER, amount INTEGER, email TEXT)",
	"CREATE TABLE total (day TEXT, amount INTEGER)",
	"CREATE TABLE after_feed (day TEXT, v INTEGER)",
	"INSERT INTO src VALUES ('2026-11-25', 1, 10, 'a@x'), ('2026-11-25', 2, 20, 'b@x'), ('2026-11-25', 3, 30, 'c@x')," +
		" ('2026-11-26', 1, 10, 'a@x'), ('2026-11-26', 2, 20, 'b@x'), ('2026-11-26', 3, 30, 'c@x')," +
		" ('2026-11-27', 1, 10, 'a@x'), ('2026-11-27', 2, 20, 'b@x'), ('2026-11-27', 3, 30, 'c@x')",
	"INSERT INTO tgt VALUES ('2026-11-25', 1, 10, 'a@x'), ('2026-11-25', 2, 20, 'b@x'), ('2026-11-25', 3, 30, 'c@x')," +
		" ('2026-11-26', 1, 10, 'a@x'), ('2026-11-26', 2, 0, 'b@x'), ('2026-11-26', 3, 30, 'c@x')," +
		" ('2026-11-27', 1, 10, 'a@x'), ('2026-11-27', 2, 20, 'b@x')",
	"INSERT INTO total VALUES ('2026-11-25', 60), ('2026-11-26', 40), ('2026-11-27', 30)",
}

var diffDatasets = map[string]*refill.Dataset{
	"src": {Table: "src", Partition: refill.PartitionSpec{Column: "day"}},
	"tgt": {Table: "tgt", Partition: refill.PartitionSpec{Column: "day"}, Upstream: []string{"src"},
		Key: []string{"id"}, Private: []string{"email"},
		Job: &refill.Job{Kind: refill.JobQuery, Query: "SELECT day, id, amount, email FROM src WHERE day = :partition"}},
	"total": {Table: "total", Partition: refill.PartitionSpec{Column: "day"}, Upstream: []string{"tgt"},
		Checks: &refill.Checks{Unique: []string{"day"}},
		Job:    &refill.Job{Kind: refill.JobSQL, SQL: "DELETE FROM total WHERE day = :partition; INSERT INTO total SELECT day, sum(amount) FROM tgt WHERE day = :partition GROUP BY day"}},
	"feed": {Upstream: []string{"tgt"}, Job: &refill.Job{Kind: refill.JobCommand, Command: []string{"true"}}},
	"after_feed": {Table: "after_feed", Partition: refill.PartitionSpec{Column: "day"}, Upstream: []string{"feed"},
		Job: &refill.Job{Kind: refill.JobQuery, Query: "SELECT day, id AS v FROM src WHERE day = :partition"}},
}

// diffs maps "dataset partition" to the partition's diff as JSON.
func diffs(t *testing.T, plan *refill.Plan) map[string]*refill.PartitionDiff {
	t.Helper()
	out := map[string]*refill.PartitionDiff{}
	for _, st := range plan.Steps {
		for _, pp := range st.Partitions {
			if pp.Diff == nil {
				t.Errorf("%s %s has no diff and no reason for none", st.Dataset, pp.Partition)
			}
			out[st.Dataset+" "+pp.Partition] = pp.Diff
		}
	}
	return out
}

func sums(d *refill.PartitionDiff, col string) string {
	c, ok := d.Columns[col]
	if !ok {
		return "absent"
	}
	s := func(n *json.Number) string {
		if n == nil {
			return "-"
		}
		return n.String()
	}
	ch := "-"
	if c.Changed != nil {
		ch = fmt.Sprint(*c.Changed)
	}
	return s(c.OldSum) + "→" + s(c.NewSum) + " changed " + ch
}

// TestContentDiff: the dry run rebuilds every query and sql partition in
// its rolled-back rehearsal and says what changes, by key, with the
// downstream sql job diffed after its upstream is rebuilt; a command job
// and what reads it say why they have none; the warehouse is untouched.
func TestContentDiff(t *testing.T) {
	t.Parallel()
	each(t, diffDatasets, diffFixtures, func(t *testing.T, b *bundle) {
		b.cfg.Plan.DiffBudget = refill.DefaultDiffBudget
		plan, err := b.p.Plan(context.Background(), req("tgt", "2026-11-25", "2026-11-27"))
		if err != nil {
			t.Fatal(err)
		}
		d := diffs(t, plan)
		type counts struct{ old, new, changed, unchanged int64 }
		for part, want := range map[string]counts{
			"tgt 2026-11-25": {0, 0, 0, 3}, "tgt 2026-11-26": {0, 0, 1, 2}, "tgt 2026-11-27": {0, 1, 0, 2},
			"total 2026-11-25": {0, 0, 0, 1}, "total 2026-11-26": {0, 0, 1, 0}, "total 2026-11-27": {0, 0, 1, 0},
		} {
			pd := d[part]
			if pd == nil || pd.Skipped != "" || pd.Changed == nil {
				t.Errorf("%s: diff %+v, want one by key", part, pd)
				continue
			}
			if got := (counts{pd.OnlyOld, pd.OnlyNew, *pd.Changed, pd.Unchanged}); got != want {
				t.Errorf("%s: only_old/only_new/changed/unchanged = %v, want %v", part, got, want)
			}
		}
		if got, want := strings.Join(d["tgt 2026-11-26"].Key, ","), "id"; got != want {
			t.Errorf("tgt key = %s, want %s", got, want)
		}
		if got, want := strings.Join(d["total 2026-11-26"].Key, ","), "day"; got != want {
			t.Errorf("total key = %s, want the unique check's %s", got, want)
		}
		for part, want := range map[string]string{
			"tgt 2026-11-25": "60→60 changed 0", "tgt 2026-11-26": "40→60 changed 1", "tgt 2026-11-27": "30→60 changed 0",
			"total 2026-11-26": "40→60 changed 1", "total 2026-11-27": "30→60 changed 1",
		} {
			if got := sums(d[part], "amount"); got != want {
				t.Errorf("%s amount: %s, want %s", part, got, want)
			}
		}
		// id is the key, email private: neither is summed; email is never shown.
		if got := sums(d["tgt 2026-11-26"], "email"); got != "absent" {
			t.Errorf("private email in columns: %s", got)
		}
		sample := d["tgt 2026-11-26"].Sample
		if len(sample) != 1 || sample[0].Old == nil || sample[0].New == nil {
			t.Fatalf("tgt 2026-11-26 sample = %+v, want the one changed row side by side", sample)
		}
		if o, n := sample[0].Old["amount"], sample[0].New["amount"]; o == nil || *o != "0" || n == nil || *n != "20" {
			t.Errorf("sample amount %v → %v, want 0 → 20", o, n)
		}
		for _, row := range append(sample, d["tgt 2026-11-27"].Sample...) {
			if _, ok := row.Old["email"]; ok {
				t.Errorf("a private column in the sample: %+v", row)
			}
			if _, ok := row.New["email"]; ok {
				t.Errorf("a private column in the sample: %+v", row)
			}
		}
		for part, want := range map[string]string{
			"feed 2026-11-25":       "a command job writes outside the warehouse's transaction",
			"after_feed 2026-11-25": "it reads what feed will write in this plan",
		} {
			if pd := d[part]; pd == nil || !strings.Contains(pd.Skipped, want) {
				t.Errorf("%s: diff %+v, want skipped because %q", part, pd, want)
			}
		}
		if got := d["tgt 2026-11-26"].Summary(); got != "1 row changed, amount 40 → 60" {
			t.Errorf("summary = %q", got)
		}
		// The rehearsal left the warehouse as it was.
		var n int64
		if err := b.db.QueryRow("SELECT sum(amount) FROM tgt").Scan(&n); err != nil || n != 130 {
			t.Errorf("tgt after planning sums %d (%v), want 130", n, err)
		}
		// The diffs are sealed: the plan as stored hashes the same.
		back, err := b.st.Plan(context.Background(), plan.ID)
		if err != nil {
			t.Fatal(err)
		}
		if back.ComputeHash() != plan.Hash {
			t.Error("the plan read back from the state store hashes differently")
		}
	})
}

// TestContentDiffBudget: past plan.diff_budget the remaining partitions
// are built (what reads them needs them) but not compared, and say how
// far the diffs went; 0 turns diffs off and leaves the counts as they were.
func TestContentDiffBudget(t *testing.T) {
	t.Parallel()
	each(t, diffDatasets, diffFixtures, func(t *testing.T, b *bundle) {
		// tgt 11-25 compares 3+3 rows; 11-26 would need 3+3 more and is
		// built uncompared, as is 11-27; total's 1+1 still fit.
		b.cfg.Plan.DiffBudget = 8
		plan, err := b.p.Plan(context.Background(), req("tgt", "2026-11-25", "2026-11-27"))
		if err != nil {
			t.Fatal(err)
		}
		d := diffs(t, plan)
		if pd := d["tgt 2026-11-25"]; pd.Skipped != "" {
			t.Errorf("the first partition was not diffed: %s", pd.Skipped)
		}
		want := "over plan.diff_budget: the plan's diffs compared 8 rows of the 8 allowed, in 2 of 6 partitions"
		if pd := d["total 2026-11-25"]; pd.Skipped != "" || pd.Unchanged != 1 {
			t.Errorf("total 2026-11-25 fits the budget left: %+v", pd)
		}
		for _, part := range []string{"tgt 2026-11-26", "tgt 2026-11-27", "total 2026-11-26", "total 2026-11-27"} {
			if got := d[part].Skipped; got != want {
				t.Errorf("%s skipped %q, want %q", part, got, want)
			}
		}
		// total was still rehearsed after tgt: its count follows the plan.
		for _, st := range plan.Steps {
			if st.Dataset == "total" && st.Partitions[1].ExpectedMethod != refill.ExpectedRehearsal {
				t.Errorf("total's expectation is %s, want rehearsal", st.Partitions[1].ExpectedMethod)
			}
		}

		b.cfg.Plan.DiffBudget = 0
		plan, err = b.p.Plan(context.Background(), req("tgt", "2026-11-25", "2026-11-27"))
		if err != nil {
			t.Fatal(err)
		}
		for part, pd := range diffs(t, plan) {
			if strings.HasPrefix(part, "tgt") && pd.Skipped != "plan.diff_budget is 0, which turns content diffs off" {
				t.Errorf("%s with diffs off: %+v", part, pd)
			}
		}
	})
}

// TestContentDiffRehearsalFails: a build that fails in the rehearsal
// leaves every diff skipped with the warehouse's reason, not a plan that
// says "no change".
func TestContentDiffRehearsalFails(t *testing.T) {
	t.Parallel()
	datasets := clone(diffDatasets)
	datasets["total"].Job = &refill.Job{Kind: refill.JobSQL, SQL: "INSERT INTO no_such_table SELECT 1"}
	each(t, datasets, diffFixtures, func(t *testing.T, b *bundle) {
		b.cfg.Plan.DiffBudget = refill.DefaultDiffBudget
		plan, err := b.p.Plan(context.Background(), req("tgt", "2026-11-25", "2026-11-27"))
		if err != nil {
			t.Fatal(err)
		}
		for part, pd := range diffs(t, plan) {
			if strings.HasPrefix(part, "feed") || strings.HasPrefix(part, "after_feed") {
				continue
			}
			if !strings.HasPrefix(pd.Skipped, "the rehearsal that builds it to compare failed (building total 2026-11-25: ") ||
				!strings.Contains(pd.Skipped, "no_such_table") {
				t.Errorf("%s: %+v, want skipped for the failed rehearsal", part, pd)
			}
		}
	})
}

// TestDryRunAuditsRebuiltRows: a rebuilt dataset's own row checks judge
// the rows the rehearsal built, as the run's audit would before
// publishing: a rebuild that would break its unique key is named in the
// plan and keeps it from auto; the warehouse is untouched.
func TestDryRunAuditsRebuiltRows(t *testing.T) {
	t.Parallel()
	ds := map[string]*refill.Dataset{}
	for k, v := range diffDatasets {
		c := *v
		ds[k] = &c
	}
	dup := *ds["tgt"]
	dup.Checks = &refill.Checks{Unique: []string{"id"}, AcceptedValues: &refill.AcceptedValuesCheck{Columns: []refill.AcceptedValues{{Column: "amount", Values: []string{"10", "20", "30"}}}}}
	dup.Job = &refill.Job{Kind: refill.JobQuery, Query: "SELECT day, id, amount, email FROM src WHERE day = :partition UNION ALL SELECT day, id, amount * 7, email FROM src WHERE day = :partition AND day = '2026-11-26' AND id = 1"}
	ds["tgt"] = &dup
	each(t, ds, diffFixtures, func(t *testing.T, b *bundle) {
		b.cfg.Plan.DiffBudget = refill.DefaultDiffBudget
		plan, err := b.p.Plan(context.Background(), req("tgt", "2026-11-25", "2026-11-27"))
		if err != nil {
			t.Fatal(err)
		}
		var found []string
		for _, st := range plan.Steps {
			for _, f := range st.Audit {
				found = append(found, f.Dataset+" "+f.Partition+" "+f.Check)
			}
		}
		if strings.Join(found, "; ") != "tgt 2026-11-26 unique; tgt 2026-11-26 accepted_values" {
			t.Errorf("audit findings %q, want tgt 2026-11-26's broken key and its amount of 70", found)
		}
		if plan.Tier == refill.TierAuto || !strings.Contains(strings.Join(append(plan.Reasons, plan.Attention...), "\n"), "the dry run's rebuilt rows fail their dataset's own checks: tgt 2026-11-26 unique") {
			t.Errorf("tier %s, reasons %q; want the audit to keep it from auto", plan.Tier, append(plan.Reasons, plan.Attention...))
		}
		var n int
		if err := b.db.QueryRow("SELECT count(*) FROM tgt WHERE day = '2026-11-26'").Scan(&n); err != nil || n != 3 {
			t.Errorf("the warehouse's tgt 2026-11-26 has %d rows (%v), want its 3: the dry run wrote", n, err)
		}
	})
}

// TestContentDiffViews: a view over a rebuilt table is compared before and
// after the rehearsal rebuilds what it reads, partition by partition, and
// the plan lists it after the steps; a view the rehearsal cannot compare
// says why; the diffs are sealed in the plan's hash.
func TestContentDiffViews(t *testing.T) {
	t.Parallel()
	datasets := clone(diffDatasets)
	view := func(up, why string, col string, key ...string) *refill.Dataset {
		return &refill.Dataset{Table: "tgt_view", Partition: refill.PartitionSpec{Column: col}, Upstream: []string{up},
			LineageOnly: true, Why: why, Key: key}
	}
	datasets["tgt_view"] = view("tgt", "materialized as a view", "day", "id")
	datasets["hourly_view"] = view("tgt", "view", "day")
	datasets["hourly_view"].Table, datasets["hourly_view"].Partition.Grain = "hourly_view", refill.GrainHour
	datasets["flat_view"] = view("tgt", "view", "")
	datasets["feed_view"] = view("feed", "view", "day")
	// Declared with a table the warehouse lacks, and the same view twice.
	datasets["ghost_view"] = view("tgt", "view", "day")
	datasets["ghost_view"].Table = "no_such_view"
	datasets["again_view"] = view("tgt_view", "view", "day", "id")
	fixtures := append(slices.Clone(diffFixtures), "CREATE VIEW tgt_view AS SELECT day, id, amount FROM tgt")
	each(t, datasets, fixtures, func(t *testing.T, b *bundle) {
		b.cfg.Plan.DiffBudget = refill.DefaultDiffBudget
		plan, err := b.p.Plan(context.Background(), req("tgt", "2026-11-25", "2026-11-27"))
		if err != nil {
			t.Fatal(err)
		}
		views := map[string]refill.ChangedView{}
		for _, v := range plan.Changed {
			views[v.Dataset] = v
		}
		if g := views["ghost_view"]; len(g.Partitions) != 0 || g.Diff == nil || !strings.Contains(g.Diff.Skipped, "it cannot be read: dataset ghost_view: table no_such_view does not exist") {
			t.Errorf("ghost_view: %+v, want skipped for the missing table", g.Diff)
		}
		v := views["again_view"]
		if v.Diff != nil || len(v.Partitions) != 3 || v.Partitions[1].Diff.Changed == nil || *v.Partitions[1].Diff.Changed != 1 {
			t.Errorf("again_view, the same view through another: %+v", v)
		}
		v = views["tgt_view"]
		if v.Diff != nil || len(v.Partitions) != 3 {
			t.Fatalf("tgt_view: %+v, want its three partitions diffed", v)
		}
		type counts struct{ old, new, changed, unchanged int64 }
		for i, want := range []counts{{0, 0, 0, 3}, {0, 0, 1, 2}, {0, 1, 0, 2}} {
			vp := v.Partitions[i]
			pd := vp.Diff
			if vp.Partition != fmt.Sprintf("2026-11-%d", 25+i) || pd == nil || pd.Skipped != "" || pd.Changed == nil {
				t.Errorf("tgt_view partition %d: %s %+v", i, vp.Partition, pd)
				continue
			}
			if got := (counts{pd.OnlyOld, pd.OnlyNew, *pd.Changed, pd.Unchanged}); got != want {
				t.Errorf("tgt_view %s: only_old/only_new/changed/unchanged = %v, want %v", vp.Partition, got, want)
			}
		}
		if got := sums(v.Partitions[1].Diff, "amount"); got != "40→60 changed 1" {
			t.Errorf("tgt_view 2026-11-26 amount: %s", got)
		}
		for name, want := range map[string]string{
			"hourly_view": "its partitions (hour) are not those of tgt, which it reads",
			"flat_view":   "the view has no partition column to compare by",
			"feed_view":   "it reads feed, a command job that writes outside the warehouse's transaction",
		} {
			if v := views[name]; v.Diff == nil || !strings.Contains(v.Diff.Skipped, want) || len(v.Partitions) != 0 {
				t.Errorf("%s: %+v, want skipped because %q", name, v.Diff, want)
			}
		}
		// The plan lists the view after the steps, as a view.
		var last refill.DatasetChange
		for _, c := range plan.Changes() {
			if c.Dataset == "tgt_view" {
				last = c
			}
		}
		if got, want := last.Name()+": "+last.Summary(), "tgt_view (view): 2 of 3 partitions change (1 row changed, 1 row added, amount 130 → 180)"; got != want {
			t.Errorf("view change = %q, want %q", got, want)
		}
		if h := plan.ChangeHeadline(); !strings.Contains(h, "tgt_view (view) 2 of 3") || !strings.Contains(h, "not diffed: ") || !strings.Contains(h, "feed_view (view)") {
			t.Errorf("headline = %q", h)
		}
		// Sealed: read back it hashes the same, and a view diff edited
		// in the state store does not.
		back, err := b.st.Plan(context.Background(), plan.ID)
		if err != nil {
			t.Fatal(err)
		}
		if back.ComputeHash() != plan.Hash {
			t.Fatal("the plan read back from the state store hashes differently")
		}
		for i := range back.Changed {
			if back.Changed[i].Dataset == "tgt_view" {
				back.Changed[i].Partitions[1].Diff.OnlyNew = 0
				*back.Changed[i].Partitions[1].Diff.Changed = 0
			}
		}
		if back.ComputeHash() == plan.Hash {
			t.Error("a view's diff edited after planning hashes the same")
		}

		// Views count against plan.diff_budget before the steps do: the
		// first view partition (tgt's 3 rows before and after) takes it all.
		b.cfg.Plan.DiffBudget = 6
		plan, err = b.p.Plan(context.Background(), req("tgt", "2026-11-25", "2026-11-27"))
		if err != nil {
			t.Fatal(err)
		}
		want := "over plan.diff_budget: the plan's diffs compared 6 rows of the 6 allowed, in 1 of 12 partitions"
		var got []string
		for _, v := range plan.Changed {
			for _, vp := range v.Partitions {
				got = append(got, v.Dataset+" "+vp.Partition+" "+strings.ReplaceAll(vp.Diff.Skipped, want, "over"))
			}
		}
		for part, pd := range diffs(t, plan) {
			if (strings.HasPrefix(part, "tgt") || strings.HasPrefix(part, "total")) && pd.Skipped != want {
				t.Errorf("%s: %q, want %q", part, pd.Skipped, want)
			}
		}
		if g := strings.Join(got, "; "); g != "again_view 2026-11-25 ; again_view 2026-11-26 over; again_view 2026-11-27 over; "+
			"tgt_view 2026-11-25 over; tgt_view 2026-11-26 over; tgt_view 2026-11-27 over" {
			t.Errorf("view diffs under a budget of 6: %s", g)
		}
	})
}
