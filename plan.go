package refill

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Tier is how far a plan may run on its own (docs/design.md §4).
type Tier string

// Tiers, from most to least autonomous.
const (
	TierAuto     Tier = "auto"
	TierSemiAuto Tier = "semi-auto"
	TierManual   Tier = "manual"
)

// Rank orders tiers so rules can only raise one: auto < semi-auto < manual.
func (t Tier) Rank() int {
	switch t {
	case TierAuto:
		return 0
	case TierSemiAuto:
		return 1
	case TierManual:
		return 2
	}
	return -1
}

// Status is where a stored plan is in its life. A plan's content never
// changes; only its status moves.
type Status string

// Plan statuses.
const (
	// StatusPending waits for approval (semi-auto and manual plans).
	StatusPending Status = "pending"
	// StatusReady needs no approval (auto plans) and may be applied.
	StatusReady Status = "ready"
	// StatusBlocked failed the source gate: it can never be approved or applied.
	StatusBlocked    Status = "blocked"
	StatusApproved   Status = "approved"
	StatusRejected   Status = "rejected"
	StatusSuperseded Status = "superseded"
	StatusRunning    Status = "running"
	StatusApplied    Status = "applied"
	StatusFailed     Status = "failed"
	StatusRolledBack Status = "rolled_back"
	// StatusExpired waited longer than policy.plan_ttl without running: it
	// released its partitions and can no longer be approved or applied.
	StatusExpired Status = "expired"
	// StatusCancelled was stopped by a person (refill cancel): no new
	// partition started after the request, partitions in flight finished
	// and were published or rolled back, and it can no longer run.
	StatusCancelled Status = "cancelled"
	// StatusNeedsReview waits for a person: a side_effects job's attempt
	// ended with its outcome unknown (it may have delivered, and its
	// record did not commit; its process vanished), and refill never runs
	// such a job again on its own. refill resolve says whether it ran; then
	// refill apply resumes.
	StatusNeedsReview Status = "needs_review"
)

// Statuses are every status a plan can have, in life order: the plans
// list's filter accepts exactly these.
var Statuses = []Status{StatusPending, StatusReady, StatusApproved, StatusRunning,
	StatusApplied, StatusFailed, StatusNeedsReview, StatusBlocked, StatusRejected, StatusSuperseded,
	StatusRolledBack, StatusExpired, StatusCancelled}

// transitions are the only edges a plan's status moves along (the table
// in docs/design.md §5). A status not listed as a key is final.
var transitions = map[Status][]Status{
	StatusPending:     {StatusApproved, StatusRejected, StatusCancelled, StatusExpired, StatusSuperseded},
	StatusReady:       {StatusRunning, StatusBlocked, StatusRejected, StatusCancelled, StatusExpired, StatusSuperseded},
	StatusApproved:    {StatusRunning, StatusBlocked, StatusRejected, StatusCancelled, StatusExpired, StatusSuperseded},
	StatusRunning:     {StatusApplied, StatusFailed, StatusNeedsReview, StatusCancelled},
	StatusFailed:      {StatusRunning, StatusBlocked, StatusCancelled, StatusRolledBack},
	StatusNeedsReview: {StatusRunning, StatusCancelled},
	StatusApplied:     {StatusRolledBack},
	StatusCancelled:   {StatusRolledBack},
}

// CanBecome reports whether a plan's status may move from s to to: the
// state store refuses any other move.
func (s Status) CanBecome(to Status) bool {
	for _, t := range transitions[s] {
		if t == to {
			return true
		}
	}
	return false
}

// Final reports whether s can never change.
func (s Status) Final() bool { return len(transitions[s]) == 0 }

// Known reports whether s is one of Statuses.
func (s Status) Known() bool {
	for _, k := range Statuses {
		if k == s {
			return true
		}
	}
	return false
}

