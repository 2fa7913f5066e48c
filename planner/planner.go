// Package planner turns a request into a plan: the lineage closure in run
// order, every partition with its current and expected row counts, the
// source gate's verdict and the tier with its reasons. Nothing is written to
// the warehouse; the plan is stored immutable and hashed.
package planner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/dsn"
	"github.com/refill-dev/refill/gate"
	"github.com/refill-dev/refill/jobs"
	"github.com/refill-dev/refill/lineage"
	"github.com/refill-dev/refill/policy"
	"github.com/refill-dev/refill/store"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// HistoryDepth is how many partitions before a range are read to estimate
// expected rows for jobs whose output cannot be counted ahead: four weeks of
// days gives four same-weekday points.
const HistoryDepth = 28

// ProofSource tells the policy whether a dataset's job has current evidence
// of idempotency. The proofs component implements it; without one, no
// dataset has a proof.
type ProofSource interface {
	ProofStatus(ctx context.Context, dataset, fingerprint string) (policy.Evidence, error)
}

// Store is what the planner reads from and writes to the state store: what
// the gate reads, the OpenLineage edges outside jobs reported, and the plan
// it records. *store.Store implements it; a nil Store builds plans (Build)
// without history or outside readers, and cannot record them.
type Store interface {
	gate.Store
	LineageEdges(ctx context.Context) ([]store.LineageEdge, error)
	RecordPlan(ctx context.Context, rec refill.PlanRecord) ([]string, error)
}

// Planner builds and stores plans.
type Planner struct {
	Config    *refill.Config
	Graph     *lineage.Graph
	Policy    *policy.Policy
	Warehouse refill.Warehouse
	Store     Store
	// Gate checks the plan's inputs; Proofs says which jobs are proven.
	// Without Proofs, no dataset has a proof.
	Gate   *gate.Gate
	Proofs ProofSource
	// Now is the clock (REFILL_NOW in the CLI).
	Now func() time.Time
}

// New wires a planner over a loaded config.
func New(cfg *refill.Config, wh refill.Warehouse, st Store) (*Planner, error) {
	g, err := lineage.Of(cfg)
	if err != nil {
		return nil, err
	}
	pol, err := policy.Compile(cfg.Policy)
	if err != nil {
		return nil, err
	}
	p := &Planner{Config: cfg, Graph: g, Policy: pol, Warehouse: wh, Store: st, Now: time.Now}
	p.Gate = &gate.Gate{Config: cfg, Warehouse: wh, Now: func() time.Time { return p.Now() }}
	if st != nil {
		p.Gate.Store = st
	}
	return p, nil
}

// Request is what the user asked for, before validation.
type Request struct {
	// Targets are selectors (lineage.Selection): dataset names, name+,
	// +name, tag:T.
	Targets []string
	// Exclude are selectors of datasets to leave out; NoDownstream takes
	// only what Targets name, nothing downstream of it.
	Exclude      []string
	NoDownstream bool
	From         string
	To           string
	Reason       string
	// Actor is the already resolved requester.
	Actor string
}

// Plan builds the plan for r and stores it, with the source schemas it saw
// (the next plan's drift baseline) and the partitions its gate flagged.
func (p *Planner) Plan(ctx context.Context, r Request) (*refill.Plan, error) {
	plan, seen, err := p.build(ctx, r)
	if err != nil {
		return nil, err
	}
	if p.Store == nil {
		return nil, errors.New("storing plan: no state store")
	}
	if _, err := p.Store.RecordPlan(ctx, refill.PlanRecord{Plan: plan, Schemas: seen.Schemas, Flags: seen.Flags}); err != nil {
		return nil, fmt.Errorf("storing plan: %w", err)
	}
	return plan, nil
}

// Build makes the plan for r without storing it.
func (p *Planner) Build(ctx context.Context, r Request) (*refill.Plan, error) {
	plan, _, err := p.build(ctx, r)
	return plan, err
}

func (p *Planner) build(ctx context.Context, r Request) (*refill.Plan, gate.Result, error) {
	var seen gate.Result
	plan, err := p.assemble(ctx, r, &seen)
	return plan, seen, err
}

