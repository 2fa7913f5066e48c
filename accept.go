package refill

import "time"

// EventFindingAccepted records that a gate finding is real data (a
// holiday, a launch, an outage that happened): who said so, why, and what
// was measured when they did.
const EventFindingAccepted EventKind = "finding_accepted"

// EventAcceptanceRevoked records an acceptance withdrawn by its author or
// a lead: the finding fails again.
const EventAcceptanceRevoked EventKind = "acceptance_revoked"

// Acceptance is a person's word that one check's finding on one partition
// is real: the check passes there, and the partition leaves later volume
// and drift history, for as long as the partition still measures what it
// measured when it was accepted. Once the data changes (its row count, or
// the figures the check saw), the acceptance lapses and the check fails
// again.
type Acceptance struct {
	Dataset   string    `json:"dataset"`
	Partition string    `json:"partition"`
	Check     string    `json:"check"`
	Column    string    `json:"column,omitempty"`
	By        string    `json:"by"`
	Reason    string    `json:"reason"`
	At        time.Time `json:"at"`
	// Measured is what the check saw when the finding was accepted, as
	// the gate renders it ("rows=1234", "rows=1234 nulls=310").
	Measured string `json:"measured"`
	// Revoked is set once the acceptance was withdrawn (refill accept
	// --revoke): it no longer counts.
	Revoked *Accepted `json:"revoked,omitempty"`
}

// Accepted is how a finding shows its acceptance: passing, with who, why
// and when.
type Accepted struct {
	By     string    `json:"by"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}