// Request is "reprocess targets T for partitions from..to, because R".
type Request struct {
	// Targets are the datasets the request selected (sorted), before what
	// is downstream of them is added.
	Targets []string `json:"targets"`
	// Select, Exclude and NoDownstream are the request's selectors as
	// given ("events_raw+", "tag:aggregate", "+revenue_daily"), set only
	// when it was more than dataset names, each with everything downstream.
	Select       []string `json:"select,omitempty"`
	Exclude      []string `json:"exclude,omitempty"`
	NoDownstream bool     `json:"no_downstream,omitempty"`
	From         string   `json:"from"`
	To           string   `json:"to"`
	Reason       string   `json:"reason"`
	RequestedBy  string   `json:"requested_by"`
	// Days counts the calendar days of the range, both ends included.
	Days int `json:"days"`
}

// ExpectedMethod says how a partition's expected row count was found.
type ExpectedMethod string

// Expected-row methods.
const (
	ExpectedQuery     ExpectedMethod = "query"     // the job's query, counted read-only now
	ExpectedHistory   ExpectedMethod = "history"   // the median of recent partitions
	ExpectedRehearsal ExpectedMethod = "rehearsal" // a rolled-back rehearsal of the job
	ExpectedUnknown   ExpectedMethod = "unknown"   // no table and no history to go by
	// ExpectedUpstream: the job reads a dataset the same plan rebuilds, and
	// its rows could not be counted as they will be after the plan (the
	// upstream is a command or Airflow job, or rehearsing would cost too
	// much): never "no change".
	ExpectedUpstream ExpectedMethod = "depends_on_upstream"
)

// PartitionPlan is one partition a step will rewrite. Nil counts are
// unknown (for example a command job that writes no table refill can see).
type PartitionPlan struct {
	Partition      string         `json:"partition"`
	CurrentRows    *int64         `json:"current_rows"`
	ExpectedRows   *int64         `json:"expected_rows"`
	ExpectedMethod ExpectedMethod `json:"expected_method"`
	// Diff is what rebuilding the partition changes, as the dry run's
	// rehearsal found it: nil for a plan made before content diffs.
	Diff *PartitionDiff `json:"diff,omitempty"`
}

// Step is one dataset the plan rebuilds. Steps with equal Order do not
// depend on each other and may run together.
type Step struct {
	Dataset     string          `json:"dataset"`
	Order       int             `json:"order"`
	Kind        JobKind         `json:"kind"`
	Table       string          `json:"table,omitempty"`
	Tags        []string        `json:"tags,omitempty"`
	Upstream    []string        `json:"upstream,omitempty"`
	Fingerprint string          `json:"fingerprint"`
	Partitions  []PartitionPlan `json:"partitions"`
	// Audit are the findings of the dataset's own row checks (not_null,
	// unique, accepted_values, time order) on the rows its rehearsal
	// rebuilt: what the run's audit would refuse to publish. Any keeps
	// the plan from auto.
	Audit []Finding `json:"audit,omitempty"`
	// ExpectedNote says, for the approver, why the step's expected rows
	// are not its job's own count of today's upstream: what they were
	// counted after (a rehearsal, through a view), or why they depend on
	// the upstream (a command job, a rehearsal that failed, and why).
	ExpectedNote string `json:"expected_note,omitempty"`

	// What the plan sealed of the dataset: everything that decides what
	// the step writes. Apply, workers, snapshot, rollback and report use
	// these, never the config of the moment. Plans made before sealing
	// (SealVersion 0) lack them and are stale.
	Ref    *TableRef `json:"ref,omitempty"`
	Job    *Job      `json:"job,omitempty"`
	Checks *Checks   `json:"checks,omitempty"`
}

// SealedDataset is the dataset as the plan sealed it, or nil for a plan
// made before sealing.
func (s *Step) SealedDataset() *Dataset {
	if s.Ref == nil || s.Job == nil {
		return nil
	}
	return &Dataset{Name: s.Dataset, Table: s.Ref.Table, Partition: PartitionSpec{Column: s.Ref.Column, Grain: s.Ref.Grain, Timezone: s.Ref.Timezone},
		Upstream: s.Upstream, Tags: s.Tags, Checks: s.Checks, Job: s.Job}
}

