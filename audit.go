package refill

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"
)

// Audit event kinds: every change to a plan's life, and every
// partition-level action, leaves one (DESIGN.md §2, issue "audit log").
const (
	EventPlanCreated        = "plan_created"
	EventGateResult         = "gate_result"
	EventProof              = "proof"
	EventApproval           = "approval"
	EventRejection          = "rejection"
	EventSuperseded         = "superseded"
	EventScope              = "scope"
	EventSnapshot           = "snapshot"
	EventRunStarted         = "run_started"
	EventPartitionPublished = "partition_published"
	EventRunFinished        = "run_finished"
	EventRunFailed          = "run_failed"
	EventRollback           = "rollback"
	EventSignoff            = "signoff"
)

// GenesisHash is the previous hash of the first entry of the audit log.
const GenesisHash = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

// Event is one entry of the append-only audit log. Each entry carries the
// hash of the one before it, so altering, removing or reordering any entry
// breaks the chain from there on.
type Event struct {
	Seq       int64     `json:"seq"`
	At        time.Time `json:"at"`
	Actor     string    `json:"actor"`
	Kind      string    `json:"event"`
	PlanID    string    `json:"plan_id,omitempty"`
	Dataset   string    `json:"dataset,omitempty"`
	Partition string    `json:"partition,omitempty"`
	// Detail is a JSON object with the event's particulars (a note, counts,
	// a verdict), kept as the exact text that was hashed.
	Detail   json.RawMessage `json:"detail,omitempty"`
	PrevHash string          `json:"prev_hash"`
	Hash     string          `json:"hash"`
}

// ComputeHash returns the hash of the entry's content and its predecessor's
// hash. Times are hashed as UTC RFC 3339 with nanoseconds, the form they are
// stored in.
func (e *Event) ComputeHash() string {
	b, _ := json.Marshal(struct {
		Seq       int64  `json:"seq"`
		At        string `json:"at"`
		Actor     string `json:"actor"`
		Kind      string `json:"event"`
		PlanID    string `json:"plan_id"`
		Dataset   string `json:"dataset"`
		Partition string `json:"partition"`
		Detail    string `json:"detail"`
		PrevHash  string `json:"prev_hash"`
	}{e.Seq, e.At.UTC().Format(time.RFC3339Nano), e.Actor, e.Kind, e.PlanID, e.Dataset, e.Partition, string(e.Detail), e.PrevHash})
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Detail encodes v as an event's detail; v must be plain data.
func Detail(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("refill: audit detail is not encodable: " + err.Error())
	}
	return b
}
