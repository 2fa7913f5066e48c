package refill

// Watcher is the reserved identity the watcher plans and applies as. No
// person may act as it (--as, REFILL_USER, a token), and users: need not
// (and may not) name it.
const Watcher = "watcher"

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
