package refill

import "testing"

// TestFollowsUpstream: a view or an ephemeral model passes its upstream's
// rows through, whether the dbt import named it or a person wrote the
// reason by hand; any other lineage-only dataset keeps its own rows.
func TestFollowsUpstream(t *testing.T) {
	for _, tt := range []struct {
		why  string
		want bool
	}{
		{WhyView, true},
		{WhyEphemeral, true},
		{"materialized as a view", true},
		{"Materialized as a view, over mid", true},
		{"view", true},
		{"view of mid", true},
		{"ephemeral", true},
		{"no partition column: set meta.refill.partition", false},
		{"viewer table", false},
		{"not a view: an unpartitioned table", false},
		{"", false},
	} {
		d := &Dataset{Name: "v", LineageOnly: true, Why: tt.why}
		if got := d.FollowsUpstream(); got != tt.want {
			t.Errorf("lineage_only: %q: FollowsUpstream %v, want %v", tt.why, got, tt.want)
		}
	}
	if (&Dataset{Name: "v", Why: "view"}).FollowsUpstream() {
		t.Error("a dataset that is not lineage only follows its upstream")
	}
}

// TestSealedDatasetKeepsItsRef: the dataset a plan sealed names the table
// exactly as it was sealed — the partition's timezone included, which
// places an hour partition in its local week — for both a step and a
// source.
func TestSealedDatasetKeepsItsRef(t *testing.T) {
	ref := TableRef{Table: "sales.events_hourly", Column: "hour", Grain: GrainHour, Timezone: "Europe/Berlin"}
	st := Step{Dataset: "events_hourly", Ref: &ref, Job: &Job{Kind: JobQuery, Query: "SELECT 1"}}
	if got := st.SealedDataset().Ref(); got != ref {
		t.Errorf("step: sealed %+v, dataset gives %+v", ref, got)
	}
	src := SourceSeal{Dataset: "events_hourly", Ref: &ref}
	if got := src.SealedDataset().Ref(); got != ref {
		t.Errorf("source: sealed %+v, dataset gives %+v", ref, got)
	}
}
