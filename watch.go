package refill

// Watcher is the reserved identity the watcher plans and applies as. No
// person may act as it (--as, REFILL_USER, a token), and users: need not
// (and may not) name it.
const Watcher = "watcher"

// Adopter is the actor of a run resumed by a refill serve or worker that
// found it held by nobody (its holder paused it for a restart, or died).
const Adopter = "refill"

// Reserved reports whether name is one of refill's own identities
// (Watcher, Adopter), which no person may act as or be named.
func Reserved(name string) bool { return name == Watcher || name == Adopter }

// EventWatch records one decision of the watcher about a gap: what it
// found, and whether it planned, applied, resumed, waited or asked people.
const EventWatch EventKind = "watch_decision"

// WatchConfig is the watcher's: how often refill serve ticks.
type WatchConfig struct {
	Interval Duration `json:"interval"`
}

// EventLineage records OpenLineage edges someone reported (POST
// /api/v1/lineage): new edges can raise a plan's tier.
const EventLineage EventKind = "lineage_recorded"
