// Package lineage is the DAG of datasets built from their upstream edges: the
// downstream closure a request touches, the order it must run in, the sources
// to gate, and text pictures of it (DOT, Mermaid).
package lineage

import (
	"slices"
	"strings"

	"github.com/refill-dev/refill"
)

// Graph is the lineage of a configuration. It is immutable once built.
type Graph struct {
	datasets   map[string]*refill.Dataset
	downstream map[string][]string // sorted
}

// New builds the graph and checks it is a DAG over known datasets. The
// config loader reports these problems with file and line first; New checks
// again so that a Graph can never be cyclic.
func New(datasets map[string]*refill.Dataset) (*Graph, error) {
	g := &Graph{datasets: datasets, downstream: map[string][]string{}}
	for _, name := range sortedKeys(datasets) {
		for _, up := range datasets[name].Upstream {
			if _, ok := datasets[up]; !ok {
				return nil, refill.BadInputf("dataset %s: unknown upstream %q", name, up)
			}
			g.downstream[up] = append(g.downstream[up], name)
		}
	}
	for k := range g.downstream {
		slices.Sort(g.downstream[k])
	}
	if cycles := Cycles(datasets); len(cycles) > 0 {
		return nil, refill.BadInputf("lineage has a cycle: %s", strings.Join(cycles[0], " -> "))
	}
	return g, nil
}

