package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

type selectedPlan struct {
	ID      string   `json:"id"`
	Tier    string   `json:"tier"`
	Reasons []string `json:"reasons"`
	Request struct {
		Targets      []string `json:"targets"`
		Select       []string `json:"select"`
		Exclude      []string `json:"exclude"`
		NoDownstream bool     `json:"no_downstream"`
	} `json:"request"`
	Steps []struct {
		Dataset string `json:"dataset"`
	} `json:"steps"`
	LeftOut []struct {
		Dataset string   `json:"dataset"`
		Reads   []string `json:"reads"`
	} `json:"left_out"`
}

func (p selectedPlan) steps() []string {
	var out []string
	for _, s := range p.Steps {
		out = append(out, s.Dataset)
	}
	slices.Sort(out)
	return out
}

func (p selectedPlan) leftOut() []string {
	var out []string
	for _, l := range p.LeftOut {
		out = append(out, l.Dataset+"<-"+strings.Join(l.Reads, ","))
	}
	return out
}

// Selectors narrow a plan through the binary: what they leave out that
// reads what the plan rewrites is named, in the text and the JSON, and
// keeps the plan manual when it is tagged so; a bad selector exits 2,
// names the nearest datasets and stores nothing; and a config edited
// afterwards so that a new dataset reads what the plan rewrites makes the
// sealed plan stale.
func TestSelectorsNarrowAPlan(t *testing.T) {
	t.Parallel()
	d := setup(t)
	plan := func(args ...string) selectedPlan {
		t.Helper()
		args = append(append([]string{"plan"}, args...), "--from", "2026-11-26", "--to", "2026-11-27", "--reason", "narrow", "--as", "alice", "-o", "json")
		return decode[selectedPlan](t, step(t, d, 0, "", args...).stdout)
	}

	p := plan("events_raw+", "--exclude", "partner_feed")
	if got := p.steps(); !slices.Equal(got, []string{"events_daily", "revenue_daily", "sessions"}) {
		t.Errorf("events_raw+ --exclude partner_feed: steps %v", got)
	}
	if got := p.leftOut(); !slices.Equal(got, []string{"partner_feed<-events_daily"}) {
		t.Errorf("left out %v, want partner_feed, which reads events_daily", got)
	}
	if fmt.Sprint(p.Request.Select, p.Request.Exclude) != "[events_raw+] [partner_feed]" || fmt.Sprint(p.Request.Targets) != "[events_raw]" {
		t.Errorf("request %+v", p.Request)
	}
	if p.Tier != "manual" || !slices.Contains(p.Reasons, "partner_feed is tagged external (manual_tags): left out of the plan, it reads events_daily, which the plan rewrites") {
		t.Errorf("tier %s, reasons %q", p.Tier, p.Reasons)
	}

	// One table alone: nothing reads revenue_daily, so nothing is left out.
	p = plan("revenue_daily", "--no-downstream")
	if got := p.steps(); !slices.Equal(got, []string{"revenue_daily"}) || len(p.LeftOut) != 0 {
		t.Errorf("revenue_daily --no-downstream: steps %v, left out %v", got, p.leftOut())
	}

	// +name takes the jobs upstream; the text names what is left out.
	r := step(t, d, 0, "", "plan", "+revenue_daily", "--no-downstream", "--from", "2026-11-26", "--to", "2026-11-27", "--reason", "narrow", "--as", "alice")
	for _, want := range []string{
		"selected  +revenue_daily --no-downstream",
		"Left out, but reading what this plan rewrites (1):",
		"partner_feed reads events_daily, which this plan rewrites, and is not rebuilt",
		"~ events_daily", "~ revenue_daily",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("plan +revenue_daily --no-downstream does not say %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "~ partner_feed") || strings.Contains(r.stdout, "~ sessions") {
		t.Errorf("plan +revenue_daily --no-downstream rebuilds more than two tables:\n%s", r.stdout)
	}
	id := strings.Fields(r.stdout)[1]

	before := step(t, d, 0, "", "plans", "-o", "json").stdout
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"events_dayly"}, `unknown dataset "events_dayly" (known: events_daily`},
		{[]string{"tag:agregate"}, `selector "tag:agregate": no dataset is tagged agregate (known: aggregate`},
		{[]string{"events_raw", "--exclude", "parter_feed"}, `--exclude "parter_feed": unknown dataset "parter_feed" (known: partner_feed`},
		{[]string{"events_raw+", "--exclude", "+events_raw"}, "leaves nothing"},
		{[]string{"+"}, `selector "+"`},
	} {
		args := append(append([]string{"plan"}, c.args...), "--from", "2026-11-26", "--to", "2026-11-27", "--reason", "narrow", "--as", "alice")
		step(t, d, 2, c.want, args...)
	}
	if after := step(t, d, 0, "", "plans", "-o", "json").stdout; after != before {
		t.Errorf("bad selectors stored plans:\nbefore %s\nafter %s", before, after)
	}

	// The config changes under the sealed plan: a new table reads
	// events_daily, which the plan rewrites and no longer covers.
	if strings.Contains(step(t, d, 0, "", "show", id).stdout, "Stale") {
		t.Fatalf("the plan is stale before the config changed")
	}
	cfg := filepath.Join(d, "refill.yaml")
	data, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	extra := "  daily_copy:\n    table: daily_copy\n    partition: {column: day}\n    upstream: [events_daily]\n    job: {query: \"SELECT day, amount FROM events_daily WHERE day = :partition\"}\n"
	if err := os.WriteFile(cfg, append(data, extra...), 0o644); err != nil {
		t.Fatal(err)
	}
	step(t, d, 0, "daily_copy now reads what the plan rewrites, and the plan leaves it out", "show", id)

	// What is left out counts for the tier by its tags: retagging it
	// makes the sealed plan stale too.
	p = plan("+revenue_daily", "--no-downstream")
	data, err = os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(strings.Replace(string(data), "tags: [external]", "tags: [external, billing]", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	step(t, d, 0, "the tags of partner_feed, which the plan leaves out, changed: sealed [external], now [external, billing]", "show", p.ID)
}
