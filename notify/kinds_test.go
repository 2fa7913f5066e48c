package notify

import (
	"testing"

	"github.com/riverqueue/river"

	"github.com/refill-dev/refill/run"
)

// TestLeaderRescuesEveryKind: whichever River client leads rescues stuck
// jobs and discards those of kinds it has no worker for, so each of
// refill's clients stands in for the other's kind with the same attempt
// timeout. The two packages must agree on the kind and the timeout.
func TestLeaderRescuesEveryKind(t *testing.T) {
	if JobKind != run.NotifyKind || (Args{}).Kind() != run.NotifyKind {
		t.Fatalf("notify's job kind %q and the runner's stand-in %q differ: a runner leading River would discard notices", JobKind, run.NotifyKind)
	}
	if jobTimeout != run.NotifyTimeout {
		t.Fatalf("notice timeout %s, stand-in %s", jobTimeout, run.NotifyTimeout)
	}
	// The notifier's client registers the partition stand-in: a second
	// registration of the kind is refused, so it is there.
	workers := river.NewWorkers()
	if err := run.AddPartitionStandIn(workers, 0); err != nil {
		t.Fatal(err)
	}
	if err := river.AddWorkerSafely(workers, &run.StandIn[run.PartitionArgs]{}); err == nil {
		t.Fatal("the partition stand-in did not register its kind")
	}
}