// SourceSeal is a source (or an input the plan does not rebuild) as the
// plan's gate judged it: its table, its checks, and the columns it had.
// The apply-time re-check judges against these.
type SourceSeal struct {
	Dataset string    `json:"dataset"`
	Ref     *TableRef `json:"ref,omitempty"`
	Checks  *Checks   `json:"checks,omitempty"`
	Columns []Column  `json:"columns,omitempty"`
}

// SealedDataset is the source as the plan sealed it.
func (s *SourceSeal) SealedDataset() *Dataset {
	d := &Dataset{Name: s.Dataset, Checks: s.Checks}
	if s.Ref != nil {
		d.Table, d.Partition = s.Ref.Table, PartitionSpec{Column: s.Ref.Column, Grain: s.Ref.Grain, Timezone: s.Ref.Timezone}
	}
	return d
}

// RunSeal is what the plan sealed of the run settings that judge its
// outcome.
type RunSeal struct {
	// Tolerance is run.tolerance when the plan was made: the report judges
	// by it.
	Tolerance float64 `json:"tolerance"`
}

// Sealed returns the datasets the plan sealed — its steps and the inputs
// its gate judged — as a config the runner, the gate re-check, snapshot,
// rollback and report work from, on base's other settings. It is nil for a
// plan made before sealing.
func (p *Plan) Sealed(base *Config) *Config {
	if p.Seal < SealVersion {
		return nil
	}
	cfg := *base
	cfg.Datasets = map[string]*Dataset{}
	for _, s := range p.SourceSeals {
		cfg.Datasets[s.Dataset] = s.SealedDataset()
	}
	for i := range p.Steps {
		if d := p.Steps[i].SealedDataset(); d != nil {
			cfg.Datasets[d.Name] = d
		}
	}
	cfg.Policy = p.Policy
	if p.Run != nil {
		cfg.Run.Tolerance = p.Run.Tolerance
	}
	return &cfg
}

// SealVersion is the version of what a plan seals; plans made before
// sealing carry 0.
const SealVersion = 1

// Finding is one result of the source gate for a dataset, partition and
// check. Warnings (such as too little history) are shown but do not block.
type Finding struct {
	Dataset   string  `json:"dataset"`
	Partition string  `json:"partition"`
	Check     string  `json:"check"`
	Column    string  `json:"column"`
	Observed  float64 `json:"observed"`
	Limit     float64 `json:"limit"`
	Passed    bool    `json:"passed"`
	Warning   bool    `json:"warning,omitempty"`
	Message   string  `json:"message,omitempty"`
	// Accepted is set on a finding a person accepted as real data (refill
	// accept): it passes, and says who, why and when.
	Accepted *Accepted `json:"accepted,omitempty"`
	// Lapsed is set on a failing finding whose acceptance no longer holds:
	// the partition changed since it was accepted, or the dataset now
	// needs a lead's acceptance.
	Lapsed *Accepted `json:"lapsed,omitempty"`
}

// Gate is the source gate's verdict for a plan.
type GateVerdict struct {
	Passed bool `json:"passed"`
	// Checked lists the datasets the gate looked at.
	Checked  []string  `json:"checked"`
	Findings []Finding `json:"findings"`
}

// Failed counts the findings that failed (warnings are not failures).
func (g GateVerdict) Failed() int {
	n := 0
	for _, f := range g.Findings {
		if !f.Passed && !f.Warning {
			n++
		}
	}
	return n
}

