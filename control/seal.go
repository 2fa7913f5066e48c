package control

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/dsn"
	"github.com/refill-dev/refill/jobs/jobfiles"
	"github.com/refill-dev/refill/lineage"
)

// Stale lists, in words, every way the config now differs from what plan p
// sealed: the tables, partition columns and grains it writes, its jobs,
// tags and checks, the datasets its targets reach, the inputs its gate
// judged, and the policy that tiered it. A plan with any difference is a
// different backfill from the one that was approved: it may not be
// approved or applied until it is planned again. Nothing here reads the
// warehouse; the apply-time gate re-check covers the data.
func Stale(p *refill.Plan, cfg *refill.Config) []string {
	if p.Seal < refill.SealVersion {
		return []string{"the plan was made by an older refill that sealed only its jobs' fingerprints, not the tables, checks and policy it runs with: plan again"}
	}
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	for _, st := range p.Steps {
		d, ok := cfg.Datasets[st.Dataset]
		switch {
		case !ok:
			add("dataset %s is no longer in the config", st.Dataset)
			continue
		case d.Job == nil:
			add("dataset %s no longer has a job (it is a source now)", st.Dataset)
			continue
		case st.Ref == nil || st.Job == nil:
			add("step %s carries no sealed table or job", st.Dataset)
			continue
		}
		diffRef(add, st.Dataset, *st.Ref, d.Ref())
		for _, c := range jobDiff(st.Job, d.Job) {
			add("the job of %s changed: %s", st.Dataset, c)
		}
		if !sameSet(st.Tags, d.Tags) {
			add("the tags of %s changed: sealed [%s], now [%s]", st.Dataset, strings.Join(st.Tags, ", "), strings.Join(d.Tags, ", "))
		}
		if !sameSet(st.Upstream, d.Upstream) {
			add("the upstream of %s changed: sealed [%s], now [%s]", st.Dataset, strings.Join(st.Upstream, ", "), strings.Join(d.Upstream, ", "))
		}
		if c := checksDiff(st.Checks, d.Checks); c != "" {
			add("the checks of %s changed: %s", st.Dataset, c)
		}
	}
	for _, s := range p.SourceSeals {
		d, ok := cfg.Datasets[s.Dataset]
		if !ok {
			add("input %s is no longer in the config", s.Dataset)
			continue
		}
		if s.Ref != nil {
			diffRef(add, s.Dataset, *s.Ref, d.Ref())
		} else if d.Table != "" {
			add("input %s now has table %s", s.Dataset, d.Table)
		}
		if c := checksDiff(s.Checks, d.Checks); c != "" {
			add("the checks of input %s changed: %s", s.Dataset, c)
		}
	}
	// The targets may reach other datasets now (a new aggregate
	// downstream changes both what runs and how it is tiered).
	if g, err := lineage.Of(cfg); err == nil {
		if cl, _, err := g.Select(lineage.SelectionOf(p.Request)); err == nil {
			var now []string
			for _, n := range cl.Steps {
				now = append(now, n.Dataset.Name)
			}
			sealed := p.Datasets()
			for _, n := range now {
				if !slices.Contains(sealed, n) {
					add("the targets now also reach %s, which the plan does not rebuild", n)
				}
			}
			var left []string
			for _, l := range cl.LeftOut {
				left = append(left, l.Dataset.Name)
			}
			for _, n := range left {
				if !slices.ContainsFunc(p.LeftOut, func(l refill.LeftOut) bool { return l.Dataset == n }) {
					add("%s now reads what the plan rewrites, and the plan leaves it out", n)
				}
			}
			// What is left out, and the views whose rows change, count
			// for the tier by their tags.
			for _, l := range p.LeftOut {
				if d := cfg.Datasets[l.Dataset]; d != nil && !slices.Equal(d.Tags, l.Tags) {
					add("the tags of %s, which the plan leaves out, changed: sealed [%s], now [%s]", l.Dataset, strings.Join(l.Tags, ", "), strings.Join(d.Tags, ", "))
				}
			}
			{
				for _, n := range cl.LineageOnly {
					i := slices.IndexFunc(p.Changed, func(v refill.ChangedView) bool { return v.Dataset == n })
					switch {
					case i < 0:
						add("the lineage-only %s now changes with what the plan rewrites", n)
					case !slices.Equal(p.Changed[i].Tags, cfg.Datasets[n].Tags):
						add("the tags of the lineage-only %s changed: sealed [%s], now [%s]", n, strings.Join(p.Changed[i].Tags, ", "), strings.Join(cfg.Datasets[n].Tags, ", "))
					}
				}
			}
		} else if len(p.Request.Select) > 0 {
			add("the plan's selection no longer holds: %s", err)
		}
	}
	if now := dsn.Redact(cfg.Warehouse); p.Warehouse != "" && p.Warehouse != now {
		add("the warehouse changed: sealed %s, now %s", p.Warehouse, now)
	}
	if c := policyDiff(p.Policy, cfg.Policy); c != "" {
		add("the tier policy changed: %s", c)
	}
	return out
}

func diffRef(add func(string, ...any), name string, sealed, now refill.TableRef) {
	if sealed.Table != now.Table {
		add("the table of %s changed: sealed %s, now %s", name, orNone(sealed.Table), orNone(now.Table))
	}
	if sealed.Column != now.Column {
		add("the partition column of %s changed: sealed %s, now %s", name, orNone(sealed.Column), orNone(now.Column))
	}
	if sealed.Grain != now.Grain && sealed.Table != "" {
		add("the grain of %s changed: sealed %s, now %s", name, sealed.Grain, now.Grain)
	}
	if sealed.Timezone != now.Timezone {
		add("the partition timezone of %s changed: sealed %s, now %s", name, orUTC(sealed.Timezone), orUTC(now.Timezone))
	}
}

