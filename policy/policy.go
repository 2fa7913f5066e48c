// Package policy decides a plan's tier (docs/design.md §4): the fixed rules for
// manual and auto, then the configured CEL rules, which may only raise it.
// Every rule that decided the tier leaves a reason in plain words with its
// numbers.
package policy

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/ext"

	"github.com/refill-dev/refill"
)

// Evidence is what the policy needs to know about a dataset's idempotency
// evidence for its current job fingerprint.
type Evidence struct {
	// Exists is true when any passing proof was recorded for the dataset.
	Exists bool
	// Current is true when a passing proof matches the job's fingerprint now.
	Current bool
	// Failed is true when the newest proof of the current job failed;
	// Message then says how.
	Failed  bool
	Message string
}

// Input is everything a tier is decided from.
type Input struct {
	Request refill.Request
	// Rebuilt are the datasets the plan rebuilds (its steps).
	Rebuilt []*refill.Dataset
	// Downstream names the rebuilt datasets strictly downstream of a target.
	Downstream []string
	// Proofs maps dataset name to its evidence; a missing entry is no proof.
	Proofs map[string]Evidence
	// Unscored lists gate checks that could not be judged (too little
	// history, say), as "dataset partition: why". A check that was not
	// scored did not pass, so it never counts toward auto.
	Unscored []string
	// Accepted lists gate findings that pass only because a person
	// accepted them as real data (refill accept), as "dataset partition
	// check: by whom". One person's word passes the gate, but never makes
	// a plan auto: someone else must look.
	Accepted []string
	// Partitions counts the partitions the plan rewrites.
	Partitions int
	// LineageOnly are the lineage-only datasets whose rows change with the
	// plan (lineage.Closure.LineageOnly), such as a dbt view of a rebuilt
	// table. Nothing rebuilds them, but whoever reads them sees the new
	// rows, so their tags count as a rebuilt dataset's do: for
	// manual_tags, aggregate_tags and a rule's tags.
	LineageOnly []*refill.Dataset
	// Consumers read a dataset the plan rewrites and are outside refill:
	// nothing rebuilds them, so a person must look (never auto).
	Consumers []refill.Consumer
	// Clock is set when the plan is made on an "as of" clock ahead of the
	// real one: never auto.
	Clock *refill.PlanClock
	// Audit lists the findings of rebuilt datasets' own row checks on the
	// rows the dry run's rehearsal built, as "dataset partition check:
	// message": the run would refuse to publish them, so never auto.
	Audit []string
	// LeftOut are datasets with jobs that the request's selectors left out
	// but that read what the plan rewrites: never auto, and their tags
	// count as a rebuilt dataset's do, since their next build reads the
	// new rows.
	LeftOut []refill.LeftOut
}

// Decision is a tier and why: Reasons decided the tier; Attention is
// everything else that would keep the plan from auto (the not-auto reasons
// of a manual plan, the reasons a rule displaced when it raised the tier),
// so that nothing a person should see is dropped. A failed proof comes
// first in whichever list holds it.
type Decision struct {
	Tier      refill.Tier
	Reasons   []string
	Attention []string
}

// Policy is a compiled tier policy.
type Policy struct {
	cfg   refill.Policy
	rules []compiledRule
}

type compiledRule struct {
	rule refill.Rule
	prg  cel.Program
}

// RuleRequest is what a rule sees as `request`. Its fields are declared to
// CEL, so a rule naming a field that does not exist (request.requester) is
// a config error when refill.yaml loads, not a surprise on the one plan
// that reaches it.
type RuleRequest struct {
	Targets     []string `cel:"targets"`
	From        string   `cel:"from"`
	To          string   `cel:"to"`
	Days        int64    `cel:"days"`
	Reason      string   `cel:"reason"`
	RequestedBy string   `cel:"requested_by"`
}

// RulePlan is what a rule sees as `plan`: what the plan rebuilds and the
// tier so far (the fixed rules', raised by every earlier rule that hit).
// Tags are those of the datasets rebuilt and of the lineage-only datasets
// whose rows change with them (Input.LineageOnly).
type RulePlan struct {
	Datasets   []string `cel:"datasets"`
	Tags       []string `cel:"tags"`
	Partitions int64    `cel:"partitions"`
	Tier       string   `cel:"tier"`
}

