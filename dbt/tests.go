package dbt

import (
	"encoding/json"

	"slices"
	"strings"
)

// dbt's generic data tests become checks of the datasets they test, as
// refill.yaml would write them:
//
//	not_null                           checks.not_null.columns
//	unique                             checks.unique (one column)
//	dbt_utils.unique_combination_of_columns  checks.unique (the columns)
//	accepted_values                    checks.accepted_values
//
// A check the model's meta.refill.checks gives already is left as it says
// (refill's word wins over dbt's). Left out, and said so in the dataset's
// note: tests of severity warn (a warning in dbt is no failure), tests
// with a where filter (refill checks the whole partition), other tests
// (relationships, custom ones), and a second unique key (refill checks
// one key per dataset). Such checks are gate checks on what the plan reads
// and does not rebuild, as every dataset's checks are.

// testChecks are the checks one node's tests make, and what was left out.
type testChecks struct {
	notNull  []string
	unique   [][]string
	accepted map[string][]string
	skipped  []string
}

func (t *testChecks) empty() bool {
	return len(t.notNull) == 0 && len(t.unique) == 0 && len(t.accepted) == 0
}

// checksFromTests groups the manifest's tests by the node they test.
func checksFromTests(tests []*node) map[string]*testChecks {
	out := map[string]*testChecks{}
	for _, t := range tests {
		target := ""
		if t.AttachedNode != nil {
			target = *t.AttachedNode
		} else if len(t.DependsOn.Nodes) == 1 {
			target = t.DependsOn.Nodes[0]
		}
		if target == "" || (t.Config.Enabled != nil && !*t.Config.Enabled) {
			continue
		}
		c := out[target]
		if c == nil {
			c = &testChecks{accepted: map[string][]string{}}
			out[target] = c
		}
		md := t.TestMetadata
		name := md.Name
		if md.Namespace != nil && *md.Namespace != "" {
			name = *md.Namespace + "." + md.Name
		}
		col := ""
		if t.ColumnName != nil {
			col = *t.ColumnName
		} else if raw, ok := md.Kwargs["column_name"]; ok {
			_ = json.Unmarshal(raw, &col)
		}
		var severity string
		_ = json.Unmarshal(t.Config.Severity, &severity)
		var where any
		_ = json.Unmarshal(t.Config.Where, &where)
		switch {
		case strings.EqualFold(severity, "warn"):
			c.skipped = append(c.skipped, name+" (severity warn)")
			continue
		case where != nil:
			c.skipped = append(c.skipped, name+" (a where filter)")
			continue
		}
		switch name {
		case "not_null":
			if col != "" && !slices.Contains(c.notNull, col) {
				c.notNull = append(c.notNull, col)
			}
		case "unique":
			if col != "" {
				c.unique = append(c.unique, []string{col})
			}
		case "dbt_utils.unique_combination_of_columns":
			var cols []string
			if err := json.Unmarshal(md.Kwargs["combination_of_columns"], &cols); err == nil && len(cols) > 0 {
				c.unique = append(c.unique, cols)
			}
		case "accepted_values":
			var vals []any
			if col == "" || json.Unmarshal(md.Kwargs["values"], &vals) != nil || len(vals) == 0 {
				c.skipped = append(c.skipped, name)
				continue
			}
			// refill compares values as text: a number or a boolean
			// would not match what the warehouse prints for it (1.00
			// for a numeric(10,2) 1, 1 for SQLite's true), so such a
			// test is named, not half used.
			var texts []string
			ok := true
			for _, v := range vals {
				s, isText := v.(string)
				if !isText {
					ok = false
					break
				}
				texts = append(texts, s)
			}
			if !ok {
				c.skipped = append(c.skipped, name+"("+col+") (values that are not text: refill compares them as text)")
				continue
			}
			for _, s := range texts {
				if !slices.Contains(c.accepted[col], s) {
					c.accepted[col] = append(c.accepted[col], s)
				}
			}
		default:
			c.skipped = append(c.skipped, name)
		}
	}
	return out
}

// merge adds the tests' checks to checks (meta.refill.checks, a JSON
// object or nil) where it says nothing of them, and returns the result
// and a note saying what came from dbt and what was left out.
func (t *testChecks) merge(checks any) (any, string) {
	m, _ := checks.(map[string]any)
	if checks != nil && m == nil {
		return checks, "" // not an object: the config loader says so
	}
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	var from, left []string
	if len(t.notNull) > 0 {
		if _, ok := out["not_null"]; ok {
			left = append(left, "not_null (meta.refill.checks has it)")
		} else {
			cols := slices.Sorted(slices.Values(t.notNull))
			out["not_null"] = map[string]any{"columns": toAny(cols)}
			from = append(from, "not_null("+strings.Join(cols, ", ")+")")
		}
	}
	if len(t.unique) > 0 {
		slices.SortFunc(t.unique, func(a, b []string) int { return cmpLists(a, b) })
		if _, ok := out["unique"]; ok {
			left = append(left, "unique (meta.refill.checks has it)")
		} else {
			out["unique"] = toAny(t.unique[0])
			from = append(from, "unique("+strings.Join(t.unique[0], ", ")+")")
			for _, k := range t.unique[1:] {
				left = append(left, "unique("+strings.Join(k, ", ")+") (refill checks one key)")
			}
		}
	}
	if len(t.accepted) > 0 {
		if _, ok := out["accepted_values"]; ok {
			left = append(left, "accepted_values (meta.refill.checks has it)")
		} else {
			av := map[string]any{}
			for _, col := range slices.Sorted(mapsKeys(t.accepted)) {
				av[col] = toAny(t.accepted[col])
				from = append(from, "accepted_values("+col+")")
			}
			out["accepted_values"] = av
		}
	}
	left = append(left, t.skipped...)
	var note []string
	if len(from) > 0 {
		note = append(note, "checks from dbt tests: "+strings.Join(from, ", "))
	}
	if len(left) > 0 {
		note = append(note, "dbt tests not used: "+strings.Join(left, ", "))
	}
	if len(out) == 0 {
		return checks, strings.Join(note, "; ")
	}
	return out, strings.Join(note, "; ")
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func cmpLists(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if c := strings.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return len(a) - len(b)
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