func (p *Planner) assemble(ctx context.Context, r Request, seen *gate.Result) (*refill.Plan, error) {
	if len(r.Targets) == 0 {
		return nil, refill.BadInputf("name at least one dataset to reprocess (known: %s)", strings.Join(p.Graph.Names(), ", "))
	}
	if strings.TrimSpace(r.Reason) == "" {
		return nil, refill.BadInputf("--reason is required: say why these dates are reprocessed, so the audit log can answer it later")
	}
	// The watcher's reasons are refill's own words, not a person's.
	if r.Actor != refill.Watcher {
		if err := refill.CheckText("--reason", strings.TrimSpace(r.Reason)); err != nil {
			return nil, err
		}
	}
	if r.Actor == "" {
		return nil, refill.BadInputf("the requester is unknown: pass --as USER or set REFILL_USER")
	}
	rng, err := refill.ParseRange(r.From, r.To, p.Config.MaxRangeDays)
	if err != nil {
		return nil, err
	}
	sel := lineage.Selection{Select: trimmed(r.Targets), Exclude: trimmed(r.Exclude), NoDownstream: r.NoDownstream}
	closure, targets, err := p.Graph.Select(sel)
	if err != nil {
		return nil, err
	}
	// Hours for datasets that are all partitioned by day would be widened
	// to whole days without a word; a range that starts after the last
	// partition that could exist rebuilds nothing. That is judged by the
	// later of the real clock and REFILL_NOW, so that neither refuses
	// what the other would take (refill check asks no such thing: it
	// only reads).
	grains := map[string]refill.Grain{}
	for _, name := range targets {
		grains[name] = p.Config.Datasets[name].Ref().Grain
	}
	if err := rng.FitGrains(grains); err != nil {
		return nil, err
	}
	latest := refill.Clock(p.Now).Latest()
	if err := rng.CouldExist(latest); err != nil {
		return nil, fmt.Errorf("%w (now is %s, the later of the real clock and REFILL_NOW)", err, latest.Format(time.RFC3339))
	}
	if len(closure.Steps) == 0 {
		if !sel.IsPlain() {
			return nil, refill.BadInputf("nothing to rebuild: the selection %s takes no dataset with a job", sel.String())
		}
		return nil, refill.BadInputf("nothing to rebuild: %s has no datasets downstream with a job", strings.Join(targets, ", "))
	}

	plan := &refill.Plan{
		ID:     newID(),
		Status: refill.StatusPending,
		Request: refill.Request{
			Targets: targets, From: rng.FromString(), To: rng.ToString(),
			Reason: strings.TrimSpace(r.Reason), RequestedBy: r.Actor, Days: rng.Days(),
		},
		LeftOut:   leftOut(closure),
		Changed:   changedViews(p.Config, closure),
		Sources:   closure.Sources,
		Policy:    p.Config.Policy,
		CreatedAt: p.Now().UTC(),
		Seal:      refill.SealVersion,
		Run:       &refill.RunSeal{Tolerance: p.Config.Run.Tolerance},
		Warehouse: dsn.Redact(p.Config.Warehouse),
	}
	if !sel.IsPlain() {
		plan.Request.Select, plan.Request.Exclude, plan.Request.NoDownstream = sel.Select, sel.Exclude, sel.NoDownstream
	}
	if asOf, real, ahead := refill.Clock(p.Now).Ahead(); ahead {
		plan.Clock = &refill.PlanClock{Real: real.Truncate(time.Second), AsOf: asOf}
	}

	// Every table the plan reads or writes must exist with its partition
	// column before anything else is asked of the warehouse.
	for _, name := range closure.Sources {
		if err := p.checkTable(ctx, p.Config.Datasets[name]); err != nil {
			return nil, err
		}
	}
	for _, n := range closure.Steps {
		if err := p.checkTable(ctx, n.Dataset); err != nil {
			return nil, err
		}
		step, err := p.step(ctx, n, rng)
		if err != nil {
			return nil, err
		}
		plan.Steps = append(plan.Steps, step)
	}

	p.afterUpstream(ctx, plan)

	inputs := p.inputs(closure)
	res, err := p.Gate.Check(ctx, inputs, rng)
	if err != nil {
		return nil, fmt.Errorf("source gate: %w", err)
	}
	*seen = res
	plan.Gate = res.GateVerdict
	// Seal what the gate judged: the apply-time re-check judges the same
	// tables by the same checks against the columns seen here.
	for _, name := range inputs {
		d := p.Config.Datasets[name]
		seal := refill.SourceSeal{Dataset: name, Checks: d.Checks}
		if d.Table != "" {
			ref := d.Ref()
			seal.Ref = &ref
		}
		for _, sc := range res.Schemas {
			if sc.Dataset == name {
				seal.Columns = sc.Columns
			}
		}
		plan.SourceSeals = append(plan.SourceSeals, seal)
	}

	in := policy.Input{Request: plan.Request, Downstream: closure.Downstream, Proofs: map[string]policy.Evidence{}, Clock: plan.Clock, LeftOut: plan.LeftOut}
	if plan.Consumers, err = p.consumers(ctx, plan, closure.LineageOnly); err != nil {
		return nil, err
	}
	in.Consumers = plan.Consumers
	for _, f := range plan.Gate.Findings {
		if f.Warning {
			in.Unscored = append(in.Unscored, fmt.Sprintf("%s %s %s: %s", f.Dataset, f.Partition, f.Check, f.Message))
		}
		if f.Accepted != nil {
			in.Accepted = append(in.Accepted, fmt.Sprintf("%s %s %s, accepted by %s", f.Dataset, f.Partition, f.Check, f.Accepted.By))
		}
	}
	for _, st := range plan.Steps {
		in.Partitions += len(st.Partitions)
		for _, f := range st.Audit {
			in.Audit = append(in.Audit, fmt.Sprintf("%s %s %s: %s", f.Dataset, f.Partition, f.Check, f.Message))
		}
	}
	for _, n := range closure.Steps {
		in.Rebuilt = append(in.Rebuilt, n.Dataset)
		if p.Proofs != nil {
			pr, err := p.Proofs.ProofStatus(ctx, n.Dataset.Name, n.Dataset.Job.Fingerprint())
			if err != nil {
				return nil, fmt.Errorf("proofs of %s: %w", n.Dataset.Name, err)
			}
			in.Proofs[n.Dataset.Name] = pr
		}
	}
	for _, n := range closure.LineageOnly {
		in.LineageOnly = append(in.LineageOnly, p.Config.Datasets[n])
	}
	dec, err := p.Policy.Decide(in)
	if err != nil {
		return nil, err
	}
	plan.Tier, plan.Reasons, plan.Attention = dec.Tier, dec.Reasons, dec.Attention
	switch {
	case !plan.Gate.Passed:
		plan.Status = refill.StatusBlocked
	case plan.Tier == refill.TierAuto:
		plan.Status = refill.StatusReady
	}
	plan.Hash = plan.ComputeHash()
	return plan, nil
}

