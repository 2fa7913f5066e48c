package control

import (
	"strings"
	"testing"

	"github.com/refill-dev/refill"
)

func sealedFixture() (*refill.Plan, func() *refill.Config) {
	cfg := func() *refill.Config {
		src := &refill.Dataset{Name: "src", Table: "raw.events", Partition: refill.PartitionSpec{Column: "day", Grain: refill.GrainDay},
			Checks: &refill.Checks{Volume: &refill.VolumeCheck{Lookback: 28, MaxZ: 3}}}
		agg := &refill.Dataset{Name: "agg", Table: "mart.agg", Partition: refill.PartitionSpec{Column: "day", Grain: refill.GrainDay},
			Upstream: []string{"src"}, Tags: []string{"aggregate"},
			Job: &refill.Job{Kind: refill.JobQuery, Query: "SELECT day FROM raw.events WHERE day = :partition"}}
		return &refill.Config{Warehouse: "postgres://refill:s3cret@db/wh", Policy: refill.DefaultPolicy(), Datasets: map[string]*refill.Dataset{"src": src, "agg": agg}}
	}
	c := cfg()
	agg := c.Datasets["agg"]
	ref, job, srcRef := agg.Ref(), *agg.Job, c.Datasets["src"].Ref()
	p := &refill.Plan{ID: "p1", Seal: refill.SealVersion, Policy: c.Policy, Warehouse: "postgres://refill:xxxxx@db/wh",
		Request: refill.Request{Targets: []string{"src"}},
		Steps: []refill.Step{{Dataset: "agg", Order: 1, Kind: job.Kind, Table: agg.Table, Tags: agg.Tags, Upstream: agg.Upstream,
			Fingerprint: job.Fingerprint(), Ref: &ref, Job: &job}},
		Sources:     []string{"src"},
		SourceSeals: []refill.SourceSeal{{Dataset: "src", Ref: &srcRef, Checks: c.Datasets["src"].Checks}},
		Gate:        refill.GateVerdict{Passed: true},
	}
	return p, cfg
}

