package refill

import "testing"

// TestStatusTransitions pins the plan's state machine: every status is
// reached, final statuses never move, and a few moves that must never
// happen (an applied plan running again, a rejected one approved, a
// running one rejected) are refused.
func TestStatusTransitions(t *testing.T) {
	reached := map[Status]bool{StatusPending: true, StatusReady: true, StatusBlocked: true} // a plan is made in these
	for from, tos := range transitions {
		if !from.Known() {
			t.Errorf("transitions from unknown status %q", from)
		}
		for _, to := range tos {
			if !to.Known() || to == from {
				t.Errorf("%s -> %s", from, to)
			}
			reached[to] = true
		}
	}
	for _, s := range Statuses {
		if !reached[s] {
			t.Errorf("no plan can become %s", s)
		}
	}
	for _, s := range []Status{StatusBlocked, StatusRejected, StatusSuperseded, StatusExpired, StatusRolledBack} {
		if !s.Final() {
			t.Errorf("%s is not final", s)
		}
	}
	for _, bad := range [][2]Status{{StatusApplied, StatusRunning}, {StatusRejected, StatusApproved}, {StatusRunning, StatusRejected},
		{StatusPending, StatusRunning}, {StatusPending, StatusApplied}, {StatusNeedsReview, StatusApplied}, {StatusCancelled, StatusRunning}} {
		if bad[0].CanBecome(bad[1]) {
			t.Errorf("%s may become %s", bad[0], bad[1])
		}
	}
	for _, good := range [][2]Status{{StatusRunning, StatusNeedsReview}, {StatusNeedsReview, StatusRunning}, {StatusFailed, StatusRunning}, {StatusApplied, StatusRolledBack}} {
		if !good[0].CanBecome(good[1]) {
			t.Errorf("%s may not become %s", good[0], good[1])
		}
	}
}
