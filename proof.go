package refill

import "time"

// ProofBuild is one of a proof's three builds of a partition.
type ProofBuild struct {
	// Build is "over existing rows", "again" or "from empty".
	Build  string `json:"build"`
	Digest Digest `json:"digest"`
}

// Proof is evidence that a dataset's job is (or is not) safe to rerun: the
// partition built over its existing rows, built again, and built from empty
// must agree in row count and checksum. It is tied to the job's fingerprint,
// so editing the job makes it stale.
type Proof struct {
	Dataset     string       `json:"dataset"`
	Partition   string       `json:"partition"`
	Kind        JobKind      `json:"kind"`
	Fingerprint string       `json:"fingerprint"`
	Builds      []ProofBuild `json:"builds"`
	Passed      bool         `json:"passed"`
	// Failure names what went wrong: "rerun_adds_rows", "depends_on_prior",
	// "rerun_changes_content"; empty when passed.
	Failure string `json:"failure,omitempty"`
	Message string `json:"message"`
	// Warehouse says where the builds ran: "warehouse" (one rolled-back
	// transaction) or "proof_warehouse".
	Warehouse string    `json:"warehouse"`
	ProvenAt  time.Time `json:"proven_at"`
	ProvenBy  string    `json:"proven_by"`
	// Method is ProofMethod for proofs that also build over a deliberately
	// stale partition; proofs recorded before that (0) no longer count as
	// current evidence.
	Method int `json:"method,omitempty"`
	// Spoiled says what the stale build's partition was made to hold.
	Spoiled string `json:"spoiled,omitempty"`
}

// ProofMethod is the current way of proving: four builds, one of them over
// a deliberately stale partition.
const ProofMethod = 2

// Flag marks a partition the gate found bad, so later volume checks leave it
// out of their history.
type Flag struct {
	Dataset   string `json:"dataset"`
	Partition string `json:"partition"`
	Check     string `json:"check"`
	PlanID    string `json:"plan_id,omitempty"`
}