// TestStale has one row per thing a plan seals: change it in the config
// and the plan is stale, in words that name it.
func TestStale(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*refill.Config)
		want string
	}{
		{"unchanged", func(*refill.Config) {}, ""},
		{"table", func(c *refill.Config) { c.Datasets["agg"].Table = "mart.precious" }, "the table of agg changed: sealed mart.agg, now mart.precious"},
		{"partition column", func(c *refill.Config) { c.Datasets["agg"].Partition.Column = "d" }, "the partition column of agg changed"},
		{"grain", func(c *refill.Config) { c.Datasets["agg"].Partition.Grain = refill.GrainHour }, "the grain of agg changed: sealed day, now hour"},
		{"query", func(c *refill.Config) { c.Datasets["agg"].Job.Query += " -- x" }, "the job of agg changed: its query text"},
		{"kind", func(c *refill.Config) {
			c.Datasets["agg"].Job = &refill.Job{Kind: refill.JobSQL, SQL: "DELETE FROM x WHERE d = :partition"}
		}, "kind query, now sql"},
		{"side effects", func(c *refill.Config) { c.Datasets["agg"].Job.SideEffects = true }, "side_effects (sealed false, now true)"},
		{"tags", func(c *refill.Config) { c.Datasets["agg"].Tags = nil }, "the tags of agg changed"},
		{"upstream", func(c *refill.Config) {
			c.Datasets["other"] = &refill.Dataset{Name: "other", Table: "o", Partition: refill.PartitionSpec{Column: "day", Grain: refill.GrainDay}}
			c.Datasets["agg"].Upstream = []string{"src", "other"}
		}, "the upstream of agg changed"},
		{"step checks", func(c *refill.Config) {
			c.Datasets["agg"].Checks = &refill.Checks{NotNull: &refill.NotNullCheck{Columns: []string{"day"}}}
		}, "the checks of agg changed"},
		{"source checks", func(c *refill.Config) { c.Datasets["src"].Checks.Volume.MaxZ = 30 }, "the checks of input src changed"},
		{"calendar", func(c *refill.Config) { c.Datasets["src"].Checks.Volume.Calendar = []string{"12-25"} },
			`the checks of input src changed: volume: sealed {"lookback":28,"max_z":3}, now {"lookback":28,"max_z":3,"calendar":["12-25"]}`},
		{"timezone at day grain", func(c *refill.Config) { c.Datasets["src"].Partition.Timezone = "Asia/Seoul" }, ""},
		{"timezone at hour grain", func(c *refill.Config) {
			c.Datasets["agg"].Partition.Grain, c.Datasets["agg"].Partition.Timezone = refill.GrainHour, "Asia/Seoul"
		}, "the partition timezone of agg changed: sealed UTC, now Asia/Seoul"},
		{"source table", func(c *refill.Config) { c.Datasets["src"].Table = "raw.events_v2" }, "the table of src changed"},
		{"dataset gone", func(c *refill.Config) { delete(c.Datasets, "agg") }, "dataset agg is no longer in the config"},
		{"became a source", func(c *refill.Config) { c.Datasets["agg"].Job = nil }, "agg no longer has a job"},
		{"new downstream", func(c *refill.Config) {
			c.Datasets["bill"] = &refill.Dataset{Name: "bill", Table: "b", Partition: refill.PartitionSpec{Column: "day", Grain: refill.GrainDay},
				Upstream: []string{"agg"}, Tags: []string{"billing"}, Job: &refill.Job{Kind: refill.JobQuery, Query: "SELECT :partition AS day"}}
		}, "the targets now also reach bill"},
		{"policy", func(c *refill.Config) { c.Policy.AutoMaxDays = 30 }, "the tier policy changed: auto_max_days 7 → 30"},
		{"warehouse", func(c *refill.Config) { c.Warehouse = "postgres://refill:s3cret@db/other" }, "the warehouse changed: sealed postgres://refill:xxxxx@db/wh, now postgres://refill:xxxxx@db/other"},
		{"password only", func(c *refill.Config) { c.Warehouse = "postgres://refill:rotated@db/wh" }, ""},
		{"policy rules", func(c *refill.Config) {
			c.Policy.Rules = []refill.Rule{{Name: "r", When: "true", Tier: refill.TierManual, Reason: "x"}}
		}, "rules (0 sealed, 1 now)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, cfg := sealedFixture()
			now := cfg()
			c.edit(now)
			got := Stale(p, now)
			switch {
			case c.want == "" && len(got) != 0:
				t.Errorf("stale with nothing changed: %q", got)
			case c.want != "" && !strings.Contains(strings.Join(got, "\n"), c.want):
				t.Errorf("Stale = %q, want a line with %q", got, c.want)
			}
		})
	}
	p, cfg := sealedFixture()
	p.Seal = 0
	if got := Stale(p, cfg()); len(got) != 1 || !strings.Contains(got[0], "older refill") {
		t.Errorf("a plan from before sealing: %q", got)
	}
}

// TestSealedConfigIsWhatThePlanSealed: the runner's view of a plan is the
// sealed one, whatever the config says now.
func TestSealedConfigIsWhatThePlanSealed(t *testing.T) {
	p, cfg := sealedFixture()
	now := cfg()
	now.Datasets["agg"].Table = "mart.precious"
	now.Datasets["agg"].Job.Query = "SELECT 1"
	s := p.Sealed(now)
	if d := s.Datasets["agg"]; d.Table != "mart.agg" || !strings.Contains(d.Job.Query, "raw.events") {
		t.Errorf("sealed agg = %+v %+v", d, d.Job)
	}
	if d := s.Datasets["src"]; d.Table != "raw.events" || d.Checks.Volume.MaxZ != 3 {
		t.Errorf("sealed src = %+v", d)
	}
}

// TestSnapshotTableNames: names keep the schema, never collide across
// schemas, and stay within PostgreSQL's 63 characters.
func TestSnapshotTableNames(t *testing.T) {
	a, b := snapshotTable("deadbeef", "sales.events"), snapshotTable("deadbeef", "ops.events")
	if a == b || !strings.HasPrefix(a, "sales.refill_snap_deadbeef_events_") || !strings.HasPrefix(b, "ops.refill_snap_deadbeef_events_") {
		t.Errorf("snapshot names %q and %q", a, b)
	}
	long := strings.Repeat("x", 70)
	l1, l2 := snapshotTable("deadbeef", long+"_one"), snapshotTable("deadbeef", long+"_two")
	if l1 == l2 || len(l1) > 63 || len(l2) > 63 {
		t.Errorf("long names %q (%d) and %q (%d)", l1, len(l1), l2, len(l2))
	}
}
