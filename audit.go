package refill

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"
)

// Audit event kinds: every change to a plan's life, and every
// partition-level action, leaves one (docs/design.md §2, issue "audit log").
// EventKind names what an audit entry records.
type EventKind string

// The kinds of audit entry.
const (
	EventPlanCreated        EventKind = "plan_created"
	EventGateResult         EventKind = "gate_result"
	EventProof              EventKind = "proof"
	EventApproval           EventKind = "approval"
	EventRejection          EventKind = "rejection"
	EventSuperseded         EventKind = "superseded"
	EventScope              EventKind = "scope"
	EventSnapshot           EventKind = "snapshot"
	EventRunStarted         EventKind = "run_started"
	EventPartitionPublished EventKind = "partition_published"
	EventRunFinished        EventKind = "run_finished"
	EventRunFailed          EventKind = "run_failed"
	EventRollback           EventKind = "rollback"
	EventSignoff            EventKind = "signoff"
	EventExpired            EventKind = "expired"
	EventSnapshotDropped    EventKind = "snapshot_dropped"
	// EventRunWaiting records a partition that has waited a minute for the
	// warehouse (or the state store) to come back: one notice per wait.
	EventRunWaiting EventKind = "run_waiting"
	// EventNeedsReview records a side_effects partition whose attempt's
	// outcome is unknown: it waits for refill resolve. EventResolved is a
	// person's word on it: it ran (it is recorded published) or it did not
	// (it may run again).
	EventNeedsReview EventKind = "partition_needs_review"
	EventResolved    EventKind = "partition_resolved"
	// EventRunPaused records a run its process let go of as it shut down
	// (a restart's drain): the plan stays running with nobody holding it,
	// and the next refill serve or worker, or the watcher, resumes it.
	EventRunPaused EventKind = "run_paused"
)

// GenesisHash is the previous hash of the first entry of the audit log.
const GenesisHash = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

// Prefixes of an entry's hash. A plain hash shows the chain is whole but can
// be recomputed by anyone who can write the state store; a keyed one needs
// the audit key, which lives outside it (audit.key_env).
const (
	HashPlain = "sha256:"
	HashKeyed = "hmac-sha256:"
)

// Event is one entry of the append-only audit log. Each entry carries the
// hash of the one before it, so altering, removing or reordering any entry
// breaks the chain from there on.
type Event struct {
	Seq int64 `json:"seq"`
	// At is when the entry was written, by the real clock: the store sets
	// it, whatever the caller passed.
	At time.Time `json:"at"`
	// AsOf is the caller's clock when it was not the real one (REFILL_NOW
	// moves the planning clock for demos and tests), so an entry shows
	// both what happened when and what time refill was told it was.
	AsOf      time.Time `json:"as_of,omitzero"`
	Actor     string    `json:"actor"`
	Kind      EventKind `json:"event"`
	PlanID    string    `json:"plan_id,omitempty"`
	Dataset   string    `json:"dataset,omitempty"`
	Partition string    `json:"partition,omitempty"`
	// Detail is a JSON object with the event's particulars (a note, counts,
	// a verdict), kept as the exact text that was hashed.
	Detail   json.RawMessage `json:"detail,omitempty"`
	PrevHash string          `json:"prev_hash"`
	Hash     string          `json:"hash"`
}

// ComputeHash returns the plain hash of the entry's content and its
// predecessor's hash. Times are hashed as UTC RFC 3339 with nanoseconds, the
// form they are stored in.
func (e *Event) ComputeHash() string {
	sum := sha256.Sum256(e.canonical())
	return HashPlain + hex.EncodeToString(sum[:])
}

// ComputeKeyedHash returns the HMAC-SHA256 under key of the same encoding
// ComputeHash hashes. Someone who can write the state store but does not
// hold the key can alter an entry, but cannot give it a hash that verifies.
func (e *Event) ComputeKeyedHash(key []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(e.canonical())
	return HashKeyed + hex.EncodeToString(m.Sum(nil))
}

// Keyed reports whether the entry's stored hash is a keyed one.
func (e *Event) Keyed() bool { return strings.HasPrefix(e.Hash, HashKeyed) }

// canonical is the encoding an entry's hash covers. AsOf is left out when it
// is not set, so entries written before it existed hash as they always did.
func (e *Event) canonical() []byte {
	asOf := ""
	if !e.AsOf.IsZero() {
		asOf = e.AsOf.UTC().Format(time.RFC3339Nano)
	}
	b, _ := json.Marshal(struct {
		Seq       int64  `json:"seq"`
		At        string `json:"at"`
		AsOf      string `json:"as_of,omitempty"`
		Actor     string `json:"actor"`
		Kind      string `json:"event"`
		PlanID    string `json:"plan_id"`
		Dataset   string `json:"dataset"`
		Partition string `json:"partition"`
		Detail    string `json:"detail"`
		PrevHash  string `json:"prev_hash"`
	}{e.Seq, e.At.UTC().Format(time.RFC3339Nano), asOf, e.Actor, string(e.Kind), e.PlanID, e.Dataset, e.Partition, string(e.Detail), e.PrevHash})
	return b
}

// Detail encodes v as an event's detail; v must be plain data.
func Detail(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("refill: audit detail is not encodable: " + err.Error())
	}
	return b
}
