package refill

import "time"

// Published is one partition a run rewrote and published, with the digests
// before and after: the report's raw material. Counts are nil for jobs whose
// output refill cannot see (a command job without a table).
type Published struct {
	PlanID    string    `json:"plan_id"`
	Dataset   string    `json:"dataset"`
	Partition string    `json:"partition"`
	Before    *Digest   `json:"before"`
	After     *Digest   `json:"after"`
	Attempt   int       `json:"attempt"`
	Output    string    `json:"output,omitempty"`
	At        time.Time `json:"published_at"`
	// Anchor is the audit log's entry the publish wrote into the
	// warehouse as its anchor (0: none); its audit entry names it, so that
	// an anchor deleted from the warehouse is missed.
	Anchor int64 `json:"-"`
}
