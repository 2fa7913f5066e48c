package main

import (
	"strings"
	"testing"
)

// rulesProject is a proven query job, so that a short plan of it is auto
// before any rule, under the policy rules given.
func rulesProject(t *testing.T, rules string) string {
	t.Helper()
	dir := smallProject(t, `version: 1
warehouse: sqlite:wh.db
policy:
  rules:
`+rules+`
datasets:
  src: {table: src, partition: {column: day}}
  daily:
    table: daily
    partition: {column: day}
    upstream: [src]
    job: {query: "SELECT day, count(*) AS n FROM src WHERE day = :partition GROUP BY day"}
`,
		"CREATE TABLE src (day TEXT, v INTEGER)",
		"CREATE TABLE daily (day TEXT, n INTEGER)",
		"INSERT INTO src VALUES ('2026-11-01', 1), ('2026-11-02', 2), ('2026-11-02', 3), ('2026-11-03', 4)",
	)
	step(t, dir, 0, "all four builds agree", "prove", "daily", "--partition", "2026-11-02", "--as", "alice")
	return dir
}

// TestRulesSeeTheTierSoFar: rules run in order, each seeing the tier as
// the rules before it left it. The second rule sends a semi-auto plan to a
// lead; the plan is semi-auto only because the first rule raised it, so
// the second sees that and raises it again.
func TestRulesSeeTheTierSoFar(t *testing.T) {
	t.Parallel()
	dir := rulesProject(t, `    - name: long
      when: "plan.partitions > 2"
      tier: semi-auto
      reason: more than two days
    - name: escalate
      when: "plan.tier == 'semi-auto'"
      tier: manual
      reason: a plan someone must look at goes to a lead`)
	plan := func(to string) planJSON {
		return decode[planJSON](t, step(t, dir, 0, "", "plan", "daily", "--from", "2026-11-01", "--to", to, "--reason", "r", "--as", "alice", "-o", "json").stdout)
	}
	// Two days: neither rule hits, and the proven job is auto.
	if p := plan("2026-11-02"); p.Tier != "auto" {
		t.Fatalf("a two-day plan of a proven job: %s %q, want auto (so that only the rules raise the next)", p.Tier, p.Reasons)
	}
	p := plan("2026-11-03")
	if reasons := strings.Join(p.Reasons, "; "); p.Tier != "manual" || !strings.Contains(reasons, "rule escalate: a plan someone must look at goes to a lead") {
		t.Errorf("a three-day plan: %s %q, want manual by rule escalate, which sees the semi-auto tier rule long raised", p.Tier, p.Reasons)
	}
}

// TestRuleCostLimit: a rule whose evaluation would take a long while (ten
// million steps) stops at its cost limit, and the plan is refused with an
// error naming the rule, instead of stalling the planner.
func TestRuleCostLimit(t *testing.T) {
	t.Parallel()
	digits := "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]"
	when := "a + b + c + d + e + f + g > 0"
	for _, v := range []string{"g", "f", "e", "d", "c", "b", "a"} {
		when = digits + ".all(" + v + ", " + when + ")"
	}
	dir := rulesProject(t, `    - name: stall
      when: "`+when+`"
      tier: manual
      reason: never decides`)
	r := run(t, dir, nil, "plan", "daily", "--from", "2026-11-01", "--to", "2026-11-02", "--reason", "r", "--as", "alice")
	if r.code != 2 || !strings.Contains(r.stderr, "policy.rules stall") || !strings.Contains(r.stderr, "cost") {
		t.Fatalf("a plan under a rule past its cost limit: exit %d, want 2 and an error naming the rule and its cost\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if n := len(decode[[]any](t, run(t, dir, nil, "plans", "-o", "json").stdout)); n != 0 {
		t.Errorf("%d plans stored, want none", n)
	}
}