// RehearsalBudget bounds how many partitions a plan rebuilds in its
// rolled-back rehearsal to count downstream expectations; past it, those
// expectations are shown as depending on the upstream (docs/design.md: a dry run
// never shows "no change" where the run will change rows).
var RehearsalBudget = 10000

// afterUpstream rehearses the plan in one warehouse transaction that is
// always rolled back: every query and sql job builds its partitions in
// lineage order, as the run will.
//
// While it does, each partition is compared with the live one (its content
// diff: which rows and values the rebuild changes), within
// plan.diff_budget rows compared; and the expected rows of jobs that read
// a dataset the same plan rebuilds are counted after that upstream is
// rebuilt: counted against today's upstream, they would tell the approver
// "no change" where the run changes rows. A view between them (a
// lineage-only dataset that follows its upstream) is read through: its
// rows are the rebuilt upstream's. Where that cannot be done, the
// expectation is unknown and marked as depending on the upstream, the
// diff is skipped, and each says why.
func (p *Planner) afterUpstream(ctx context.Context, plan *refill.Plan) {
	rebuilt := map[string]*refill.Step{}
	for i := range plan.Steps {
		rebuilt[plan.Steps[i].Dataset] = &plan.Steps[i]
	}
	// reads returns the rebuilt datasets among ups, and those behind the
	// views among them, with the views it read them through.
	reads := func(ups []string) (steps []*refill.Step, via []*refill.Dataset) {
		seen := map[string]bool{}
		var walk func(names []string) bool
		walk = func(names []string) (found bool) {
			for _, name := range names {
				if seen[name] {
					continue
				}
				seen[name] = true
				if st := rebuilt[name]; st != nil {
					steps = append(steps, st)
					found = true
					continue
				}
				if d := p.Config.Datasets[name]; d != nil && d.FollowsUpstream() && walk(d.Upstream) {
					via = append(via, d)
					found = true
				}
			}
			return found
		}
		walk(ups)
		return steps, via
	}
	// behind returns the rebuilt datasets a step needs built first
	// (transitively), and those among them whose jobs write outside the
	// warehouse's transaction, which no rehearsal can build.
	behind := func(st *refill.Step) (mine map[string]bool, outside []*refill.Step) {
		mine = map[string]bool{}
		var visit func(up *refill.Step)
		visit = func(up *refill.Step) {
			if mine[up.Dataset] {
				return
			}
			mine[up.Dataset] = true
			if !rehearsable(up.Kind) {
				outside = append(outside, up)
			}
			ups, _ := reads(up.Upstream)
			for _, u := range ups {
				visit(u)
			}
		}
		direct, _ := reads(st.Upstream)
		for _, up := range direct {
			visit(up)
		}
		return mine, outside
	}
	// Which steps read a rebuilt dataset, and which rebuilt datasets they
	// need built first. A step behind a command or Airflow job cannot be
	// rehearsed: what that job writes is outside refill.
	var targets, unknowable []*refill.Step
	through := map[*refill.Step]string{} // the note of a step read through a view
	need := map[string]bool{}
	for i := range plan.Steps {
		st := &plan.Steps[i]
		if st.Table == "" {
			continue
		}
		direct, via := reads(st.Upstream)
		if len(direct) == 0 {
			continue
		}
		if !rehearsable(st.Kind) {
			// A command or Airflow job reading a rebuilt dataset writes what
			// refill cannot see ahead: its history guess says nothing about
			// the rows the upstream will have.
			st.ExpectedNote = fmt.Sprintf("a %s job reading %s, which this plan rebuilds: what it will write cannot be counted ahead", st.Kind, stepNames(direct))
			unknowable = append(unknowable, st)
			continue
		}
		mine, outside := behind(st)
		if len(outside) > 0 {
			st.ExpectedNote = fmt.Sprintf("it reads what %s will write in this plan, a job outside the warehouse's transaction that cannot be rehearsed", stepNames(outside))
			unknowable = append(unknowable, st)
			continue
		}
		targets = append(targets, st)
		need[st.Dataset] = true
		for n := range mine {
			need[n] = true
		}
		if len(via) > 0 {
			through[st] = fmt.Sprintf("counted after the plan rebuilds %s, read through %s, which passes its upstream's rows through", stepNames(direct), viewNames(via))
		}
	}
	defer func() {
		for _, st := range unknowable {
			for i := range st.Partitions {
				st.Partitions[i].ExpectedRows = nil
				st.Partitions[i].ExpectedMethod = refill.ExpectedUpstream
			}
		}
	}()

	// Which steps get a content diff: those the rehearsal can build, with
	// everything they read rebuilt by it too. Every other partition says
	// why it has none.
	budget := p.Config.Plan.DiffBudget
	diffed := map[*refill.Step]bool{}
	for i := range plan.Steps {
		st := &plan.Steps[i]
		var why string
		switch {
		case !rehearsable(st.Kind):
			why = fmt.Sprintf("a %s job writes outside the warehouse's transaction, so its rebuild cannot be rehearsed and compared", st.Kind)
		case st.Table == "":
			why = "the dataset has no table to compare"
		case budget == 0:
			why = "plan.diff_budget is 0, which turns content diffs off"
		}
		if why == "" {
			mine, outside := behind(st)
			if len(outside) > 0 {
				why = fmt.Sprintf("it reads what %s will write in this plan, a job outside the warehouse's transaction that cannot be rehearsed", stepNames(outside))
			} else {
				diffed[st] = true
				need[st.Dataset] = true
				for n := range mine {
					need[n] = true
				}
			}
		}
		if why != "" {
			skipDiffs(st, why)
		}
	}
	views, reserved := p.viewDiffs(ctx, plan, reads, behind, need)
	if len(targets) == 0 && len(diffed) == 0 && len(views) == 0 {
		return
	}
	builds := 0
	for name := range need {
		builds += len(rebuilt[name].Partitions)
	}
	var why string // how the rehearsal failed, as "the rehearsal ..." goes on
	switch {
	case builds > RehearsalBudget:
		why = fmt.Sprintf("would rebuild %d partitions, over the rehearsal budget of %d", builds, RehearsalBudget)
	default:
		counts := map[string]map[string]int64{}
		diffs := map[string][]*refill.PartitionDiff{}
		audits := map[string][]refill.Finding{}
		var used int64 // rows compared so far
		var over []*refill.PartitionDiff
		err := p.Warehouse.Rehearse(ctx, func(tx refill.WarehouseTx) error {
			buildSteps := func() error {
				for i := range plan.Steps {
					st := &plan.Steps[i]
					if !need[st.Dataset] {
						continue
					}
					d := st.SealedDataset()
					ref := d.Ref()
					jr, err := jobs.For(st.Kind, jobs.Deps{})
					if err != nil {
						return fmt.Errorf("building %s: %w", st.Dataset, err)
					}
					isTarget := slices.Contains(targets, st)
					if isTarget {
						counts[st.Dataset] = map[string]int64{}
					}
					var spec refill.DiffSpec
					if diffed[st] {
						spec = p.Config.Datasets[st.Dataset].DiffSpec()
						diffs[st.Dataset] = make([]*refill.PartitionDiff, len(st.Partitions))
					}
					for j, pp := range st.Partitions {
						build := func() error {
							_, err := jr.Build(ctx, tx, d, refill.JobRun{Partition: pp.Partition})
							return err
						}
						switch {
						case !diffed[st]:
							err = build()
						case used+reserved+guessCompared(pp) > budget:
							// Over the budget: built all the same, for what reads it.
							diffs[st.Dataset][j] = &refill.PartitionDiff{}
							over = append(over, diffs[st.Dataset][j])
							err = build()
						default:
							var pd *refill.PartitionDiff
							pd, err = tx.Diff(ctx, ref, pp.Partition, spec, build)
							if err == nil {
								used += pd.Compared()
								diffs[st.Dataset][j] = pd
							}
						}
						if err != nil {
							return fmt.Errorf("building %s %s: %w", st.Dataset, pp.Partition, err)
						}
						// The dataset's own row checks judge what the rebuild
						// wrote, as the run's audit will before publishing it.
						if c := p.Config.Datasets[st.Dataset].Checks; gate.HasRowChecks(c) && st.Table != "" {
							spec := gate.RowSpec(c, p.Now())
							profiles, err := tx.Profile(ctx, ref, spec, pp.Partition, pp.Partition)
							if err != nil {
								return fmt.Errorf("checking the rebuilt %s %s: %w", st.Dataset, pp.Partition, err)
							}
							audits[st.Dataset] = append(audits[st.Dataset], gate.Judge(st.Dataset, pp.Partition, profiles[pp.Partition], c, spec.Now)...)
						}
						if isTarget {
							dg, err := tx.Digest(ctx, ref, pp.Partition)
							if err != nil {
								return fmt.Errorf("counting %s %s: %w", st.Dataset, pp.Partition, err)
							}
							counts[st.Dataset][pp.Partition] = dg.Rows
						}
					}
				}
				return nil
			}
			// Each view partition's diff wraps the whole rebuild: copied
			// before anything is rebuilt, compared after everything is.
			run := buildSteps
			for _, v := range views {
				for i, part := range v.parts {
					if v.diffs[i] != nil {
						continue // over the budget
					}
					inner := run
					run = func() error {
						pd, err := tx.Diff(ctx, v.ref, part, v.spec, inner)
						if err == nil {
							v.diffs[i] = pd
						}
						return err
					}
				}
			}
			return run()
		})
		if err == nil {
			for _, st := range targets {
				for i := range st.Partitions {
					n := counts[st.Dataset][st.Partitions[i].Partition]
					st.Partitions[i].ExpectedRows = &n
					st.Partitions[i].ExpectedMethod = refill.ExpectedRehearsal
				}
				st.ExpectedNote = through[st]
			}
			total := 0
			for st := range diffed {
				total += len(st.Partitions)
				for i := range st.Partitions {
					st.Partitions[i].Diff = diffs[st.Dataset][i]
				}
			}
			for i := range plan.Steps {
				plan.Steps[i].Audit = audits[plan.Steps[i].Dataset]
			}
			for _, v := range views {
				total += len(v.parts)
				for i, part := range v.parts {
					used += v.diffs[i].Compared()
					v.cv.Partitions = append(v.cv.Partitions, refill.ViewPartition{Partition: part, Diff: v.diffs[i]})
				}
				over = append(over, v.over...)
			}
			for _, pd := range over {
				pd.Skipped = fmt.Sprintf("over plan.diff_budget: the plan's diffs compared %s rows of the %s allowed, in %d of %d partitions",
					humanize.Comma(used), humanize.Comma(budget), total-len(over), total)
			}
			return
		}
		why = fmt.Sprintf("failed (%s); the run may fail the same way", strings.Join(strings.Fields(err.Error()), " "))
	}
	for _, st := range targets {
		st.ExpectedNote = "the rehearsal that counts its rows after the upstream is rebuilt " + why
		for i := range st.Partitions {
			st.Partitions[i].ExpectedRows = nil
			st.Partitions[i].ExpectedMethod = refill.ExpectedUpstream
		}
	}
	for st := range diffed {
		skipDiffs(st, "the rehearsal that builds it to compare "+why)
	}
	for _, v := range views {
		v.cv.Diff = refill.SkippedDiff("the rehearsal that builds what it reads to compare " + why)
	}
}

