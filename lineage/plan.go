package lineage

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/refill-dev/refill"
)

// Colours of a plan's picture. Targets and rebuilt steps keep the colours
// of Graph.DOT's Highlight, so the two pictures read alike.
const (
	colourTarget  = "#f4a261"
	colourRebuilt = "#ffe8a3"
	colourPassed  = "#d8f3dc"
	edgePassed    = "#2d6a4f"
	colourFailed  = "#ffd6d6"
	edgeFailed    = "#c1121f"
	colourUnjudge = "#eeeeee"
	fadedLine     = "gray60"
	fadedText     = "gray45"
)

// role is what a dataset is to the plan being drawn.
type role int

const (
	// roleStep is a dataset the plan rebuilds.
	roleStep role = iota
	// roleInput is a dataset the plan reads but does not rebuild and that
	// its source gate judged (or would have, had it a table).
	roleInput
	// roleNeighbour is a dataset one hop up or downstream of the plan
	// that the plan does not touch: context, drawn faded.
	roleNeighbour
)

// PlanDOT is the plan's lineage picture as Graphviz DOT, drawn from what
// the plan sealed rather than from the config of the moment: its steps in
// run order ("1 · events_daily") with the rows they rewrite, the inputs its
// source gate judged as cylinders coloured by the verdict (green passed,
// red failed), and — from cfg, when given — the untouched datasets one hop
// up or downstream, faded, so a reader sees what the plan leaves alone.
// The output is deterministic: nodes by role, then run order or name;
// edges sorted.
func PlanDOT(p *refill.Plan, cfg *refill.Config) (string, error) {
	if p == nil {
		return "", errors.New("lineage: no plan to draw")
	}
	var g *Graph
	if cfg != nil && len(cfg.Datasets) > 0 {
		var err error
		if g, err = New(cfg.Datasets); err != nil {
			return "", err
		}
	}
	configured := func(name string) *refill.Dataset {
		if cfg == nil {
			return nil
		}
		return cfg.Datasets[name]
	}

	roles := map[string]role{}
	steps := map[string]*refill.Step{}
	ordered := make([]*refill.Step, 0, len(p.Steps))
	for i := range p.Steps {
		s := &p.Steps[i]
		steps[s.Dataset] = s
		roles[s.Dataset] = roleStep
		ordered = append(ordered, s)
	}
	slices.SortStableFunc(ordered, func(a, b *refill.Step) int {
		return cmp.Or(cmp.Compare(a.Order, b.Order), strings.Compare(a.Dataset, b.Dataset))
	})
	var inputs []string
	addInput := func(name string) {
		if _, ok := roles[name]; !ok {
			roles[name] = roleInput
			inputs = append(inputs, name)
		}
	}
	for _, n := range p.Sources {
		addInput(n)
	}
	for _, s := range p.SourceSeals {
		addInput(s.Dataset)
	}
	for _, n := range p.Gate.Checked {
		addInput(n)
	}
	slices.Sort(inputs)

	// The neighbours: one hop from anything the plan touches, in the
	// config as it is now.
	var neighbours []string
	if g != nil {
		touched := slices.Clone(inputs)
		for _, s := range ordered {
			touched = append(touched, s.Dataset)
		}
		for _, n := range touched {
			d, ok := g.Dataset(n)
			if !ok {
				continue // renamed or removed since: the plan still shows it
			}
			for _, m := range slices.Concat(d.Upstream, g.Downstream(n)) {
				if _, ok := roles[m]; !ok {
					roles[m] = roleNeighbour
					neighbours = append(neighbours, m)
				}
			}
		}
		slices.Sort(neighbours)
	}

	targets := map[string]bool{}
	for _, t := range p.Request.Targets {
		targets[t] = true
	}
	checked := map[string]bool{}
	for _, n := range p.Gate.Checked {
		checked[n] = true
	}
	failed, warned := map[string]int{}, map[string]int{}
	for _, f := range p.Gate.Findings {
		switch {
		case f.Warning:
			warned[f.Dataset]++
		case !f.Passed:
			failed[f.Dataset]++
		}
	}
	tags := func(name string) []string {
		if s, ok := steps[name]; ok {
			return s.Tags
		}
		if d := configured(name); d != nil {
			return d.Tags
		}
		return nil
	}

	var b strings.Builder
	b.WriteString("digraph plan {\n  rankdir=LR;\n")
	fmt.Fprintf(&b, "  label=%s;\n  labelloc=t;\n  fontname=\"Helvetica\";\n", quote(planTitle(p)))
	b.WriteString("  node [shape=box, style=\"rounded\", fontname=\"Helvetica\"];\n  edge [color=\"#555555\"];\n")

	for _, s := range ordered {
		attrs := []string{"label=" + quote(stepLabel(s))}
		if targets[s.Dataset] {
			attrs = append(attrs, `style="rounded,filled,bold"`, `fillcolor="`+colourTarget+`"`)
		} else {
			attrs = append(attrs, `style="rounded,filled"`, `fillcolor="`+colourRebuilt+`"`)
		}
		node(&b, s.Dataset, attrs)
	}
	for _, n := range inputs {
		kind := "source"
		if d := configured(n); d != nil && !d.IsSource() {
			kind = "input, not rebuilt"
		}
		verdict, fill, line := "gate passed", colourPassed, edgePassed
		switch {
		case !checked[n]:
			verdict, fill, line = "not gated (no table)", colourUnjudge, "#555555"
		case failed[n] > 0:
			verdict, fill, line = fmt.Sprintf("gate FAILED: %s", plural(failed[n], "finding")), colourFailed, edgeFailed
		case warned[n] > 0:
			verdict += " · " + plural(warned[n], "warning")
		}
		style := "filled"
		if targets[n] || failed[n] > 0 {
			style = "filled,bold"
		}
		attrs := []string{
			"label=" + quote(n+tagText(tags(n))+"\n"+kind+"\n"+verdict),
			"shape=cylinder", `style="` + style + `"`, `fillcolor="` + fill + `"`, `color="` + line + `"`,
		}
		if failed[n] > 0 {
			attrs = append(attrs, "penwidth=2")
		}
		node(&b, n, attrs)
	}
	for _, n := range neighbours {
		d, _ := g.Dataset(n)
		attrs := []string{"label=" + quote(label(d, "\n")), `color="` + fadedLine + `"`, `fontcolor="` + fadedText + `"`}
		if d.IsSource() {
			attrs = append(attrs, "shape=cylinder", `style="dashed"`)
		} else {
			attrs = append(attrs, `style="rounded,dashed"`)
		}
		node(&b, n, attrs)
	}

	// Edges: a step's inputs as it sealed them; everything else's as the
	// config has them now.
	type edge struct{ from, to string }
	var edges []edge
	for n, r := range roles {
		ups := []string(nil)
		if s, ok := steps[n]; ok && s.Upstream != nil {
			ups = s.Upstream
		} else if d := configured(n); d != nil {
			ups = d.Upstream
		}
		for _, u := range ups {
			ur, ok := roles[u]
			if !ok || (ur == roleNeighbour && r == roleNeighbour) {
				continue
			}
			edges = append(edges, edge{u, n})
		}
	}
	slices.SortFunc(edges, func(a, b edge) int { return cmp.Or(strings.Compare(a.from, b.from), strings.Compare(a.to, b.to)) })
	edges = slices.Compact(edges)
	for _, e := range edges {
		if roles[e.from] == roleNeighbour || roles[e.to] == roleNeighbour {
			fmt.Fprintf(&b, "  %s -> %s [color=%q, style=\"dashed\"];\n", quote(e.from), quote(e.to), fadedLine)
		} else {
			fmt.Fprintf(&b, "  %s -> %s;\n", quote(e.from), quote(e.to))
		}
	}
	b.WriteString("}\n")
	return b.String(), nil
}

