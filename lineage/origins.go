package lineage

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/refill-dev/refill"
)

// Origin says where a lineage edge came from.
type Origin string

// Edge origins.
const (
	// OriginConfig is an upstream declared in refill.yaml.
	OriginConfig Origin = "config"
	// OriginDbt is an upstream of a dataset imported from a dbt manifest
	// (its From starts with "dbt").
	OriginDbt Origin = "dbt"
	// OriginOpenLineage is an edge a running job reported in an
	// OpenLineage event: seen, not declared.
	OriginOpenLineage Origin = "openlineage"
)

// Edge is one edge of a picture and where it came from.
type Edge struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Origin Origin `json:"origin"`
	// Job and LastSeen are, for an OpenLineage edge, the job last seen
	// reading From and writing To, and when.
	Job      string     `json:"job,omitempty"`
	LastSeen *time.Time `json:"last_seen,omitempty"`
}

// External is a dataset OpenLineage reported that refill does not
// manage. ID is how edges name it: its OpenLineage name, or namespace/name
// when the name alone would be ambiguous.
type External struct {
	ID        string `json:"id"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// Observed is an input → output edge a job reported (OpenLineage), its
// ends as the producer named them.
type Observed struct {
	Input, Output refill.OpenLineageName
	Job           string
	LastSeen      time.Time
}

// Picture is what a lineage picture shows: refill's datasets, the
// datasets outside refill that OpenLineage saw next to them, and every
// edge with its origin.
type Picture struct {
	Datasets []string   `json:"datasets"`
	External []External `json:"external"`
	Edges    []Edge     `json:"edges"`
}

// Picture gathers the edges among names — declared ones (from refill.yaml
// or a dbt manifest), then the observed ones with at least one end among
// names. match maps an OpenLineage dataset to the refill datasets it is
// (openlineage.Matcher.Match); an end that matches none is drawn as an
// external dataset, and an end that matches a dataset outside names drops
// the edge (it belongs to another part of the picture). An observed edge
// between two external datasets says nothing about refill's and is left
// out, as is a job's read of the very table it writes. Observed edges are
// listed once per from, to and origin, with the latest job and time.
func (g *Graph) Picture(names []string, observed []Observed, match func(refill.OpenLineageName) []string) Picture {
	p := Picture{Datasets: slices.Clone(names), External: []External{}, Edges: []Edge{}}
	in := map[string]bool{}
	for _, n := range names {
		in[n] = true
	}
	for _, n := range names {
		for _, d := range g.downstream[n] {
			if in[d] {
				p.Edges = append(p.Edges, Edge{From: n, To: d, Origin: originOf(g.datasets[d])})
			}
		}
	}
	if len(observed) == 0 || match == nil {
		return p
	}

	// Each end is refill datasets (all in names), or one external dataset.
	type end struct {
		refill   []string
		external *refill.OpenLineageName
	}
	resolve := func(d refill.OpenLineageName) (end, bool) {
		ms := match(d)
		if len(ms) == 0 {
			return end{external: &d}, true
		}
		for _, m := range ms {
			if !in[m] {
				return end{}, false
			}
		}
		return end{refill: ms}, true
	}
	externals := map[refill.OpenLineageName]bool{}
	type rawEdge struct {
		from, to     string // refill names, or "" for the external end
		extFrom, ext *refill.OpenLineageName
		job          string
		seen         time.Time
	}
	var raw []rawEdge
	for _, o := range observed {
		a, ok1 := resolve(o.Input)
		b, ok2 := resolve(o.Output)
		if !ok1 || !ok2 || (a.external != nil && b.external != nil) {
			continue
		}
		froms, tos := a.refill, b.refill
		if a.external != nil {
			froms = []string{""}
			externals[*a.external] = true
		}
		if b.external != nil {
			tos = []string{""}
			externals[*b.external] = true
		}
		for _, f := range froms {
			for _, t := range tos {
				if f != "" && f == t {
					continue
				}
				raw = append(raw, rawEdge{from: f, to: t, extFrom: a.external, ext: b.external, job: o.Job, seen: o.LastSeen})
			}
		}
	}

	// External IDs: the name, unless another external dataset or a refill
	// dataset has it too; then namespace/name, made unique if need be.
	byName := map[string]int{}
	var ext []refill.OpenLineageName
	for d := range externals {
		byName[d.Name]++
		ext = append(ext, d)
	}
	slices.SortFunc(ext, func(a, b refill.OpenLineageName) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Namespace, b.Namespace))
	})
	ids := map[refill.OpenLineageName]string{}
	taken := map[string]bool{}
	for _, d := range ext {
		if byName[d.Name] == 1 && g.datasets[d.Name] == nil && !taken[d.Name] {
			ids[d] = d.Name
			taken[d.Name] = true
		}
	}
	for _, d := range ext {
		if ids[d] != "" {
			continue
		}
		id := d.Namespace + "/" + d.Name
		for i := 2; taken[id] || g.datasets[id] != nil; i++ {
			id = fmt.Sprintf("%s/%s #%d", d.Namespace, d.Name, i)
		}
		ids[d] = id
		taken[id] = true
	}
	id := func(d refill.OpenLineageName) string { return ids[d] }
	for _, d := range ext {
		p.External = append(p.External, External{ID: id(d), Namespace: d.Namespace, Name: d.Name})
	}
	slices.SortFunc(p.External, func(a, b External) int { return strings.Compare(a.ID, b.ID) })

	latest := map[[2]string]int{}
	var seen []Edge
	for _, r := range raw {
		from, to := r.from, r.to
		if r.extFrom != nil {
			from = id(*r.extFrom)
		}
		if r.ext != nil {
			to = id(*r.ext)
		}
		k := [2]string{from, to}
		t := r.seen.UTC()
		if i, ok := latest[k]; ok {
			if t.After(*seen[i].LastSeen) {
				seen[i].Job, seen[i].LastSeen = r.job, &t
			}
			continue
		}
		latest[k] = len(seen)
		seen = append(seen, Edge{From: from, To: to, Origin: OriginOpenLineage, Job: r.job, LastSeen: &t})
	}
	slices.SortFunc(seen, func(a, b Edge) int { return cmp.Or(strings.Compare(a.From, b.From), strings.Compare(a.To, b.To)) })
	p.Edges = append(p.Edges, seen...)
	return p
}

// originOf is where a dataset's upstream list was declared.
func originOf(d *refill.Dataset) Origin {
	if d != nil && strings.HasPrefix(d.From, "dbt") {
		return OriginDbt
	}
	return OriginConfig
}

// Edge styles: declared edges are plain; dbt's dashed, OpenLineage's
// dotted and labelled with their job, each in its own colour.
const (
	colourDbt         = "#457b9d"
	colourOpenLineage = "#7b2cbf"
)

var originLegend = []struct {
	origin Origin
	text   string
}{
	{OriginConfig, "declared in refill.yaml"},
	{OriginDbt, "imported from dbt"},
	{OriginOpenLineage, "seen by OpenLineage (job)"},
}

// dotStyle is how an edge of origin o is drawn, label aside.
func dotStyle(o Origin) []string {
	switch o {
	case OriginDbt:
		return []string{"style=dashed", fmt.Sprintf("color=%q", colourDbt)}
	case OriginOpenLineage:
		return []string{"style=dotted", "penwidth=1.5", fmt.Sprintf("color=%q", colourOpenLineage), fmt.Sprintf("fontcolor=%q", colourOpenLineage)}
	}
	return nil
}

func dotEdgeAttrs(e Edge) string {
	a := dotStyle(e.Origin)
	if e.Origin == OriginOpenLineage {
		a = append(a, "fontsize=9", fmt.Sprintf("label=%q", e.Job))
	}
	if len(a) == 0 {
		return ""
	}
	return " [" + strings.Join(a, ", ") + "]"
}

// DrawDOT renders a picture as Graphviz DOT: refill's datasets as DOT
// draws them, datasets outside refill dashed, and each edge styled by its
// origin, with a legend whenever an edge is not from refill.yaml.
func (g *Graph) DrawDOT(p Picture, h Highlight) string {
	var b strings.Builder
	b.WriteString("digraph lineage {\n  rankdir=LR;\n  node [shape=box, style=\"rounded\", fontname=\"Helvetica\"];\n")
	for _, n := range p.Datasets {
		d := g.datasets[n]
		attrs := []string{fmt.Sprintf("label=%q", label(d, "\n"))}
		switch {
		case d.LineageOnly:
			// Shown, never rebuilt nor gated: a dbt view, say.
			attrs = append(attrs, "shape=note", `style="dashed"`, `fontcolor="#555555"`)
		case d.IsSource():
			attrs = append(attrs, "shape=cylinder")
		}
		switch {
		case h.Targets[n]:
			attrs = append(attrs, `style="rounded,filled,bold"`, `fillcolor="#f4a261"`)
		case h.Rebuilt[n]:
			attrs = append(attrs, `style="rounded,filled"`, `fillcolor="#ffe8a3"`)
		}
		fmt.Fprintf(&b, "  %q [%s];\n", n, strings.Join(attrs, ", "))
	}
	for _, x := range p.External {
		fmt.Fprintf(&b, "  %q [label=%q, style=\"rounded,dashed\", color=%q, fontcolor=%q, tooltip=%q];\n",
			x.ID, x.Name+"\noutside refill", fadedText, fadedText, x.Namespace+"/"+x.Name)
	}
	for _, e := range p.Edges {
		fmt.Fprintf(&b, "  %q -> %q%s;\n", e.From, e.To, dotEdgeAttrs(e))
	}
	// A picture of declared edges alone needs no legend (and reads as it
	// always has); any other origin, or a dataset outside refill, gets one.
	used := origins(p)
	if len(p.External) > 0 || used[OriginDbt] || used[OriginOpenLineage] {
		b.WriteString("  subgraph cluster_legend {\n    label=\"edges\"; fontname=\"Helvetica\"; fontsize=10; style=\"rounded\"; color=\"gray60\";\n")
		b.WriteString("    node [shape=plaintext, style=\"\", label=\"\", width=0.1, height=0.1];\n")
		for _, l := range originLegend {
			if l.origin != OriginConfig && !used[l.origin] {
				continue
			}
			a := append(dotStyle(l.origin), "fontsize=9", fmt.Sprintf("label=%q", l.text))
			fmt.Fprintf(&b, "    %q -> %q [%s];\n", "legend_"+string(l.origin)+"_from", "legend_"+string(l.origin)+"_to", strings.Join(a, ", "))
		}
		b.WriteString("  }\n")
	}
	b.WriteString("}\n")
	return b.String()
}

func origins(p Picture) map[Origin]bool {
	out := map[Origin]bool{}
	for _, e := range p.Edges {
		out[e.Origin] = true
	}
	return out
}

// DrawMermaid renders a picture as a Mermaid flowchart: declared edges
// plain, dbt's labelled "dbt" and dashed, OpenLineage's dotted and
// labelled with their job, datasets outside refill dashed.
func (g *Graph) DrawMermaid(p Picture, h Highlight) string {
	var b strings.Builder
	b.WriteString("flowchart LR\n")
	for _, n := range p.Datasets {
		d := g.datasets[n]
		l := strings.ReplaceAll(label(d, "<br/>"), `"`, "'")
		switch {
		case d.LineageOnly:
			fmt.Fprintf(&b, "  %s>\"%s\"]\n", n, l)
		case d.IsSource():
			fmt.Fprintf(&b, "  %s[(\"%s\")]\n", n, l)
		default:
			fmt.Fprintf(&b, "  %s[\"%s\"]\n", n, l)
		}
	}
	// External datasets get IDs of their own, ol_1, ol_2, …, skipping any
	// that a refill dataset is named.
	ids := map[string]string{}
	var ext []string
	n := 0
	for _, x := range p.External {
		id := ""
		for id == "" || g.datasets[id] != nil {
			n++
			id = fmt.Sprintf("ol_%d", n)
		}
		ids[x.ID] = id
		ext = append(ext, id)
		fmt.Fprintf(&b, "  %s[\"%s<br/>outside refill\"]\n", id, mermaidText(x.Name))
	}
	node := func(s string) string {
		if id, ok := ids[s]; ok {
			return id
		}
		return s
	}
	var dbt, ol []string
	for i, e := range p.Edges {
		switch e.Origin {
		case OriginDbt:
			dbt = append(dbt, fmt.Sprint(i))
			fmt.Fprintf(&b, "  %s -->|dbt| %s\n", node(e.From), node(e.To))
		case OriginOpenLineage:
			ol = append(ol, fmt.Sprint(i))
			fmt.Fprintf(&b, "  %s -.->|\"openlineage: %s\"| %s\n", node(e.From), mermaidText(e.Job), node(e.To))
		default:
			fmt.Fprintf(&b, "  %s --> %s\n", node(e.From), node(e.To))
		}
	}
	if len(dbt) > 0 {
		fmt.Fprintf(&b, "  linkStyle %s stroke:%s,stroke-dasharray:6 3\n", strings.Join(dbt, ","), colourDbt)
	}
	if len(ol) > 0 {
		fmt.Fprintf(&b, "  linkStyle %s stroke:%s,color:%s\n", strings.Join(ol, ","), colourOpenLineage, colourOpenLineage)
	}
	var targets, rebuilt []string
	for _, n := range p.Datasets {
		switch {
		case h.Targets[n]:
			targets = append(targets, n)
		case h.Rebuilt[n]:
			rebuilt = append(rebuilt, n)
		}
	}
	if len(targets) > 0 {
		b.WriteString("  classDef target fill:#f4a261,stroke:#333,stroke-width:2px\n")
		fmt.Fprintf(&b, "  class %s target\n", strings.Join(targets, ","))
	}
	if len(rebuilt) > 0 {
		b.WriteString("  classDef rebuilt fill:#ffe8a3,stroke:#333\n")
		fmt.Fprintf(&b, "  class %s rebuilt\n", strings.Join(rebuilt, ","))
	}
	if len(ext) > 0 {
		b.WriteString("  classDef external stroke:#737373,stroke-dasharray:4 3,color:#737373\n")
		fmt.Fprintf(&b, "  class %s external\n", strings.Join(ext, ","))
	}
	return b.String()
}

// mermaidText keeps outside text from breaking Mermaid's syntax.
func mermaidText(s string) string {
	return strings.NewReplacer(`"`, "'", "|", "/", "\n", " ", "<", "‹", ">", "›").Replace(s)
}

// Text lists a picture's edges, one a line: from, to, and origin, with
// an OpenLineage edge's job and when it was last seen; then the datasets
// outside refill with their namespaces.
func (p Picture) Text() string {
	var b strings.Builder
	if len(p.Edges) == 0 {
		b.WriteString("no edges\n")
		return b.String()
	}
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "FROM\tTO\tORIGIN")
	for _, e := range p.Edges {
		origin := string(e.Origin)
		if e.Origin == OriginOpenLineage {
			origin += " (job " + e.Job
			if e.LastSeen != nil {
				origin += ", last seen " + e.LastSeen.Format("2006-01-02 15:04")
			}
			origin += ")"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", e.From, e.To, origin)
	}
	w.Flush()
	if len(p.External) > 0 {
		b.WriteString("\noutside refill, seen by OpenLineage:\n")
		w = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		for _, x := range p.External {
			fmt.Fprintf(w, "  %s\tnamespace %s\n", x.ID, x.Namespace)
		}
		w.Flush()
	}
	return b.String()
}
