package openlineage_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/openlineage"
)

// Events name tables as OpenLineage's naming conventions do, so that a
// lineage tool joins refill's rewrite to what other producers report; each
// event is a valid RunEvent; and run IDs are the same for the same run,
// whoever sends them.
func TestEventsNameTheWarehouse(t *testing.T) {
	sch := runEventSchema(t)
	cfg := &refill.Config{
		Warehouse:   "postgres://etl:secret@db.example.com:6543/analytics?sslmode=disable",
		OpenLineage: &refill.OpenLineageConfig{Namespace: "refill"},
		Datasets: map[string]*refill.Dataset{
			"events_raw":   {Name: "events_raw", Table: "raw.Events"},
			"events_daily": {Name: "events_daily", Table: "events_daily", Upstream: []string{"events_raw"}},
			"pinned":       {Name: "pinned", Table: "x", OpenLineage: &refill.OpenLineageName{Namespace: "bigquery", Name: "proj.ds.x"}, Upstream: []string{"events_daily"}},
			"export":       {Name: "export", Upstream: []string{"events_daily"}},
		},
	}
	plan := &refill.Plan{ID: "p1", Hash: "sha256:" + strings.Repeat("a", 64), Tier: refill.TierManual, Sources: []string{"events_raw"},
		Request: refill.Request{From: "2026-11-01T05", To: "2026-11-01T06", Reason: "r", RequestedBy: "alice"},
		Steps: []refill.Step{
			{Dataset: "events_daily", Upstream: []string{"events_raw"}, Kind: refill.JobQuery, Partitions: make([]refill.PartitionPlan, 2)},
			{Dataset: "pinned", Upstream: []string{"events_daily"}, Kind: refill.JobSQL, Partitions: make([]refill.PartitionPlan, 2)},
			{Dataset: "export", Upstream: []string{"events_daily"}, Kind: refill.JobCommand, Partitions: make([]refill.PartitionPlan, 2)},
		}}
	evs, err := openlineage.Events(openlineage.RunReport{Config: cfg, Plan: plan, Outcome: openlineage.Complete, Started: 7,
		At: time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC), Published: map[string]int{"events_daily": 2}})
	if err != nil {
		t.Fatal(err)
	}
	type ds struct{ Namespace, Name string }
	var got []struct {
		EventType string
		Run       struct{ RunID string }
		Job       struct{ Name string }
		Inputs    []ds
		Outputs   []ds
	}
	for _, b := range evs {
		if ok, why := schemaAccepts(t, sch, b); !ok {
			t.Errorf("not a RunEvent: %s\n%s", why, b)
		}
		var one struct {
			EventType string
			Run       struct{ RunID string }
			Job       struct{ Name string }
			Inputs    []ds
			Outputs   []ds
		}
		if err := json.Unmarshal(b, &one); err != nil {
			t.Fatal(err)
		}
		got = append(got, one)
	}
	if len(got) != 4 || got[3].Job.Name != "backfill" {
		t.Fatalf("events: %+v", got)
	}
	pg := "postgres://db.example.com:6543"
	want := map[string]ds{
		"backfill.events_daily": {pg, "analytics.public.events_daily"},
		"backfill.pinned":       {"bigquery", "proj.ds.x"},
		"backfill.export":       {"refill", "export"},
	}
	for _, e := range got[:3] {
		if o := e.Outputs; len(o) != 1 || o[0] != want[e.Job.Name] {
			t.Errorf("%s writes %+v, want %+v", e.Job.Name, o, want[e.Job.Name])
		}
	}
	if in := got[0].Inputs; len(in) != 1 || in[0] != (ds{pg, "analytics.raw.events"}) {
		t.Errorf("events_daily reads %+v", in)
	}
	// events_daily was all published: COMPLETE; the rest as the run.
	if got[0].EventType != "COMPLETE" || got[3].EventType != "COMPLETE" {
		t.Errorf("outcomes %s, %s", got[0].EventType, got[3].EventType)
	}
	if got[3].Run.RunID != openlineage.RunID("p1", 7, "") || got[0].Run.RunID != openlineage.RunID("p1", 7, "events_daily") ||
		openlineage.RunID("p1", 7, "") == openlineage.RunID("p1", 8, "") {
		t.Errorf("run IDs are not the plan's and the run's")
	}
	if strings.Contains(string(evs[3]), "secret") {
		t.Errorf("an event carries the warehouse's password: %s", evs[3])
	}
}

