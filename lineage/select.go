package lineage

import (
	"slices"
	"strings"

	"github.com/refill-dev/refill"
)

// Selection is what a plan was asked to rebuild, as selectors:
//
//	name        the dataset, and everything downstream of it
//	name+       the same, said outright
//	+name       the dataset and every dataset with a job upstream of it,
//	            and everything downstream of those
//	+name+      the same
//	tag:T       every dataset tagged T, and everything downstream
//
// With NoDownstream, only what the selectors name themselves is taken
// (name, +name's upstream, tag:T's datasets), nothing downstream of it.
// Exclude takes datasets out afterwards, by the same selectors read
// literally: name is that dataset alone, name+ it and everything
// downstream of it, +name it and everything upstream, tag:T every dataset
// so tagged.
type Selection struct {
	Select       []string
	Exclude      []string
	NoDownstream bool
}

// String is the selection as a command line gives it:
// "events_raw+ --exclude partner_feed --no-downstream".
func (s Selection) String() string {
	parts := slices.Clone(s.Select)
	for _, e := range s.Exclude {
		parts = append(parts, "--exclude "+e)
	}
	if s.NoDownstream {
		parts = append(parts, "--no-downstream")
	}
	return strings.Join(parts, " ")
}

// IsPlain reports whether s is only dataset names taken with what is
// downstream of them, as refill always took them.
func (s Selection) IsPlain() bool {
	if s.NoDownstream || len(s.Exclude) > 0 {
		return false
	}
	for _, sel := range s.Select {
		if strings.ContainsAny(sel, "+:") {
			return false
		}
	}
	return true
}

// selector is one parsed selector.
type selector struct {
	text       string
	name, tag  string
	up, down   bool // a leading or trailing +
	plainName  bool // neither + nor tag:
	datasetSet []string
}

func (g *Graph) parseSelector(text, flag string) (selector, error) {
	s := selector{text: text}
	t := strings.TrimSpace(text)
	if t == "" {
		return s, refill.BadInputf("%s: an empty selector; name a dataset, name+, +name or tag:TAG", flag)
	}
	if tag, ok := strings.CutPrefix(t, "tag:"); ok {
		s.tag = tag
		if tag == "" || strings.ContainsAny(tag, "+: ") {
			return s, refill.BadInputf("%s %q: a tag selector is tag:TAG, with a tag name after the colon", flag, text)
		}
		for _, n := range g.Names() {
			if slices.Contains(g.datasets[n].Tags, tag) {
				s.datasetSet = append(s.datasetSet, n)
			}
		}
		if len(s.datasetSet) == 0 {
			return s, refill.BadInputf("%s %q: no dataset is tagged %s %s", flag, text, tag, refill.Known(tag, g.tags(), 5))
		}
		return s, nil
	}
	name := t
	name, s.up = strings.CutPrefix(name, "+")
	name, s.down = strings.CutSuffix(name, "+")
	s.name = name
	s.plainName = !s.up && !s.down
	if name == "" || strings.ContainsAny(name, "+: ") {
		return s, refill.BadInputf("%s %q: a selector is NAME, NAME+, +NAME, +NAME+ or tag:TAG %s", flag, text, refill.Known(strings.Trim(name, "+: "), g.Names(), 5))
	}
	if _, ok := g.datasets[name]; !ok {
		if s.plainName && flag == "selector" {
			return s, refill.BadInputf("unknown dataset %q %s", name, refill.Known(name, g.Names(), 5))
		}
		return s, refill.BadInputf("%s %q: unknown dataset %q %s", flag, text, name, refill.Known(name, g.Names(), 5))
	}
	s.datasetSet = []string{name}
	return s, nil
}