// Plan is the immutable, hashed dry run of a request.
type Plan struct {
	ID      string   `json:"id"`
	Hash    string   `json:"hash"`
	Status  Status   `json:"status"`
	Tier    Tier     `json:"tier"`
	Reasons []string `json:"reasons"`
	// Attention is everything else that would keep the plan from auto:
	// the not-auto reasons of a manual plan, and the reasons a policy rule
	// displaced when it raised the tier. Sealed with the plan.
	Attention []string    `json:"attention,omitempty"`
	Request   Request     `json:"request"`
	Steps     []Step      `json:"steps"`
	Sources   []string    `json:"sources"`
	Gate      GateVerdict `json:"gate"`
	Policy    Policy      `json:"policy"`
	CreatedAt time.Time   `json:"created_at"`
	// Seal is SealVersion for plans that seal what they run.
	Seal        int          `json:"seal,omitempty"`
	SourceSeals []SourceSeal `json:"source_seals,omitempty"`
	Run         *RunSeal     `json:"run,omitempty"`
	// Warehouse is the warehouse the plan counted and will write, as the
	// config named it (any password removed): pointing the config at
	// another database makes the plan stale.
	Warehouse string `json:"warehouse,omitempty"`
	// Consumers are what OpenLineage saw read a dataset the plan rewrites
	// and that refill does not manage: not rebuilt, and named so that
	// whoever approves knows who will read the rewritten rows.
	Consumers []Consumer `json:"consumers,omitempty"`
	// LeftOut are the datasets with jobs that the request's selectors left
	// out but that read what the plan rewrites: they go on being built
	// from the old rows, so such a plan is never auto.
	LeftOut []LeftOut `json:"left_out,omitempty"`
	// Changed are the lineage-only datasets (views) whose rows change with
	// what the plan rewrites, with their tags, which count for the tier:
	// sealed, so that a view added or retagged since makes the plan stale.
	Changed []ChangedView `json:"changed_views,omitempty"`
	// Clock is set when the plan was made on an "as of" clock (REFILL_NOW)
	// later than the real one: both times, sealed. Such a plan is never
	// auto, since a clock moved forward would make rows from the future
	// look past and history look longer than it is.
	Clock *PlanClock `json:"clock,omitempty"`
}

// LeftOut is a dataset a plan does not rebuild that reads what it
// rewrites: Reads are the steps (or the lineage-only datasets they change)
// it reads directly.
type LeftOut struct {
	Dataset string   `json:"dataset"`
	Reads   []string `json:"reads"`
	Tags    []string `json:"tags,omitempty"`
}

// ChangedView is a lineage-only dataset whose rows change with a plan.
type ChangedView struct {
	Dataset string   `json:"dataset"`
	Tags    []string `json:"tags,omitempty"`
	// Partitions are the view's partitions the dry run compared, read
	// before and after the rehearsal rebuilt what the view reads, each
	// with its content diff: what readers of the view will see change.
	Partitions []ViewPartition `json:"partitions,omitempty"`
	// Diff, when set, only says why the view was not compared (Skipped):
	// it has no table or partition column, its grain is not its
	// upstream's, it reads a job the rehearsal cannot build, or the plan
	// is over plan.diff_budget.
	Diff *PartitionDiff `json:"diff,omitempty"`
}

// ViewPartition is one partition of a changed view and its content diff.
type ViewPartition struct {
	Partition string         `json:"partition"`
	Diff      *PartitionDiff `json:"diff"`
}

// Diffed reports whether the dry run compared the view, or said why not.
func (v ChangedView) Diffed() bool { return len(v.Partitions) > 0 || v.Diff != nil }

// Describe says, for people, what the left-out dataset reads.
func (l LeftOut) Describe() string {
	return fmt.Sprintf("%s reads %s, which this plan rewrites, and is not rebuilt", l.Dataset, strings.Join(l.Reads, ", "))
}

// PlanClock is the real clock and the "as of" clock a plan was made on,
// when the second was ahead of the first.
type PlanClock struct {
	Real time.Time `json:"real"`
	AsOf time.Time `json:"as_of"`
}

// Consumer is a dataset outside refill that reads a dataset a plan
// rewrites, as OpenLineage events reported it: the plan does not rebuild
// it ("not rebuilt: consumer outside refill").
type Consumer struct {
	// Dataset and Namespace are the consumer's OpenLineage name.
	Dataset   string `json:"dataset"`
	Namespace string `json:"namespace"`
	// Reads is the dataset of the plan it reads.
	Reads string `json:"reads"`
	// Job is the OpenLineage job seen reading Reads and writing Dataset.
	Job          string    `json:"job"`
	JobNamespace string    `json:"job_namespace"`
	Producer     string    `json:"producer,omitempty"`
	LastSeen     time.Time `json:"last_seen"`
}