// A cancelled run is ABORT, for the plan's run and for every dataset not
// yet all published; one whose partitions all were is COMPLETE. A failed
// run carries its error on each failed run.
func TestEventsOfARunThatStopped(t *testing.T) {
	sch := runEventSchema(t)
	cfg := &refill.Config{Warehouse: "sqlite:w.db", Dir: "/srv/refill", Datasets: map[string]*refill.Dataset{
		"a": {Name: "a", Table: "a"}, "b": {Name: "b", Table: "b", Upstream: []string{"a"}},
	}}
	plan := &refill.Plan{ID: "p2", Hash: "sha256:" + strings.Repeat("b", 64), Tier: refill.TierAuto,
		Request: refill.Request{From: "2026-11-01", To: "2026-11-02", Reason: "r", RequestedBy: "alice"},
		Steps: []refill.Step{{Dataset: "a", Kind: refill.JobQuery, Partitions: make([]refill.PartitionPlan, 2)},
			{Dataset: "b", Upstream: []string{"a"}, Kind: refill.JobQuery, Partitions: make([]refill.PartitionPlan, 2)}}}
	for _, c := range []struct {
		outcome openlineage.Outcome
		want    string
	}{
		{openlineage.Abort, "COMPLETE backfill.a; ABORT backfill.b; ABORT backfill"},
		{openlineage.Fail, "COMPLETE backfill.a; FAIL backfill.b; FAIL backfill"},
	} {
		evs, err := openlineage.Events(openlineage.RunReport{Config: cfg, Plan: plan, Outcome: c.outcome, Started: 3, At: time.Now(),
			Published: map[string]int{"a": 2, "b": 1}, Error: "boom"})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, b := range evs {
			if ok, why := schemaAccepts(t, sch, b); !ok {
				t.Errorf("not a RunEvent: %s", why)
			}
			var e struct {
				EventType string
				Job       struct{ Name string }
				Run       struct {
					Facets map[string]json.RawMessage
				}
			}
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatal(err)
			}
			got = append(got, e.EventType+" "+e.Job.Name)
			if _, has := e.Run.Facets["errorMessage"]; has != (e.EventType == "FAIL") {
				t.Errorf("%s %s: errorMessage facet %v", e.EventType, e.Job.Name, has)
			}
		}
		if s := strings.Join(got, "; "); s != c.want {
			t.Errorf("%s: %s, want %s", c.outcome, s, c.want)
		}
	}
}

// A dataset removed from the config after its plan ran is named as the
// plan sealed it: the run's end can still be told.
func TestEventsOfADatasetNoLongerConfigured(t *testing.T) {
	cfg := &refill.Config{Warehouse: "postgres://db.example.com/analytics", Datasets: map[string]*refill.Dataset{}}
	plan := &refill.Plan{ID: "p3", Hash: "sha256:" + strings.Repeat("c", 64), Tier: refill.TierAuto, Sources: []string{"raw"},
		SourceSeals: []refill.SourceSeal{{Dataset: "raw", Ref: &refill.TableRef{Table: "raw.events"}}},
		Request:     refill.Request{From: "2026-11-01", To: "2026-11-01", Reason: "r", RequestedBy: "alice"},
		Steps: []refill.Step{{Dataset: "gone", Upstream: []string{"raw"}, Kind: refill.JobQuery, Ref: &refill.TableRef{Table: "gone_daily"},
			Partitions: make([]refill.PartitionPlan, 1)}}}
	evs, err := openlineage.Events(openlineage.RunReport{Config: cfg, Plan: plan, Outcome: openlineage.Complete, Started: 1, At: time.Now(),
		Published: map[string]int{"gone": 1}})
	if err != nil {
		t.Fatal(err)
	}
	var child struct {
		Inputs, Outputs []struct{ Namespace, Name string }
	}
	if err := json.Unmarshal(evs[0], &child); err != nil {
		t.Fatal(err)
	}
	if len(child.Outputs) != 1 || child.Outputs[0].Name != "analytics.public.gone_daily" || child.Outputs[0].Namespace != "postgres://db.example.com:5432" ||
		len(child.Inputs) != 1 || child.Inputs[0].Name != "analytics.raw.events" {
		t.Errorf("the removed dataset's run reads %+v and writes %+v", child.Inputs, child.Outputs)
	}
}
