package lineage

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
)

func stepNames(c Closure) []string {
	var out []string
	for _, n := range c.Steps {
		out = append(out, n.Dataset.Name)
	}
	slices.Sort(out)
	return out
}

func leftOutText(c Closure) []string {
	var out []string
	for _, l := range c.LeftOut {
		out = append(out, l.Describe())
	}
	return out
}

func TestSelect(t *testing.T) {
	// src -> raw -> daily -> agg ; daily -> feed ; daily -> view(lineage
	// only) -> report ; src -> other.
	specs := []string{"src", "raw<-src", "daily<-raw", "agg<-daily", "feed<-daily", "view<-daily", "report<-view", "other<-src"}
	build := func(t *testing.T) *Graph {
		d := ds(specs...)
		d["agg"].Tags = []string{"aggregate"}
		d["feed"].Tags = []string{"partner"}
		d["report"].Tags = []string{"aggregate"}
		d["view"].Job, d["view"].LineageOnly = nil, true
		g, err := New(d)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	for _, c := range []struct {
		name     string
		sel      Selection
		steps    []string
		selected []string
		leftOut  []string
		lineage  []string
	}{
		{"a bare name takes everything downstream", Selection{Select: []string{"daily"}},
			[]string{"agg", "daily", "feed", "report"}, []string{"daily"}, nil, []string{"view"}},
		{"name+ is the same", Selection{Select: []string{"daily+"}},
			[]string{"agg", "daily", "feed", "report"}, []string{"daily"}, nil, []string{"view"}},
		{"+name adds the upstream jobs, not the source, and their downstream", Selection{Select: []string{"+daily"}},
			[]string{"agg", "daily", "feed", "raw", "report"}, []string{"daily", "raw"}, nil, []string{"view"}},
		{"--no-downstream takes the one table; what reads it is named", Selection{Select: []string{"daily"}, NoDownstream: true},
			[]string{"daily"}, []string{"daily"},
			[]string{"agg reads daily, which this plan rewrites, and is not rebuilt", "feed reads daily, which this plan rewrites, and is not rebuilt",
				"report reads view, which this plan rewrites, and is not rebuilt"}, []string{"view"}},
		{"--exclude a bare name leaves out that one", Selection{Select: []string{"raw"}, Exclude: []string{"feed"}},
			[]string{"agg", "daily", "raw", "report"}, []string{"raw"},
			[]string{"feed reads daily, which this plan rewrites, and is not rebuilt"}, []string{"view"}},
		{"--exclude name+ leaves out what is downstream too", Selection{Select: []string{"raw"}, Exclude: []string{"daily+"}},
			[]string{"raw"}, []string{"raw"}, []string{"daily reads raw, which this plan rewrites, and is not rebuilt"}, nil},
		{"tag: takes the tagged and their downstream", Selection{Select: []string{"tag:aggregate"}},
			[]string{"agg", "report"}, []string{"agg", "report"}, nil, nil},
		{"a view cannot be excluded: its rows change all the same", Selection{Select: []string{"daily"}, Exclude: []string{"view+"}},
			[]string{"agg", "daily", "feed"}, []string{"daily"}, []string{"report reads view, which this plan rewrites, and is not rebuilt"}, []string{"view"}},
		{"tag: in --exclude", Selection{Select: []string{"daily"}, Exclude: []string{"tag:partner"}},
			[]string{"agg", "daily", "report"}, []string{"daily"}, []string{"feed reads daily, which this plan rewrites, and is not rebuilt"}, []string{"view"}},
		{"several selectors, one set", Selection{Select: []string{"agg", "tag:aggregate", "+agg"}, NoDownstream: true},
			[]string{"agg", "daily", "raw", "report"}, []string{"agg", "daily", "raw", "report"},
			[]string{"feed reads daily, which this plan rewrites, and is not rebuilt"}, []string{"view"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := build(t)
			cl, selected, err := g.Select(c.sel)
			if err != nil {
				t.Fatal(err)
			}
			if got := stepNames(cl); !slices.Equal(got, c.steps) {
				t.Errorf("steps = %v, want %v", got, c.steps)
			}
			if !slices.Equal(selected, c.selected) {
				t.Errorf("selected = %v, want %v", selected, c.selected)
			}
			if got := leftOutText(cl); !slices.Equal(got, c.leftOut) {
				t.Errorf("left out = %q, want %q", got, c.leftOut)
			}
			if !slices.Equal(cl.LineageOnly, c.lineage) {
				t.Errorf("lineage only = %v, want %v", cl.LineageOnly, c.lineage)
			}
		})
	}
	// A plain selection is Closure's, to the order.
	g := build(t)
	want, _ := g.Closure([]string{"raw"})
	got, _, err := g.Select(Selection{Select: []string{"raw"}})
	if err != nil || !slices.Equal(stepNames(got), stepNames(want)) || len(got.LeftOut) != 0 {
		t.Errorf("Select(raw) = %v, %v, %v; want Closure(raw)'s %v", stepNames(got), got.LeftOut, err, stepNames(want))
	}
	for i := range want.Steps {
		if want.Steps[i].Order != got.Steps[i].Order || want.Steps[i].Target != got.Steps[i].Target {
			t.Errorf("step %d: %+v, want %+v", i, got.Steps[i], want.Steps[i])
		}
	}
}

func TestSelectBadSelectors(t *testing.T) {
	g := setup(t, "src", "events_raw<-src", "events_daily<-events_raw", "revenue_daily<-events_daily")
	for _, c := range []struct {
		sel  Selection
		want []string
	}{
		{Selection{Select: []string{"events_dayly"}}, []string{`unknown dataset "events_dayly"`, "(known: events_daily"}},
		{Selection{Select: []string{"+events_dayly+"}}, []string{`"+events_dayly+"`, "(known: events_daily"}},
		{Selection{Select: []string{"tag:nope"}}, []string{`"tag:nope"`, "no dataset is tagged nope"}},
		{Selection{Select: []string{"tag:"}}, []string{`"tag:"`, "tag:TAG"}},
		{Selection{Select: []string{"++events_daily"}}, []string{`"++events_daily"`, "NAME+"}},
		{Selection{Select: []string{""}}, []string{"empty selector"}},
		{Selection{Select: []string{"events_daily"}, Exclude: []string{"revenue_dailyy"}}, []string{"--exclude", `"revenue_dailyy"`, "(known: revenue_daily"}},
		{Selection{Select: []string{"events_daily"}, Exclude: []string{"events_daily"}}, []string{"leaves nothing"}},
		{Selection{}, []string{"name at least one dataset"}},
	} {
		_, _, err := g.Select(c.sel)
		if !errors.Is(err, refill.ErrBadInput) || refill.ExitCode(err) != refill.ExitBadInput {
			t.Errorf("%+v: %v; want bad input (exit 2)", c.sel, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: %q does not say %q", c.sel, err, w)
			}
		}
	}
}

// FuzzSelect feeds selectors as a person or an API client might type
// them: a selection either fails as bad input or holds together — every
// step is a dataset with a job that no --exclude names, nothing left out
// is a step, and what is left out reads a step or what one changes.
func FuzzSelect(f *testing.F) {
	for _, s := range []string{"daily", "daily+", "+daily", "+daily+", "tag:aggregate", "tag:", "++", "+", "", " daily ", "tag:aggregate+", "da ily", "daily\x00", "tag:tag:x"} {
		f.Add(s, "feed", false)
		f.Add(s, "", true)
		f.Add("raw", s, false)
	}
	f.Fuzz(func(t *testing.T, sel, exclude string, noDownstream bool) {
		d := ds("src", "raw<-src", "daily<-raw", "agg<-daily", "feed<-daily", "view<-daily", "report<-view")
		d["agg"].Tags = []string{"aggregate"}
		d["view"].Job, d["view"].LineageOnly = nil, true
		g, err := New(d)
		if err != nil {
			t.Fatal(err)
		}
		s := Selection{Select: strings.Split(sel, ","), NoDownstream: noDownstream}
		if exclude != "" {
			s.Exclude = strings.Split(exclude, ",")
		}
		c, selected, err := g.Select(s)
		if err != nil {
			if !errors.Is(err, refill.ErrBadInput) {
				t.Fatalf("Select(%+v): %v, not bad input", s, err)
			}
			return
		}
		if len(selected) == 0 {
			t.Fatalf("Select(%+v) selected nothing without an error", s)
		}
		steps := map[string]bool{}
		for _, n := range c.Steps {
			if n.Dataset.IsSource() || n.Dataset.LineageOnly {
				t.Fatalf("step %s has no job", n.Dataset.Name)
			}
			for _, e := range s.Exclude {
				if strings.TrimSpace(e) == n.Dataset.Name {
					t.Fatalf("step %s is excluded by %q", n.Dataset.Name, e)
				}
			}
			steps[n.Dataset.Name] = true
		}
		changed := map[string]bool{}
		for n := range steps {
			changed[n] = true
		}
		for _, n := range c.LineageOnly {
			changed[n] = true
		}
		for _, l := range c.LeftOut {
			if steps[l.Dataset.Name] {
				t.Fatalf("%s is both a step and left out", l.Dataset.Name)
			}
			for _, r := range l.Reads {
				if !changed[r] {
					t.Fatalf("%s is left out for reading %s, which the plan does not change", l.Dataset.Name, r)
				}
			}
		}
	})
}
