package refill

import "fmt"

// PlanFilter selects stored plans, newest first.
type PlanFilter struct {
	Status Status
	// Limit is the most plans to list (0: all).
	Limit int
	// Before, a plan's ID, lists the plans older than that one: the next
	// page after a page that ended with it.
	Before string
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
	// Reason is clipped to MaxText characters (ClipText): a list shows
	// many, and a reason stored before texts were bounded may be any
	// length. The plan itself holds it whole.
	Reason     string `json:"reason"`
	CreatedAt  string `json:"created_at"`
	Datasets   int    `json:"datasets"`
	Partitions int    `json:"partitions"`
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

// AcceptedByUpgrade accepted the baselines that the upgrade to accepted
// baselines carried over: the latest schema of each dataset seen before
// it, which drift was judged against until then.
const AcceptedByUpgrade = "(upgrade)"

// Origin says where a baseline schema came from, for findings.
func (s SchemaSnapshot) Origin() string {
	switch {
	case s.AcceptedBy == AcceptedByUpgrade:
		return fmt.Sprintf("the latest schema seen before the upgrade to accepted baselines (plan %s)", s.PlanID)
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
