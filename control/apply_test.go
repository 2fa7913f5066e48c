package control

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
)

// TestMayApply: the refusal every door gives for a plan that may not run
// now is classified once — blocked, locked only by other plans' holds, or
// not permitted — with the unmet list in its words.
func TestMayApply(t *testing.T) {
	holder := store.Holder{PlanID: "p0", Status: refill.StatusPending, Dataset: "agg", Partitions: 2}
	for _, c := range []struct {
		name   string
		status refill.Status
		tier   refill.Tier
		hold   bool
		run    *RunHolder // a running plan's
		want   error      // nil: may run
		words  string
	}{
		{"ready auto", refill.StatusReady, refill.TierAuto, false, nil, nil, ""},
		{"blocked", refill.StatusBlocked, refill.TierAuto, false, nil, refill.ErrBlocked, "it can never run"},
		{"only held by an older plan", refill.StatusReady, refill.TierAuto, true, nil, refill.ErrLocked, "plan p0 (pending) holds 2 partition(s) of agg"},
		{"unapproved", refill.StatusPending, refill.TierSemiAuto, false, nil, refill.ErrNotPermitted, "needs one approval"},
		{"unapproved and held", refill.StatusPending, refill.TierSemiAuto, true, nil, refill.ErrNotPermitted, "needs one approval"},
		{"applied", refill.StatusApplied, refill.TierAuto, false, nil, refill.ErrNotPermitted, "already been applied"},
		{"running in another process", refill.StatusRunning, refill.TierAuto, false, &RunHolder{Holder: "other:7", Expires: time.Now().Add(time.Minute)},
			refill.ErrLocked, "is running now in another process: other:7 holds its run"},
		{"running, its holder dead", refill.StatusRunning, refill.TierAuto, false, &RunHolder{Holder: "other:7", Expires: time.Now().Add(-time.Minute), Orphaned: true}, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, cfg := sealedFixture()
			p.Tier, p.Status = c.tier, c.status
			p.Request.RequestedBy = "alice"
			s := &State{Plan: p, Run: c.run}
			if c.hold {
				s.Holders = []store.Holder{holder}
			}
			s.unmet = (&Control{Config: cfg()}).unmet(s)
			err := s.MayApply()
			if c.want == nil {
				if err != nil {
					t.Fatalf("MayApply = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.words) || !strings.Contains(err.Error(), "plan p1") {
				t.Fatalf("MayApply = %v, want %v naming plan p1 and %q", err, c.want, c.words)
			}
			// A lock is a refusal that clears by itself (409 at the server);
			// anything else unmet is not.
			for _, class := range []error{refill.ErrBlocked, refill.ErrLocked} {
				if errors.Is(err, class) != (c.want == class) {
					t.Errorf("MayApply = %v: is %v = %v, want %v", err, class, errors.Is(err, class), c.want == class)
				}
			}
		})
	}
}