// planTitle heads the picture: which plan, its tier and range.
func planTitle(p *refill.Plan) string {
	t := "plan " + p.ID
	if p.Tier != "" {
		t += " · " + string(p.Tier)
	}
	if p.Request.From != "" {
		t += " · " + p.Request.From + ".." + p.Request.To
	}
	return t
}

// stepLabel is "1 · events_daily [aggregate]", the job kind and partition
// count, and the rows the step rewrites: now → expected, from what the
// plan counted.
func stepLabel(s *refill.Step) string {
	kind := s.Kind
	if kind == "" && s.Job != nil {
		kind = s.Job.Kind
	}
	var now, want int64
	var nowUnknown, wantUnknown int
	for _, pp := range s.Partitions {
		if pp.CurrentRows != nil {
			now += *pp.CurrentRows
		} else {
			nowUnknown++
		}
		if pp.ExpectedRows != nil {
			want += *pp.ExpectedRows
		} else {
			wantUnknown++
		}
	}
	n := len(s.Partitions)
	l := fmt.Sprintf("%d · %s%s\n%s · %s", s.Order, s.Dataset, tagText(s.Tags), kind, plural(n, "partition"))
	if n > 0 {
		l += fmt.Sprintf("\nrows %s → %s", total(now, nowUnknown, n), total(want, wantUnknown, n))
	}
	return l
}

// total is a sum of row counts some of which may be unknown: "?" when none
// is known, "≥ 1,200" when some are not.
func total(sum int64, unknown, of int) string {
	switch {
	case unknown == of:
		return "?"
	case unknown > 0:
		return "≥ " + comma(sum)
	}
	return comma(sum)
}

func comma(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

func tagText(tags []string) string {
	if len(tags) == 0 {
		return ""
	}
	return " [" + strings.Join(tags, ",") + "]"
}

func node(b *strings.Builder, name string, attrs []string) {
	fmt.Fprintf(b, "  %s [%s];\n", quote(name), strings.Join(attrs, ", "))
}

// quote makes s a DOT string: quotes and backslashes escaped, newlines as
// Graphviz's centred line break. Unlike Go's %q it leaves non-ASCII text
// (the "·" and "→" of the labels) as it is, which DOT reads as UTF-8.
func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", "")
	return `"` + r.Replace(s) + `"`
}