// Cycles finds every lineage cycle by depth-first search over upstream edges.
// Each is returned once, in data-flow order (upstream before downstream),
// rotated to start at its alphabetically first dataset and closed by
// repeating it, as in [a b c a]. Self-references and unknown upstreams are
// reported elsewhere and ignored here. The config loader reports each with
// its line; New refuses a graph with any.
func Cycles(datasets map[string]*refill.Dataset) [][]string {
	names := sortedKeys(datasets)
	const (
		unvisited = iota
		onStack
		done
	)
	state := map[string]int{}
	var stack []string
	var out [][]string
	found := map[string]bool{}
	var visit func(string)
	visit = func(n string) {
		state[n] = onStack
		stack = append(stack, n)
		for _, up := range datasets[n].Upstream {
			if up == n || datasets[up] == nil {
				continue
			}
			switch state[up] {
			case unvisited:
				visit(up)
			case onStack:
				// stack[i:] runs downstream -> upstream: each lists the next
				// as its upstream, and the last lists stack[i].
				i := slices.Index(stack, up)
				cyc := slices.Clone(stack[i:])
				slices.Reverse(cyc)
				start := slices.Index(cyc, slices.Min(cyc))
				cyc = append(cyc[start:], cyc[:start]...)
				cyc = append(cyc, cyc[0])
				if k := strings.Join(cyc, " "); !found[k] {
					found[k] = true
					out = append(out, cyc)
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = done
	}
	for _, n := range names {
		if state[n] == unvisited {
			visit(n)
		}
	}
	return out
}

// Dataset returns a dataset by name.
func (g *Graph) Dataset(name string) (*refill.Dataset, bool) {
	d, ok := g.datasets[name]
	return d, ok
}

// Downstream returns the datasets that read name directly, sorted.
func (g *Graph) Downstream(name string) []string { return g.downstream[name] }

// Node is one dataset of a closure with its topological level.
type Node struct {
	Dataset *refill.Dataset
	// Order is 1 for datasets with no upstream inside the closure, and one
	// more than the highest Order among its upstreams otherwise, so that
	// datasets of equal order never depend on each other.
	Order int
	// Target is true when the dataset was named in the request.
	Target bool
}

// Closure is what a request over targets touches.
type Closure struct {
	// Steps are the datasets to rebuild, by Order then name. Sources are
	// never steps.
	Steps []Node
	// Sources are every source upstream of a step (transitively), plus any
	// source named as a target, sorted: the datasets the gate checks.
	Sources []string
	// Downstream are the step datasets that lie strictly downstream of some
	// target (the aggregate rule looks at these).
	Downstream []string
	// LineageOnly are the lineage-only datasets the steps change, sorted:
	// those reading a step directly or through other lineage-only ones (a
	// view of a rebuilt table). They are never steps and never gated, but
	// they pass their upstream through: a step reading one is ordered after
	// the steps behind it, and the policy counts their tags as it counts a
	// rebuilt dataset's. A lineage-only dataset the plan does not change
	// (a view over a source) is not listed.
	LineageOnly []string
	// LeftOut are the datasets with jobs that a selection left out (Select)
	// but that read what the steps rewrite.
	LeftOut []LeftOut
}

// Closure computes the downstream closure of targets. Naming a source means
// "rebuild everything downstream of it".
func (g *Graph) Closure(targets []string) (Closure, error) {
	in := map[string]bool{}
	isTarget := map[string]bool{}
	for _, t := range targets {
		if _, ok := g.datasets[t]; !ok {
			return Closure{}, refill.NotFoundf("unknown dataset %q (known: %s)", t, strings.Join(sortedKeys(g.datasets), ", "))
		}
		isTarget[t] = true
		in[t] = true
		g.downstreamOf(t, in)
	}
	return g.closureOf(in, isTarget), nil
}

// closureOf orders the datasets in in: its steps, their sources, the
// lineage-only datasets they change. isTarget are the datasets asked for.
func (g *Graph) closureOf(in, isTarget map[string]bool) Closure {
	below := map[string]bool{} // strictly downstream of a target
	for t := range isTarget {
		g.downstreamOf(t, below)
	}
	order := map[string]int{}
	var level, through func(n string) int
	// level is a step's order: one more than the highest order of the
	// steps it reads, directly or through lineage-only datasets.
	level = func(n string) int {
		if o, ok := order[n]; ok {
			return o
		}
		o := 1
		for _, up := range g.datasets[n].Upstream {
			switch u := g.datasets[up]; {
			case !in[up]:
			case u.LineageOnly:
				o = max(o, through(up)+1)
			case !u.IsSource():
				o = max(o, level(up)+1)
			}
		}
		order[n] = o
		return o
	}
	// through is, for a lineage-only dataset, the highest order of the
	// steps it passes on: 0 when it reads none.
	passed := map[string]int{}
	through = func(n string) int {
		if o, ok := passed[n]; ok {
			return o
		}
		o := 0
		for _, up := range g.datasets[n].Upstream {
			switch u := g.datasets[up]; {
			case !in[up]:
			case u.LineageOnly:
				o = max(o, through(up))
			case !u.IsSource():
				o = max(o, level(up))
			}
		}
		passed[n] = o
		return o
	}
	var c Closure
	sources := map[string]bool{}
	for _, n := range sortedKeys(in) {
		d := g.datasets[n]
		if d.LineageOnly {
			if through(n) > 0 {
				c.LineageOnly = append(c.LineageOnly, n)
			}
			continue
		}
		if d.IsSource() {
			sources[n] = true
			continue
		}
		c.Steps = append(c.Steps, Node{Dataset: d, Order: level(n), Target: isTarget[n]})
		if below[n] {
			c.Downstream = append(c.Downstream, n)
		}
		for _, s := range g.upstreamSources(n) {
			sources[s] = true
		}
	}
	slices.SortStableFunc(c.Steps, func(a, b Node) int {
		if a.Order != b.Order {
			return a.Order - b.Order
		}
		return strings.Compare(a.Dataset.Name, b.Dataset.Name)
	})
	c.Sources = sortedKeys(sources)
	return c
}

// upstreamSources returns every source upstream of n, transitively,
// through lineage-only datasets, which are not sources themselves.
func (g *Graph) upstreamSources(n string) []string {
	seen := map[string]bool{}
	var out []string
	var walk func(n string)
	walk = func(n string) {
		for _, up := range g.datasets[n].Upstream {
			if seen[up] {
				continue
			}
			seen[up] = true
			if u := g.datasets[up]; u.IsSource() && !u.LineageOnly {
				out = append(out, up)
			}
			walk(up)
		}
	}
	walk(n)
	return out
}

// Neighbourhood returns name with everything upstream and downstream of it:
// the part of the lineage a person looking at one dataset cares about.
func (g *Graph) Neighbourhood(name string) ([]string, error) {
	if _, ok := g.datasets[name]; !ok {
		return nil, refill.NotFoundf("unknown dataset %q (known: %s)", name, strings.Join(sortedKeys(g.datasets), ", "))
	}
	set := map[string]bool{name: true}
	var up func(n string)
	up = func(n string) {
		for _, u := range g.datasets[n].Upstream {
			if !set[u] {
				set[u] = true
				up(u)
			}
		}
	}
	var down func(n string)
	down = func(n string) {
		for _, d := range g.downstream[n] {
			if !set[d] {
				set[d] = true
				down(d)
			}
		}
	}
	up(name)
	down(name)
	return sortedKeys(set), nil
}

// Names returns all dataset names, sorted.
func (g *Graph) Names() []string { return sortedKeys(g.datasets) }

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Highlight marks datasets in a picture: targets and rebuilt steps are drawn
// differently from the rest.
type Highlight struct {
	Targets map[string]bool
	Rebuilt map[string]bool
}

// DOT renders the subgraph over names as Graphviz DOT, sources as cylinders,
// tagged datasets with their tags, highlighted ones filled, and each edge
// styled by where it was declared (DrawDOT).
func (g *Graph) DOT(names []string, h Highlight) string {
	return g.DrawDOT(g.Picture(names, nil, nil), h)
}

// Mermaid renders the subgraph over names as a Mermaid flowchart
// (DrawMermaid).
func (g *Graph) Mermaid(names []string, h Highlight) string {
	return g.DrawMermaid(g.Picture(names, nil, nil), h)
}

func label(d *refill.Dataset, nl string) string {
	l := d.Name
	if d.Job != nil {
		l += nl + string(d.Job.Kind)
	} else {
		l += nl + "source"
	}
	if len(d.Tags) > 0 {
		l += " [" + strings.Join(d.Tags, ",") + "]"
	}
	return l
}
