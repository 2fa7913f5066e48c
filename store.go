package refill

import (
	"context"
	"fmt"
)

// PlanFilter selects stored plans.
type PlanFilter struct {
	Status Status
	Limit  int
}

// PlanSummary is one line of `refill plans`.
type PlanSummary struct {
	ID          string   `json:"id"`
	Hash        string   `json:"hash"`
	Status      Status   `json:"status"`
	Tier        Tier     `json:"tier"`
	Targets     []string `json:"targets"`
	From        string   `json:"from"`
	To          string   `json:"to"`
	RequestedBy string   `json:"requested_by"`
	Reason      string   `json:"reason"`
	CreatedAt   string   `json:"created_at"`
	Datasets    int      `json:"datasets"`
	Partitions  int      `json:"partitions"`
}

// SchemaSnapshot is a source's columns as recorded with a plan, so that the
// next plan can tell whether the schema drifted.
type SchemaSnapshot struct {
	Dataset string   `json:"dataset"`
	PlanID  string   `json:"plan_id"`
	Columns []Column `json:"columns"`
	// AcceptedBy is who made this schema the drift baseline (a person with
	// `refill schema accept`, or the actor of an applied plan); empty for a
	// schema a plan merely saw.
	AcceptedBy string `json:"accepted_by,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// Origin says where a baseline schema came from, for findings.
func (s SchemaSnapshot) Origin() string {
	switch {
	case s.AcceptedBy != "" && s.PlanID != "":
		return fmt.Sprintf("the schema accepted by %s when plan %s was applied", s.AcceptedBy, s.PlanID)
	case s.AcceptedBy != "":
		return fmt.Sprintf("the schema accepted by %s (%s)", s.AcceptedBy, s.Reason)
	case s.PlanID == "(this plan)":
		return "the schema this plan saw when it was made"
	}
	return fmt.Sprintf("the schema first recorded (plan %s)", s.PlanID)
}

// PlanRecord is a new plan and what its gate saw.
type PlanRecord struct {
	Plan    *Plan
	Schemas []SchemaSnapshot
	Flags   []Flag
}

// Store keeps refill's own state: plans and everything that happens to them.
// Plans are immutable once saved; only their status moves.
type Store interface {
	// SavePlan stores a new plan. Saving an ID twice is an error.
	SavePlan(ctx context.Context, p *Plan) error
	// Plan loads one plan, or an error wrapping ErrNotFound. The stored hash
	// is checked against the stored content.
	Plan(ctx context.Context, id string) (*Plan, error)
	// Plans lists plans newest first.
	Plans(ctx context.Context, f PlanFilter) ([]PlanSummary, error)
	// SetStatus moves a plan from one status to another; it fails with
	// ErrNotPermitted if the plan is not in status from.
	SetStatus(ctx context.Context, id string, from, to Status) error
	// RecordPlan stores a new plan with what its gate saw, supersedes
	// earlier live plans of the same request, and appends the audit entries
	// for all of it, in one transaction. It returns the superseded plans.
	RecordPlan(ctx context.Context, rec PlanRecord) (superseded []string, err error)
	// SaveSchemas records sources' columns as seen by a plan.
	SaveSchemas(ctx context.Context, snaps []SchemaSnapshot) error
	// SchemaBaseline returns the schema drift is judged against: the one
	// accepted last, or else the first recorded; ok=false if none was.
	SchemaBaseline(ctx context.Context, dataset string) (snap SchemaSnapshot, ok bool, err error)
	// SaveProof records a proof's evidence.
	SaveProof(ctx context.Context, p *Proof) error
	// Proofs returns a dataset's recorded proofs, newest first.
	Proofs(ctx context.Context, dataset string) ([]Proof, error)
	// SaveFlags records partitions the gate found bad.
	SaveFlags(ctx context.Context, flags []Flag) error
	// Flagged returns the partitions of dataset ever flagged by the gate.
	Flagged(ctx context.Context, dataset string) (map[string]bool, error)
	// Close releases the store.
	Close() error
}
