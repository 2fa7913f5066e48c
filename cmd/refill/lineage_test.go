package main

import (
	"net/http"
	"strings"
	"testing"
)

// TestOpenLineageConsumers drives the binary: a BI tool posts to refill
// serve that its job read sessions into a dashboard refill does not
// manage. refill lineage shows that edge beside the declared ones, each
// with its origin, and a plan over sessions — auto before, since the demo
// proved it — names the dashboard as not rebuilt and needs a person.
func TestOpenLineageConsumers(t *testing.T) {
	t.Parallel()
	d := setup(t)
	args := []string{"plan", "sessions", "--from", "2026-11-27", "--to", "2026-11-29", "--reason", "late events", "--as", "alice"}
	if p := decode[planJSON](t, step(t, d, 0, "", append(args, "-o", "json")...).stdout); p.Tier != "auto" {
		t.Fatalf("before lineage: tier %s %q, want auto (the demo proves sessions)", p.Tier, p.Reasons)
	}

	tok := token(t, d, "bob")
	s := serve(t, d)
	event := `{"eventType":"COMPLETE","eventTime":"2026-11-30T06:15:00Z","producer":"https://github.com/metabase/metabase",
		"schemaURL":"https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
		"run":{"runId":"0190b6a4-5f2e-7c3d-8e4f-a1b2c3d4e5f6"},"job":{"namespace":"metabase","name":"metabase.sync"},
		"inputs":[{"namespace":"sqlite://warehouse.db","name":"main.sessions"}],
		"outputs":[{"namespace":"metabase://bi","name":"analytics.finance_dashboard"}]}`
	if st, res := s.do(t, tok, "POST", "/api/v1/lineage", event); st != http.StatusCreated || res["new_edges"] != float64(1) {
		t.Fatalf("lineage: HTTP %d %v", st, res)
	}
	if st, res := s.do(t, tok, "POST", "/api/v1/lineage", `{"eventTime":"now"}`); st != http.StatusBadRequest || !strings.Contains(res["error"].(string), "/eventTime: not a date-time") {
		t.Errorf("a bad event: HTTP %d %v", st, res)
	}

	type edge struct{ From, To, Origin, Job string }
	pic := decode[struct {
		Datasets []string `json:"datasets"`
		External []struct {
			ID, Namespace, Name string
		} `json:"external"`
		Edges []edge `json:"edges"`
	}](t, step(t, d, 0, "", "lineage", "-o", "json").stdout)
	want := map[edge]bool{
		{"events_raw", "sessions", "config", ""}:                                    false,
		{"events_daily", "revenue_daily", "config", ""}:                             false,
		{"sessions", "analytics.finance_dashboard", "openlineage", "metabase.sync"}: false,
	}
	for _, e := range pic.Edges {
		if _, ok := want[e]; ok {
			want[e] = true
		}
		if e.Origin != "config" && e.Origin != "openlineage" {
			t.Errorf("edge %+v: the demo has no dbt datasets", e)
		}
	}
	for e, found := range want {
		if !found {
			t.Errorf("lineage -o json lacks %+v: %+v", e, pic.Edges)
		}
	}
	if len(pic.External) != 1 || pic.External[0].Namespace != "metabase://bi" {
		t.Errorf("external %+v", pic.External)
	}
	dot := step(t, d, 0, "", "lineage", "sessions").stdout
	for _, w := range []string{`"sessions" -> "analytics.finance_dashboard" [style=dotted`, `label="metabase.sync"`, "seen by OpenLineage", "outside refill"} {
		if !strings.Contains(dot, w) {
			t.Errorf("dot lacks %q:\n%s", w, dot)
		}
	}
	mmd := step(t, d, 0, "", "lineage", "--format", "mermaid").stdout
	if !strings.Contains(mmd, `sessions -.->|"openlineage: metabase.sync"| ol_1`) {
		t.Errorf("mermaid:\n%s", mmd)
	}
	text := step(t, d, 0, "", "lineage", "--format", "text").stdout
	if !strings.Contains(text, "sessions      analytics.finance_dashboard  openlineage (job metabase.sync, last seen 2026-11-30 06:15)") {
		t.Errorf("text:\n%s", text)
	}
	if events := step(t, d, 0, "", "lineage", "events_daily", "-o", "json").stdout; strings.Contains(events, "finance_dashboard") {
		t.Errorf("events_daily's neighbourhood shows the dashboard that reads sessions:\n%s", events)
	}

	p := decode[struct {
		planJSON
		Consumers []struct {
			Dataset, Reads, Job string
		} `json:"consumers"`
	}](t, step(t, d, 0, "", append(args, "-o", "json")...).stdout)
	reason := "sessions is read by analytics.finance_dashboard (job metabase.sync, seen 2026-11-30), a consumer outside refill: not rebuilt"
	if p.Tier != "semi-auto" || len(p.Consumers) != 1 || p.Consumers[0].Dataset != "analytics.finance_dashboard" || strings.Join(p.Reasons, ";") != reason {
		t.Errorf("after lineage: tier %s consumers %+v reasons %q", p.Tier, p.Consumers, p.Reasons)
	}
	shown := step(t, d, 0, "", "show", p.ID).stdout
	if !strings.Contains(shown, "analytics.finance_dashboard reads sessions — not rebuilt: consumer outside refill (job metabase.sync, last seen 2026-11-30 06:15)") {
		t.Errorf("show:\n%s", shown)
	}
}