// tags are every tag some dataset carries, sorted.
func (g *Graph) tags() []string {
	var out []string
	for _, d := range g.datasets {
		for _, t := range d.Tags {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	slices.Sort(out)
	return out
}

// upstream adds to set every dataset upstream of n, transitively; jobs
// limits it to datasets with a job (it walks through the others).
func (g *Graph) upstream(n string, jobs bool, set map[string]bool) {
	for _, u := range g.datasets[n].Upstream {
		d := g.datasets[u]
		if d == nil {
			continue
		}
		if !jobs || (!d.IsSource() && !d.LineageOnly) {
			set[u] = true
		}
		g.upstream(u, jobs, set)
	}
}

// downstreamOf adds to set every dataset downstream of n, transitively.
func (g *Graph) downstreamOf(n string, set map[string]bool) {
	for _, d := range g.downstream[n] {
		if !set[d] {
			set[d] = true
			g.downstreamOf(d, set)
		}
	}
}

// Select is the closure of a selection: the datasets the selectors take
// (Selected, sorted: the plan's targets), what is rebuilt, and what is
// left out of it but reads what it rewrites (Closure.LeftOut). Bad
// selectors are bad input that names the selector and the nearest names.
func (g *Graph) Select(sel Selection) (Closure, []string, error) {
	if len(sel.Select) == 0 {
		return Closure{}, nil, refill.BadInputf("name at least one dataset to reprocess (known: %s)", strings.Join(g.Names(), ", "))
	}
	selected := map[string]bool{}
	for _, text := range sel.Select {
		s, err := g.parseSelector(text, "selector")
		if err != nil {
			return Closure{}, nil, err
		}
		for _, n := range s.datasetSet {
			selected[n] = true
			if s.up {
				g.upstream(n, true, selected)
			}
		}
	}
	in := map[string]bool{}
	for n := range selected {
		in[n] = true
		if !sel.NoDownstream {
			g.downstreamOf(n, in)
		}
	}
	excluded := map[string]bool{}
	for _, text := range sel.Exclude {
		s, err := g.parseSelector(text, "--exclude")
		if err != nil {
			return Closure{}, nil, err
		}
		for _, n := range s.datasetSet {
			excluded[n] = true
			if s.down {
				g.downstreamOf(n, excluded)
			}
			if s.up {
				g.upstream(n, false, excluded)
			}
		}
	}
	for n := range excluded {
		// A view's rows change with what it reads, excluded or not: it
		// stays, and its tags count.
		if g.datasets[n].LineageOnly {
			delete(excluded, n)
			continue
		}
		delete(in, n)
		delete(selected, n)
	}
	if len(selected) == 0 {
		return Closure{}, nil, refill.BadInputf("--exclude %s leaves nothing of %s to reprocess", strings.Join(sel.Exclude, " "), strings.Join(sel.Select, " "))
	}
	// What the steps change passes on through lineage-only datasets (a
	// view of a rebuilt table), whatever the selection: those are never
	// steps, but their rows change all the same.
	var through func(n string)
	through = func(n string) {
		for _, d := range g.downstream[n] {
			if g.datasets[d].LineageOnly && !in[d] && !excluded[d] {
				in[d] = true
				through(d)
			}
		}
	}
	for _, n := range sortedKeys(in) {
		if !g.datasets[n].LineageOnly && !g.datasets[n].IsSource() {
			through(n)
		}
	}
	c := g.closureOf(in, selected)
	c.LeftOut = g.leftOut(c)
	return c, sortedKeys(selected), nil
}

// LeftOut is a dataset with a job that the plan does not rebuild but that
// reads what it rewrites: its rows go on being built from the old data
// until someone rebuilds it.
type LeftOut struct {
	Dataset *refill.Dataset
	// Reads are the steps, or the lineage-only datasets they change, that
	// it reads directly, sorted.
	Reads []string
}

// leftOut lists the datasets with jobs outside c that read one of c's
// steps or changed lineage-only datasets directly.
func (g *Graph) leftOut(c Closure) []LeftOut {
	changed := map[string]bool{}
	for _, n := range c.Steps {
		changed[n.Dataset.Name] = true
	}
	for _, n := range c.LineageOnly {
		changed[n] = true
	}
	reads := map[string][]string{}
	for n := range changed {
		for _, d := range g.downstream[n] {
			ds := g.datasets[d]
			if changed[d] || ds.IsSource() || ds.LineageOnly {
				continue
			}
			reads[d] = append(reads[d], n)
		}
	}
	var out []LeftOut
	for _, n := range sortedKeys(reads) {
		r := reads[n]
		slices.Sort(r)
		out = append(out, LeftOut{Dataset: g.datasets[n], Reads: r})
	}
	return out
}

// Sealed is l as a plan seals it.
func (l LeftOut) Sealed() refill.LeftOut {
	return refill.LeftOut{Dataset: l.Dataset.Name, Reads: l.Reads, Tags: l.Dataset.Tags}
}

// Describe says, for people, what a left-out dataset reads.
func (l LeftOut) Describe() string { return l.Sealed().Describe() }

// SelectionOf is the selection a plan's request made: its selectors, or,
// for a request of plain names, its targets.
func SelectionOf(r refill.Request) Selection {
	if len(r.Select) > 0 {
		return Selection{Select: r.Select, Exclude: r.Exclude, NoDownstream: r.NoDownstream}
	}
	return Selection{Select: r.Targets, Exclude: r.Exclude, NoDownstream: r.NoDownstream}
}
