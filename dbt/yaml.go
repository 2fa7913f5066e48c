package dbt

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/refill-dev/refill"
)

// YAML writes the import as a refill.yaml datasets: block, each dataset
// under a comment naming its dbt node (and, for a lineage-only one, why).
// The config loader reads this same text for datasets_from, so what `refill
// import dbt` prints loads as the import itself does.
func (imp *Import) YAML() ([]byte, error) {
	var b bytes.Buffer
	s := imp.Summary()
	fmt.Fprintf(&b, "# Imported from the dbt manifest %s by refill import dbt\n", oneLine(imp.File))
	about := []string{fmt.Sprintf("schema v%d", imp.Version)}
	for _, kv := range [][2]string{{"dbt ", imp.DBTVersion}, {"project ", imp.Project}, {"adapter ", imp.Adapter}} {
		if kv[1] != "" {
			about = append(about, kv[0]+oneLine(kv[1]))
		}
	}
	fmt.Fprintf(&b, "# (%s): %s.\n", strings.Join(about, ", "), s.counts())
	if len(imp.Databases) > 0 {
		fmt.Fprintf(&b, "# Tables are schema.name; refill reaches the database its warehouse connects to (the manifest's: %s).\n", oneLine(strings.Join(imp.Databases, ", ")))
	}
	if len(imp.Datasets) == 0 {
		b.WriteString("datasets: {}\n")
		return b.Bytes(), nil
	}
	b.WriteString("datasets:\n")
	for _, d := range imp.Datasets {
		key, err := yaml.Marshal(d.Name)
		if err != nil {
			return nil, fmt.Errorf("dataset %s: %w", d.Name, err)
		}
		body, err := yaml.MarshalWithOptions(d, yaml.Indent(2), yaml.IndentSequence(true), yaml.UseSingleQuote(true))
		if err != nil {
			return nil, fmt.Errorf("dataset %s: %w", d.Name, err)
		}
		note := ""
		if d.Note != "" {
			note = ": " + d.Note
		}
		fmt.Fprintf(&b, "  # %s%s\n", oneLine(d.Node), oneLine(note))
		fmt.Fprintf(&b, "  %s:", bytes.TrimSpace(key))
		if body = bytes.TrimSpace(body); len(body) == 0 || string(body) == "{}" {
			b.WriteString(" {}\n")
			continue
		}
		b.WriteString("\n")
		for _, line := range bytes.Split(body, []byte("\n")) {
			b.WriteString("    ")
			b.Write(line)
			b.WriteString("\n")
		}
	}
	return b.Bytes(), nil
}

// WriteYAML writes imp.YAML() to w.
func (imp *Import) WriteYAML(w io.Writer) error {
	b, err := imp.YAML()
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

// Summary counts what an import brought in: how many datasets are rebuilt
// by dbt (a job), how many are sources the gate checks, and how many are
// lineage only, by why.
type Summary struct {
	// From is the datasets' origin, "dbt:" and the manifest's path.
	From        string
	Datasets    int
	Jobs        int
	Sources     int
	LineageOnly int
	// Why counts the lineage-only datasets by reason (the Why constants).
	Why map[string]int
}

// Summary counts imp's datasets.
func (imp *Import) Summary() Summary {
	s := Summary{From: "dbt:" + imp.File, Why: map[string]int{}}
	for _, d := range imp.Datasets {
		s.add(d.Job != nil, d.LineageOnly)
	}
	return s
}

func (s *Summary) add(job bool, lineageOnly string) {
	s.Datasets++
	switch {
	case lineageOnly != "":
		s.LineageOnly++
		s.Why[lineageOnly]++
	case job:
		s.Jobs++
	default:
		s.Sources++
	}
}

// Summarize counts a loaded config's imported datasets, one Summary per
// origin (Dataset.From), sorted by origin: what a caller of config.Load
// shows to say what datasets_from brought in.
func Summarize(datasets map[string]*refill.Dataset) []Summary {
	by := map[string]*Summary{}
	for _, d := range datasets {
		if !strings.HasPrefix(d.From, "dbt:") {
			continue
		}
		s := by[d.From]
		if s == nil {
			s = &Summary{From: d.From, Why: map[string]int{}}
			by[d.From] = s
		}
		why := ""
		if d.LineageOnly {
			why = d.Why
			if why == "" {
				why = "lineage only"
			}
		}
		s.add(d.Job != nil, why)
	}
	var out []Summary
	for _, s := range by {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b Summary) int { return strings.Compare(a.From, b.From) })
	return out
}

func (s Summary) counts() string {
	return fmt.Sprintf("%s: %d rebuilt by dbt, %s the gate checks, %d lineage only",
		plural(s.Datasets, "dataset"), s.Jobs, plural(s.Sources, "source"), s.LineageOnly)
}

// String is the summary for a person: one line of counts, then one line per
// reason datasets are lineage only, most common first.
func (s Summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", s.From, s.counts())
	whys := make([]string, 0, len(s.Why))
	for w := range s.Why {
		whys = append(whys, w)
	}
	slices.SortFunc(whys, func(a, b string) int {
		if s.Why[a] != s.Why[b] {
			return s.Why[b] - s.Why[a]
		}
		return strings.Compare(a, b)
	})
	for _, w := range whys {
		fmt.Fprintf(&b, "\n  %4d lineage only, %s", s.Why[w], w)
	}
	return b.String()
}

func plural(n int, what string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", what)
	}
	return fmt.Sprintf("%d %ss", n, what)
}