// viewDiff is a changed view the rehearsal compares, partition by
// partition: its diffs are filled as it goes, those over the budget
// up front (also listed in over).
type viewDiff struct {
	cv    *refill.ChangedView
	ref   refill.TableRef
	spec  refill.DiffSpec
	parts []string
	diffs []*refill.PartitionDiff
	over  []*refill.PartitionDiff
}

// viewDiffs picks the plan's changed views the rehearsal can compare: a
// view (one that follows its upstream) with a table and a partition
// column, on the grain of the rebuilt steps it reads, none of them behind
// a job the rehearsal cannot build. Its partitions are those steps'. Each
// view partition counts against plan.diff_budget up front by the rows its
// upstream's partitions will compare (reserved, all told): a view
// partition's diff spans the whole rebuild, so it must be chosen before
// it. Every other changed view says why it is not compared, as does one
// whose table the warehouse lacks. What the
// chosen views read is marked in need.
func (p *Planner) viewDiffs(ctx context.Context, plan *refill.Plan, reads func([]string) ([]*refill.Step, []*refill.Dataset),
	behind func(*refill.Step) (map[string]bool, []*refill.Step), need map[string]bool) (views []*viewDiff, reserved int64) {
	budget := p.Config.Plan.DiffBudget
	for i := range plan.Changed {
		cv := &plan.Changed[i]
		d := p.Config.Datasets[cv.Dataset]
		if d == nil || !d.FollowsUpstream() {
			continue // a lineage-only table keeps its rows: nothing to compare
		}
		ref := d.Ref()
		ups, _ := reads(d.Upstream)
		var why string
		switch {
		case d.Table == "":
			why = "the view has no table to compare"
		case ref.Column == "":
			why = "the view has no partition column to compare by (partition.column)"
		case len(ups) == 0:
			why = "it reads no dataset the plan rebuilds"
		case budget == 0:
			why = "plan.diff_budget is 0, which turns content diffs off"
		}
		for _, st := range ups {
			if why != "" {
				break
			}
			switch _, outside := behind(st); {
			case !rehearsable(st.Kind):
				why = fmt.Sprintf("it reads %s, a %s job that writes outside the warehouse's transaction, so its rebuild cannot be rehearsed", st.Dataset, st.Kind)
			case len(outside) > 0:
				why = fmt.Sprintf("it reads what %s will write in this plan, a job outside the warehouse's transaction that cannot be rehearsed", stepNames(outside))
			case st.Ref == nil || st.Ref.Grain != ref.Grain || st.Ref.Timezone != ref.Timezone:
				why = fmt.Sprintf("its partitions (%s) are not those of %s, which it reads", grainOf(&ref), st.Dataset)
			}
		}
		if why == "" {
			// A view declared with a table the warehouse lacks would fail
			// the whole rehearsal: it is left out, and says why.
			if err := p.checkTable(ctx, d); err != nil {
				why = "it cannot be read: " + err.Error()
			}
		}
		if why != "" {
			cv.Diff = refill.SkippedDiff(why)
			continue
		}
		// The view's partitions are its upstreams', each guessed to
		// compare as many rows as they do.
		guess := map[string]int64{}
		for _, st := range ups {
			for _, pp := range st.Partitions {
				guess[pp.Partition] += guessCompared(pp)
			}
		}
		v := &viewDiff{cv: cv, ref: ref, spec: d.DiffSpec(), parts: slices.Sorted(maps.Keys(guess))}
		v.diffs = make([]*refill.PartitionDiff, len(v.parts))
		for j, part := range v.parts {
			if reserved+guess[part] > budget {
				v.diffs[j] = &refill.PartitionDiff{}
				v.over = append(v.over, v.diffs[j])
				continue
			}
			reserved += guess[part]
		}
		for _, st := range ups {
			need[st.Dataset] = true
			mine, _ := behind(st)
			for n := range mine {
				need[n] = true
			}
		}
		views = append(views, v)
	}
	return views, reserved
}