// hashed is everything a plan decided from. Identity (ID), time and status
// are excluded so that the same inputs always give the same hash.
type hashed struct {
	Request Request     `json:"request"`
	Tier    Tier        `json:"tier"`
	Reasons []string    `json:"reasons"`
	Steps   []Step      `json:"steps"`
	Sources []string    `json:"sources"`
	Gate    GateVerdict `json:"gate"`
	Policy  Policy      `json:"policy"`
	// Sealed parts, omitted when empty so plans made before sealing keep
	// their hashes.
	Seal        int          `json:"seal,omitempty"`
	SourceSeals []SourceSeal `json:"source_seals,omitempty"`
	Run         *RunSeal     `json:"run,omitempty"`
	Warehouse   string       `json:"warehouse,omitempty"`
	Consumers   []Consumer   `json:"consumers,omitempty"`
	Clock       *PlanClock   `json:"clock,omitempty"`
	Attention   []string     `json:"attention,omitempty"`
	// Views are the changed views when the dry run diffed any: evidence
	// the approver reads, sealed like the steps' diffs. Plans without
	// view diffs hash as they did before there were any.
	Views []ChangedView `json:"views,omitempty"`
}

// ComputeHash returns the SHA-256 of the canonical encoding of everything
// the plan decided from. encoding/json writes struct fields in declaration
// order and map keys sorted, so the encoding is canonical for these types.
func (p *Plan) ComputeHash() string {
	b, err := json.Marshal(hashed{p.Request, p.Tier, p.Reasons, p.Steps, p.Sources, p.Gate, p.Policy, p.Seal, p.SourceSeals, p.Run, p.Warehouse, p.Consumers, p.Clock, p.Attention, p.viewDiffs()})
	if err != nil {
		panic("refill: plan is not encodable: " + err.Error()) // only plain data types
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// viewDiffs are the plan's changed views when any carries a diff.
func (p *Plan) viewDiffs() []ChangedView {
	if slices.ContainsFunc(p.Changed, ChangedView.Diffed) {
		return p.Changed
	}
	return nil
}

// Datasets lists the datasets the plan rebuilds, in step order.
func (p *Plan) Datasets() []string {
	out := make([]string, len(p.Steps))
	for i, s := range p.Steps {
		out[i] = s.Dataset
	}
	return out
}

// RowTotals adds up a step's current and expected rows over its
// partitions, counting the partitions whose rows are unknown apart.
func (s Step) RowTotals() (cur, exp int64, curUnknown, expUnknown int) {
	for _, pp := range s.Partitions {
		if pp.CurrentRows != nil {
			cur += *pp.CurrentRows
		} else {
			curUnknown++
		}
		if pp.ExpectedRows != nil {
			exp += *pp.ExpectedRows
		} else {
			expUnknown++
		}
	}
	return cur, exp, curUnknown, expUnknown
}

// failedProofPrefix begins the reason a failed idempotency proof gives.
const failedProofPrefix = "the idempotency proof of "

// FailedProofReason is the reason a plan gives when dataset's current
// idempotency proof failed (why: what the proof saw).
func FailedProofReason(dataset, why string) string {
	return failedProofPrefix + dataset + " failed: " + why
}

// IsFailedProof reports whether a plan's reason is a failed proof, which
// every door shows first and in red.
func IsFailedProof(reason string) bool {
	return strings.HasPrefix(reason, failedProofPrefix) && strings.Contains(reason, " failed: ")
}

// FailedProofs are the plan's failed proofs, from its reasons (when one
// decided the tier) or its attention: what every door shows first.
func (p *Plan) FailedProofs() []string {
	var out []string
	for _, list := range [][]string{p.Reasons, p.Attention} {
		for _, r := range list {
			if IsFailedProof(r) {
				out = append(out, r)
			}
		}
	}
	return out
}