func orUTC(tz string) string {
	if tz == "" {
		return "UTC"
	}
	return tz
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// jobDiff names each part of a job that differs.
func jobDiff(sealed, now *refill.Job) []string {
	var out []string
	if sealed.Kind != now.Kind {
		return []string{fmt.Sprintf("kind %s, now %s", sealed.Kind, now.Kind)}
	}
	if sealed.Query != now.Query {
		out = append(out, "its query text")
	}
	if sealed.SQL != now.SQL {
		out = append(out, "its sql text")
	}
	if !slices.Equal(sealed.Command, now.Command) {
		out = append(out, fmt.Sprintf("its command (sealed %q, now %q)", sealed.Command, now.Command))
	}
	if !slices.Equal(sealed.Env, now.Env) {
		out = append(out, "its env")
	}
	if sealed.Timeout != now.Timeout {
		out = append(out, "its timeout")
	}
	switch {
	case sealed.Script != "" && sealed.Sealed == nil:
		out = append(out, "it was sealed by an older refill that hashed only its program, not every file it runs and sources")
	default:
		out = append(out, filesDiff(sealed, now)...)
	}
	if sealed.DbtProject != now.DbtProject {
		out = append(out, fmt.Sprintf("its dbt project (sealed %s, now %s)", orNone(sealed.DbtProject), orNone(now.DbtProject)))
	}
	for _, name := range slices.Sorted(maps.Keys(union(sealed.EnvSeal, now.EnvSeal))) {
		if sealed.EnvSeal[name] != now.EnvSeal[name] {
			// The variable, never its value: the seal is a keyed digest.
			out = append(out, fmt.Sprintf("the value of %s in its environment", name))
		}
	}
	if sealed.SideEffects != now.SideEffects {
		out = append(out, fmt.Sprintf("side_effects (sealed %v, now %v)", sealed.SideEffects, now.SideEffects))
	}
	if !jsonEqual(sealed.Airflow, now.Airflow) {
		out = append(out, "its airflow settings")
	}
	if len(out) == 0 && sealed.Fingerprint() != now.Fingerprint() {
		out = append(out, fmt.Sprintf("its definition (%s, now %s)", short(sealed.Fingerprint()), short(now.Fingerprint())))
	}
	return out
}

// filesDiff names each sealed file, and each glob of job.files, whose
// digest differs, and each one sealed or named on one side only.
func filesDiff(sealed, now *refill.Job) []string {
	var out []string
	if !slices.Equal(sealed.Files, now.Files) {
		out = append(out, fmt.Sprintf("its files (sealed [%s], now [%s])", strings.Join(sealed.Files, ", "), strings.Join(now.Files, ", ")))
	}
	for _, k := range slices.Sorted(maps.Keys(union(sealed.Sealed, now.Sealed))) {
		was, is := sealed.Sealed[k], now.Sealed[k]
		what := k
		if g, ok := strings.CutPrefix(k, jobfiles.GlobKey); ok {
			what = "the files matching " + g
		}
		switch {
		case was == is:
		case was == "":
			out = append(out, fmt.Sprintf("%s, which the plan did not seal", what))
		case is == "":
			out = append(out, fmt.Sprintf("%s is no longer there (sealed %s)", what, short(was)))
		default:
			out = append(out, fmt.Sprintf("%s changed (sealed %s, now %s)", what, short(was), short(is)))
		}
	}
	return out
}

// union returns the keys of a and b.
func union(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, b)
	return out
}

func checksDiff(sealed, now *refill.Checks) string {
	if jsonEqual(sealed, now) {
		return ""
	}
	// Name each check that differs, not the whole block: "volume: sealed
	// {...}, now {...}".
	var a, b map[string]json.RawMessage
	b1, _ := json.Marshal(sealed)
	b2, _ := json.Marshal(now)
	if json.Unmarshal(b1, &a) != nil || json.Unmarshal(b2, &b) != nil || a == nil || b == nil {
		return fmt.Sprintf("sealed %s, now %s", b1, b2)
	}
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if string(a[k]) != string(b[k]) {
			out = append(out, fmt.Sprintf("%s: sealed %s, now %s", k, orNone(string(a[k])), orNone(string(b[k]))))
		}
	}
	return strings.Join(out, "; ")
}

func policyDiff(sealed, now refill.Policy) string {
	var out []string
	if sealed.AutoMaxDays != now.AutoMaxDays {
		out = append(out, fmt.Sprintf("auto_max_days %d → %d", sealed.AutoMaxDays, now.AutoMaxDays))
	}
	if sealed.ManualOverDays != now.ManualOverDays {
		out = append(out, fmt.Sprintf("manual_over_days %d → %d", sealed.ManualOverDays, now.ManualOverDays))
	}
	if !sameSet(sealed.ManualTags, now.ManualTags) {
		out = append(out, fmt.Sprintf("manual_tags [%s] → [%s]", strings.Join(sealed.ManualTags, ", "), strings.Join(now.ManualTags, ", ")))
	}
	if !sameSet(sealed.AggregateTags, now.AggregateTags) {
		out = append(out, fmt.Sprintf("aggregate_tags [%s] → [%s]", strings.Join(sealed.AggregateTags, ", "), strings.Join(now.AggregateTags, ", ")))
	}
	if !jsonEqual(sealed.Rules, now.Rules) {
		out = append(out, fmt.Sprintf("rules (%d sealed, %d now)", len(sealed.Rules), len(now.Rules)))
	}
	return strings.Join(out, "; ")
}

func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(slices.Compact(x), slices.Compact(y))
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