// grainOf names a table's partitions for a note: "day", "hour in UTC".
func grainOf(ref *refill.TableRef) string {
	if ref.Grain == refill.GrainHour && ref.Timezone != "" {
		return "hour in " + ref.Timezone
	}
	return string(ref.Grain)
}

// skipDiffs marks every partition of a step as having no content diff,
// and why.
func skipDiffs(st *refill.Step, why string) {
	for i := range st.Partitions {
		st.Partitions[i].Diff = refill.SkippedDiff(why)
	}
}

// guessCompared is how many rows diffing a partition will compare, as far
// as the plan knows before building it: its rows now, and the rows its job
// is expected to write when that was counted.
func guessCompared(pp refill.PartitionPlan) int64 {
	var n int64
	if pp.CurrentRows != nil {
		n += *pp.CurrentRows
	}
	if pp.ExpectedRows != nil {
		n += *pp.ExpectedRows
	}
	return n
}

// rehearsable reports whether a job of kind builds inside refill's
// warehouse transaction, so that a rolled-back rehearsal can count what it
// will write.
func rehearsable(kind refill.JobKind) bool {
	jr, err := jobs.For(kind, jobs.Deps{})
	return err == nil && jr.Transactional()
}

// stepNames lists steps' datasets, sorted, for a note.
func stepNames(steps []*refill.Step) string {
	names := make([]string, len(steps))
	for i, st := range steps {
		names[i] = st.Dataset
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// viewNames lists pass-through datasets with why they are lineage only,
// for a note: "v (materialized as a view)".
func viewNames(ds []*refill.Dataset) string {
	names := make([]string, len(ds))
	for i, d := range ds {
		names[i] = fmt.Sprintf("%s (%s)", d.Name, d.Why)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// inputs are what the gate checks: every source upstream of the plan, and
// every dataset with checks that a step reads but the plan does not rebuild.
func (p *Planner) inputs(c lineage.Closure) []string {
	in := slices.Clone(c.Sources)
	steps := map[string]bool{}
	for _, n := range c.Steps {
		steps[n.Dataset.Name] = true
	}
	for _, n := range c.Steps {
		for _, up := range n.Dataset.Upstream {
			if d := p.Config.Datasets[up]; !steps[up] && d.Checks != nil && !slices.Contains(in, up) {
				in = append(in, up)
			}
		}
	}
	slices.Sort(in)
	return in
}

// checkTable verifies a dataset's table and partition column exist.
func (p *Planner) checkTable(ctx context.Context, d *refill.Dataset) error {
	if d.Table == "" {
		return nil
	}
	cols, err := p.Warehouse.Columns(ctx, d.Table)
	if err != nil {
		if errors.Is(err, refill.ErrNoTable) {
			var hint string
			var nt *sqltext.NoTableError
			if errors.As(err, &nt) && nt.Hint != "" {
				hint = "; " + nt.Hint
			}
			return refill.BadInputf("dataset %s: table %s does not exist in the warehouse%s (%s:%d)", d.Name, d.Table, hint, p.Config.Name(), d.Line)
		}
		return fmt.Errorf("dataset %s: reading table %s: %w", d.Name, d.Table, err)
	}
	// The column is found as the driver finds it, so that a plan is never
	// made for a column the run cannot find, or refused for one it can.
	dialect := sqltext.Of(p.Warehouse.Driver())
	if _, ok := dialect.Column(cols, d.Partition.Column); ok {
		return nil
	}
	var hint string
	if h := dialect.ColumnHint(cols, d.Partition.Column); h != "" {
		hint = "; " + h
	}
	// As written: "day", or '"Day"' as YAML needs a quoted name.
	written := fmt.Sprintf("%q", d.Partition.Column)
	if strings.Contains(d.Partition.Column, `"`) {
		written = "'" + d.Partition.Column + "'"
	}
	return refill.BadInputf("dataset %s: table %s has no partition column %s (columns: %s)%s (%s:%d)",
		d.Name, d.Table, written, sqltext.ColumnNames(cols), hint, p.Config.Name(), d.Line)
}

// step counts a dataset's partitions: current rows from one grouped query
// over the range and its history, expected rows from the job's own query
// when it has one, else from history.
func (p *Planner) step(ctx context.Context, n lineage.Node, rng refill.Range) (refill.Step, error) {
	d := n.Dataset
	ref := d.Ref()
	grain := ref.Grain
	parts := rng.Partitions(grain)
	job := *d.Job
	step := refill.Step{
		Dataset: d.Name, Order: n.Order, Kind: d.Job.Kind, Table: d.Table,
		Tags: d.Tags, Upstream: d.Upstream, Fingerprint: d.Job.Fingerprint(),
		Partitions: make([]refill.PartitionPlan, len(parts)),
		Ref:        &ref, Job: &job, Checks: d.Checks,
	}
	for i, part := range parts {
		step.Partitions[i] = refill.PartitionPlan{Partition: part, ExpectedMethod: refill.ExpectedUnknown}
	}
	if d.Table == "" {
		return step, nil
	}
	depth := HistoryDepth
	if grain == refill.GrainHour {
		depth = HistoryDepth * 24 // four weeks of hours: four points for each hour of the week
	}
	wide := rng.Extend(grain, depth)
	counts, err := p.Warehouse.PartitionCounts(ctx, ref, wide.Partitions(grain)[0], parts[len(parts)-1])
	if err != nil {
		return step, fmt.Errorf("dataset %s: counting rows of %s: %w", d.Name, d.Table, err)
	}
	for i, part := range parts {
		c := counts[part]
		step.Partitions[i].CurrentRows = &c
	}
	if d.Job.Kind == refill.JobQuery {
		qc, err := p.Warehouse.QueryCounts(ctx, d.Job.Query, parts)
		if err != nil {
			return step, fmt.Errorf("dataset %s: counting what its query would produce: %w", d.Name, err)
		}
		for i, part := range parts {
			c := qc[part]
			step.Partitions[i].ExpectedRows = &c
			step.Partitions[i].ExpectedMethod = refill.ExpectedQuery
		}
		return step, nil
	}
	history := wide.Partitions(grain)[:depth]
	for i, part := range parts {
		if e, ok := expectedFromHistory(part, ref.Season(), history, counts); ok {
			step.Partitions[i].ExpectedRows = &e
			step.Partitions[i].ExpectedMethod = refill.ExpectedHistory
		}
	}
	return step, nil
}

// expectedFromHistory is the median of the non-empty history partitions in
// the same slot of the week as part — the same weekday at day grain, the
// same hour of the same weekday at hour grain — falling back to all
// non-empty history when the slot has none: weekends are not weekdays, a
// table's busy hours are not its quiet ones, and Saturday 10:00 is not
// Tuesday 10:00.
func expectedFromHistory(part string, s refill.Season, history []string, counts map[string]int64) (int64, bool) {
	slot, ok := s.Slot(part)
	if !ok {
		return 0, false
	}
	var same, all []int64
	for _, h := range history {
		c, ok := counts[h]
		if !ok || c == 0 {
			continue
		}
		all = append(all, c)
		if hs, ok := s.Slot(h); ok && hs == slot {
			same = append(same, c)
		}
	}
	if len(same) > 0 {
		return gate.Median(same), true
	}
	if len(all) > 0 {
		return gate.Median(all), true
	}
	return 0, false
}

func newID() string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("refill: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

// trimmed is selectors without surrounding space and without repeats, in
// their order.
func trimmed(sels []string) []string {
	var out []string
	for _, s := range sels {
		s = strings.TrimSpace(s)
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// leftOut is the closure's left-out datasets as the plan seals them.
func leftOut(c lineage.Closure) []refill.LeftOut {
	var out []refill.LeftOut
	for _, l := range c.LeftOut {
		out = append(out, l.Sealed())
	}
	return out
}

// changedViews are the closure's lineage-only datasets with their tags.
func changedViews(cfg *refill.Config, c lineage.Closure) []refill.ChangedView {
	var out []refill.ChangedView
	for _, n := range c.LineageOnly {
		out = append(out, refill.ChangedView{Dataset: n, Tags: cfg.Datasets[n].Tags})
	}
	return out
}
