package refill

import (
	"encoding/json"
	"time"
)

// Roles a user may hold (docs/design.md §10). A lead may approve manual plans.
const (
	RoleEngineer = "engineer"
	RoleLead     = "lead"
)

// Decision is what a person decided about a plan.
type Decision string

// Decisions on a plan.
const (
	DecisionApprove Decision = "approve"
	DecisionReject  Decision = "reject"
)

// Approval is a person's decision on a plan, bound to the plan's hash: a
// plan whose content changed is a different plan and needs its own.
type Approval struct {
	PlanID   string    `json:"plan_id"`
	PlanHash string    `json:"plan_hash"`
	Actor    string    `json:"actor"`
	Decision Decision  `json:"decision"`
	Note     string    `json:"note,omitempty"`
	At       time.Time `json:"at"`
}

// ChecklistItem names a step of the manual checklist (not to be confused
// with a plan's Step, a dataset it rebuilds).
type ChecklistItem string

// Manual checklist steps, in the order they must happen; approval and the
// run sit between scope and signoff.
const (
	ChecklistSnapshot ChecklistItem = "snapshot"
	ChecklistScope    ChecklistItem = "scope"
	ChecklistSignoff  ChecklistItem = "signoff"
)

// ChecklistStep records one step of the manual checklist: who and when.
type ChecklistStep struct {
	PlanID string          `json:"plan_id"`
	Step   ChecklistItem   `json:"step"`
	Actor  string          `json:"actor"`
	Note   string          `json:"note,omitempty"`
	Detail json.RawMessage `json:"detail,omitempty"`
	At     time.Time       `json:"at"`
}

// SnapshotPart is one partition copied before a run, with the digest that a
// rollback must reproduce.
type SnapshotPart struct {
	PlanID    string `json:"plan_id"`
	Dataset   string `json:"dataset"`
	Table     string `json:"table"`
	Partition string `json:"partition"`
	// SnapshotTable is the warehouse table holding the copy.
	SnapshotTable string `json:"snapshot_table"`
	Digest        Digest `json:"digest"`
	// Source is true for partitions of sources the plan reads: kept as
	// evidence, never restored (refill does not rewrite sources).
	Source bool `json:"source,omitempty"`
}

// Live reports whether a plan in status s still holds its partitions: it
// may yet run (or resume), so another plan over the same partitions must
// wait.
func (s Status) Live() bool {
	switch s {
	case StatusPending, StatusReady, StatusApproved, StatusRunning, StatusFailed, StatusNeedsReview:
		return true
	}
	return false
}

// EventSchemaAccepted records a source schema accepted as the new drift
// baseline, by a person with a reason.
const EventSchemaAccepted EventKind = "schema_accepted"