// ruleCostLimit bounds one rule's evaluation, so no rule can stall the
// planner (a comprehension over a large list, say). Ordinary rules cost
// tens of units.
const ruleCostLimit = 100_000

// env declares what a rule may read: request and plan with their typed
// fields, and — as before — datasets, tags and tier on their own.
func env() (*cel.Env, error) {
	return cel.NewEnv(
		ext.NativeTypes(ext.ParseStructTags(true), reflect.TypeFor[RuleRequest](), reflect.TypeFor[RulePlan]()),
		cel.Variable("request", cel.ObjectType("policy.RuleRequest")),
		cel.Variable("plan", cel.ObjectType("policy.RulePlan")),
		cel.Variable("datasets", cel.ListType(cel.StringType)),
		cel.Variable("tags", cel.ListType(cel.StringType)),
		cel.Variable("tier", cel.StringType),
	)
}

// CheckExpr reports whether when compiles to a boolean over the variables a
// rule may read, so the config loader can point at the rule's line.
func CheckExpr(when string) error {
	e, err := env()
	if err != nil {
		return err
	}
	ast, iss := e.Compile(when)
	if iss != nil && iss.Err() != nil {
		return fmt.Errorf("does not compile: %s", oneLine(iss.Err().Error()))
	}
	if ast.OutputType() != cel.BoolType && ast.OutputType() != cel.DynType {
		return fmt.Errorf("is %s, want a boolean", ast.OutputType())
	}
	return nil
}

