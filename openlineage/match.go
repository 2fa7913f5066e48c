package openlineage

import (
	"slices"
	"strings"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// Matcher finds the refill datasets an OpenLineage dataset is. The rule,
// for each refill dataset:
//
//   - With an explicit openlineage: {namespace, name} in refill.yaml, the
//     event's namespace and name must equal those, exactly. The table is
//     then not compared at all: this is how a dataset is pinned to one
//     data source when a table of the same name lives in several.
//   - Otherwise its table is compared with the end of the event's name,
//     split at dots, and the namespace is ignored (refill cannot know what
//     a producer calls its warehouse): a schema-qualified table
//     (public.events_daily) matches the name's last two parts
//     (analytics.public.events_daily, public.events_daily), and an
//     unqualified one (events_daily) matches the last part alone
//     (analytics.public.events_daily, events_daily). A qualified table
//     never matches a one-part name. Parts written without quotes in
//     refill.yaml compare without regard to case, as SQL folds them;
//     quoted parts compare exactly.
//   - A dataset with neither (a command or Airflow job with no table)
//     matches nothing.
type Matcher struct {
	explicit map[Dataset][]string
	// byLast indexes table rules by their last part, lower-cased.
	byLast map[string][]tableRule
}

type tableRule struct {
	dataset string
	parts   []sqltext.NamePart
}

// NewMatcher indexes datasets for Match.
func NewMatcher(datasets map[string]*refill.Dataset) *Matcher {
	m := &Matcher{explicit: map[Dataset][]string{}, byLast: map[string][]tableRule{}}
	for name, d := range datasets {
		switch {
		case d.OpenLineage != nil:
			k := Dataset{Namespace: d.OpenLineage.Namespace, Name: d.OpenLineage.Name}
			m.explicit[k] = append(m.explicit[k], name)
		case d.Table != "":
			parts, err := sqltext.ParseName(d.Table)
			if err != nil || len(parts) == 0 || len(parts) > 2 {
				continue // the config loader refuses such tables
			}
			last := strings.ToLower(parts[len(parts)-1].Text)
			m.byLast[last] = append(m.byLast[last], tableRule{dataset: name, parts: parts})
		}
	}
	return m
}

// Match returns the names of the refill datasets that d is, sorted; none
// when refill does not manage it.
func (m *Matcher) Match(d Dataset) []string {
	out := slices.Clone(m.explicit[d])
	name := strings.Split(d.Name, ".")
	for _, r := range m.byLast[strings.ToLower(name[len(name)-1])] {
		if len(r.parts) > len(name) {
			continue
		}
		tail := name[len(name)-len(r.parts):]
		same := true
		for i, p := range r.parts {
			if p.Quoted && p.Text != tail[i] || !p.Quoted && !strings.EqualFold(p.Text, tail[i]) {
				same = false
				break
			}
		}
		if same {
			out = append(out, r.dataset)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Managed reports whether d matches any refill dataset.
func (m *Matcher) Managed(d Dataset) bool { return len(m.Match(d)) > 0 }
