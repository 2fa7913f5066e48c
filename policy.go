package refill

import "time"

// Policy is the tier policy (docs/design.md §4).
type Policy struct {
	AutoMaxDays    int      `json:"auto_max_days"`
	ManualOverDays int      `json:"manual_over_days"`
	ManualTags     []string `json:"manual_tags"`
	AggregateTags  []string `json:"aggregate_tags"`
	Rules          []Rule   `json:"rules,omitempty"`
}

// DefaultRunConfig is docs/design.md §6's run defaults: three partitions of a
// dataset at a time, eight in a process, three attempts backing off from a
// second, a dead worker's job rescued after ten minutes, and a 10%
// tolerance in reports. The config loader and the runner both start here.
// DefaultJobPath is the PATH command jobs run with unless run.path says
// otherwise: the system's directories, none of them a user's.
const DefaultJobPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func DefaultRunConfig() RunConfig {
	return RunConfig{MaxActive: 3, MaxActiveTotal: 8, Attempts: 3,
		Backoff: Duration(time.Second), RescueAfter: Duration(10 * time.Minute), Tolerance: 0.1, Path: DefaultJobPath, OutagePatience: Duration(2 * time.Minute)}
}

// Housekeeping keeps a team's state from silting up. Its keys sit under
// policy: in refill.yaml, but it is not tiering, so no plan seals it.
type Housekeeping struct {
	// PlanTTL is how long a plan may wait, pending or approved but never
	// applied, before it expires and releases its partitions.
	PlanTTL Duration `json:"plan_ttl"`
	// SnapshotTTL is how long a snapshot outlives its plan's end (signed
	// off, rejected, expired, rolled back) before its tables are dropped.
	SnapshotTTL Duration `json:"snapshot_ttl"`
}

// DefaultHousekeeping is a week for plans and two for snapshots.
func DefaultHousekeeping() Housekeeping {
	return Housekeeping{PlanTTL: Duration(7 * 24 * time.Hour), SnapshotTTL: Duration(14 * 24 * time.Hour)}
}

// DefaultPolicy is docs/design.md §4's defaults.
func DefaultPolicy() Policy {
	return Policy{
		AutoMaxDays:    7,
		ManualOverDays: 30,
		ManualTags:     []string{"billing", "external"},
		AggregateTags:  []string{"aggregate"},
	}
}

// Rule is an extra policy rule: a CEL expression that, when true, raises the
// plan to at least Tier. Rules never lower a tier.
type Rule struct {
	Name   string `json:"name"`
	When   string `json:"when"`
	Tier   Tier   `json:"tier"`
	Reason string `json:"reason"`
}