// Compile checks every rule's expression and returns a ready policy. A rule
// that does not compile to a boolean is bad input naming the rule.
func Compile(p refill.Policy) (*Policy, error) {
	e, err := env()
	if err != nil {
		return nil, fmt.Errorf("policy: cel environment: %w", err)
	}
	out := &Policy{cfg: p}
	for _, r := range p.Rules {
		ast, iss := e.Compile(r.When)
		if iss != nil && iss.Err() != nil {
			return nil, refill.BadInputf("policy.rules %s: when %q does not compile: %s", r.Name, r.When, oneLine(iss.Err().Error()))
		}
		if ast.OutputType() != cel.BoolType && ast.OutputType() != cel.DynType {
			return nil, refill.BadInputf("policy.rules %s: when %q is %s, want a boolean", r.Name, r.When, ast.OutputType())
		}
		prg, err := e.Program(ast, cel.CostLimit(ruleCostLimit))
		if err != nil {
			return nil, refill.BadInputf("policy.rules %s: %s", r.Name, oneLine(err.Error()))
		}
		out.rules = append(out.rules, compiledRule{rule: r, prg: prg})
	}
	return out, nil
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// Decide returns the tier of docs/design.md §4 for in, with one reason per rule
// that decided it.
func (p *Policy) Decide(in Input) (Decision, error) {
	var manual, notAuto []string
	days := in.Request.Days

	// Manual: tags anywhere in the plan, or a long range.
	for _, d := range in.Rebuilt {
		for _, t := range d.Tags {
			if slices.Contains(p.cfg.ManualTags, t) {
				manual = append(manual, fmt.Sprintf("%s is tagged %s (manual_tags)", d.Name, t))
			}
		}
	}
	for _, d := range in.LineageOnly {
		for _, t := range d.Tags {
			if slices.Contains(p.cfg.ManualTags, t) {
				manual = append(manual, fmt.Sprintf("%s is tagged %s (manual_tags): lineage only, it is not rebuilt, but its rows change with what the plan rewrites", d.Name, t))
			}
		}
	}
	for _, l := range in.LeftOut {
		for _, t := range l.Tags {
			if slices.Contains(p.cfg.ManualTags, t) {
				manual = append(manual, fmt.Sprintf("%s is tagged %s (manual_tags): left out of the plan, it reads %s, which the plan rewrites", l.Dataset, t, strings.Join(l.Reads, ", ")))
			}
		}
	}
	if days > p.cfg.ManualOverDays {
		manual = append(manual, fmt.Sprintf("range is %d days, over the manual limit of %d", days, p.cfg.ManualOverDays))
	}

	// A table refill does not rebuild, between what it rebuilds, keeps
	// its old rows: what reads it downstream would read them.
	for _, d := range in.LineageOnly {
		if !d.FollowsUpstream() {
			notAuto = append(notAuto, fmt.Sprintf("%s is lineage only (%s) and is not rebuilt: what the plan rebuilds downstream of it reads its rows as they are", d.Name, d.Why))
		}
	}

	// Auto: short, proven, no aggregates downstream.
	if days > p.cfg.AutoMaxDays {
		notAuto = append(notAuto, fmt.Sprintf("range is %d days, over the auto limit of %d", days, p.cfg.AutoMaxDays))
	}
	if n := len(in.Unscored); n > 0 {
		more := ""
		if n > 1 {
			more = fmt.Sprintf(" (and %d more)", n-1)
		}
		notAuto = append(notAuto, fmt.Sprintf("the source gate left %d check(s) as warnings: %s%s; a check that was not scored, or that failed on a calendar day, did not pass, so a person must look", n, in.Unscored[0], more))
	}
	if n := len(in.Accepted); n > 0 {
		more := ""
		if n > 1 {
			more = fmt.Sprintf(" (and %d more)", n-1)
		}
		notAuto = append(notAuto, fmt.Sprintf("%d finding(s) of the source gate pass only because a person accepted them as real data: %s%s; someone else must look", n, in.Accepted[0], more))
	}
	var unproven, stale, failed []string
	for _, d := range in.Rebuilt {
		pr := in.Proofs[d.Name]
		switch {
		case d.Job != nil && d.Job.SideEffects:
			notAuto = append(notAuto, fmt.Sprintf("%s declares side_effects: it writes outside the warehouse, so it is never proven by rerunning and never auto", d.Name))
		case pr.Failed:
			failed = append(failed, refill.FailedProofReason(d.Name, pr.Message))
		case pr.Current:
		case pr.Exists:
			stale = append(stale, d.Name)
		default:
			unproven = append(unproven, d.Name)
		}
	}
	// A failed proof is what a person must see first.
	notAuto = append(failed, notAuto...)
	if len(unproven) > 0 {
		notAuto = append(notAuto, fmt.Sprintf("no idempotency proof for %s (%d of %d datasets): run `refill prove`", strings.Join(unproven, ", "), len(unproven), len(in.Rebuilt)))
	}
	if len(stale) > 0 {
		notAuto = append(notAuto, fmt.Sprintf("idempotency proof is stale for %s: the job changed since it was proven, or it was proven by an older refill without the stale-partition build (prove again)", strings.Join(stale, ", ")))
	}
	if n := len(in.Audit); n > 0 {
		more := ""
		if n > 1 {
			more = fmt.Sprintf(" (and %d more)", n-1)
		}
		notAuto = append(notAuto, fmt.Sprintf("the dry run's rebuilt rows fail their dataset's own checks: %s%s; the run would refuse to publish them", in.Audit[0], more))
	}
	notAuto = append(notAuto, consumerReasons(in.Consumers)...)
	for _, l := range in.LeftOut {
		notAuto = append(notAuto, l.Describe())
	}
	if c := in.Clock; c != nil {
		notAuto = append(notAuto, fmt.Sprintf("the plan was made as of %s, %s ahead of the real clock (%s): a clock set ahead (REFILL_NOW) never makes a plan auto",
			c.AsOf.UTC().Format(time.RFC3339), c.AsOf.Sub(c.Real).Round(time.Second), c.Real.UTC().Format(time.RFC3339)))
	}
	byName := map[string]*refill.Dataset{}
	for _, d := range in.Rebuilt {
		byName[d.Name] = d
	}
	for _, n := range in.Downstream {
		d := byName[n]
		if d == nil {
			continue
		}
		for _, t := range d.Tags {
			if slices.Contains(p.cfg.AggregateTags, t) {
				notAuto = append(notAuto, fmt.Sprintf("%s downstream of the target is tagged %s (aggregate_tags)", n, t))
			}
		}
	}
	for _, d := range in.LineageOnly {
		for _, t := range d.Tags {
			if slices.Contains(p.cfg.AggregateTags, t) {
				notAuto = append(notAuto, fmt.Sprintf("%s downstream of the target is tagged %s (aggregate_tags): lineage only, it is not rebuilt, but its rows change with what the plan rewrites", d.Name, t))
			}
		}
	}

	var dec Decision
	switch {
	case len(manual) > 0:
		dec = Decision{Tier: refill.TierManual, Reasons: manual, Attention: notAuto}
	case len(notAuto) > 0:
		dec = Decision{Tier: refill.TierSemiAuto, Reasons: notAuto}
	default:
		proven := fmt.Sprintf("all %d datasets have", len(in.Rebuilt))
		if len(in.Rebuilt) == 1 {
			proven = "its one dataset has"
		}
		dec = Decision{Tier: refill.TierAuto, Reasons: []string{fmt.Sprintf(
			"range is %s, within the auto limit of %d; %s a current passing proof; nothing tagged %s downstream",
			plural(days, "day"), p.cfg.AutoMaxDays, proven, strings.Join(p.cfg.AggregateTags, "/"))}}
	}

	// Extra rules may only raise the tier. They run in order, each seeing
	// the tier so far.
	for _, r := range p.rules {
		out, _, err := r.prg.Eval(activation(in, dec.Tier))
		if err != nil {
			return Decision{}, refill.BadInputf("policy.rules %s: evaluating %q: %s", r.rule.Name, r.rule.When, oneLine(err.Error()))
		}
		hit, ok := out.Value().(bool)
		if !ok {
			return Decision{}, refill.BadInputf("policy.rules %s: %q gave %v, want true or false", r.rule.Name, r.rule.When, out.Value())
		}
		if !hit {
			continue
		}
		reason := fmt.Sprintf("rule %s: %s", r.rule.Name, r.rule.Reason)
		switch {
		case r.rule.Tier.Rank() > dec.Tier.Rank():
			// The rule decides now; what decided before still needs a
			// person's eye, unless it only said why the plan was auto.
			displaced := dec.Reasons
			if dec.Tier == refill.TierAuto {
				displaced = nil
			}
			dec = Decision{Tier: r.rule.Tier, Reasons: []string{reason}, Attention: firstFailedProofs(append(displaced, dec.Attention...))}
		case r.rule.Tier == dec.Tier:
			dec.Reasons = append(dec.Reasons, reason)
		}
	}
	return dec, nil
}

func activation(in Input, tier refill.Tier) map[string]any {
	var names, tags []string
	for _, d := range in.Rebuilt {
		names = append(names, d.Name)
		for _, t := range d.Tags {
			if !slices.Contains(tags, t) {
				tags = append(tags, t)
			}
		}
	}
	for _, d := range in.LineageOnly {
		for _, t := range d.Tags {
			if !slices.Contains(tags, t) {
				tags = append(tags, t)
			}
		}
	}
	for _, l := range in.LeftOut {
		for _, t := range l.Tags {
			if !slices.Contains(tags, t) {
				tags = append(tags, t)
			}
		}
	}
	slices.Sort(tags)
	if names == nil {
		names = []string{}
	}
	if tags == nil {
		tags = []string{}
	}
	targets := in.Request.Targets
	if targets == nil {
		targets = []string{}
	}
	parts := int64(in.Partitions)
	return map[string]any{
		"request": RuleRequest{
			Targets: targets, From: in.Request.From, To: in.Request.To, Days: int64(in.Request.Days),
			Reason: in.Request.Reason, RequestedBy: in.Request.RequestedBy,
		},
		"plan":     RulePlan{Datasets: names, Tags: tags, Partitions: parts, Tier: string(tier)},
		"datasets": names,
		"tags":     tags,
		"tier":     string(tier),
	}
}

// plural is "1 day" or "3 days".
func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}

// firstFailedProofs moves failed proofs to the front, keeping the order
// otherwise.
func firstFailedProofs(rs []string) []string {
	var failed, rest []string
	for _, r := range rs {
		if refill.IsFailedProof(r) {
			failed = append(failed, r)
		} else {
			rest = append(rest, r)
		}
	}
	return append(failed, rest...)
}
