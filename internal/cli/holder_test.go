package cli

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
)

// TestShowSaysLapsedOnlyOfThePast: refill show says a run's lease "lapsed
// at" a time past and "expires at" a time to come, whichever way the run
// lost its holder — a holder killed a moment ago leaves a lease that still
// runs.
func TestShowSaysLapsedOnlyOfThePast(t *testing.T) {
	now := time.Now().UTC()
	past, future := now.Add(-5*time.Minute), now.Add(5*time.Minute)
	stamp := regexp.MustCompile(`(lapsed|expires|expires only) at (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC)`)
	for _, c := range []struct {
		name string
		run  control.RunHolder
		want string
	}{
		{"held", control.RunHolder{Holder: "h1:7", Expires: future}, "Running: held by h1:7; its lease expires at"},
		{"holder killed, lease still running", control.RunHolder{Holder: "h1:7", Expires: future, Orphaned: true, Gone: true},
			"its run's holder (h1:7) is no longer running on this host, though its lease expires only at"},
		{"lease lapsed", control.RunHolder{Holder: "h1:7", Expires: past, Orphaned: true, Lapsed: true},
			"its run's holder (h1:7) stopped renewing its lease, which lapsed at"},
		{"killed, and lapsed since", control.RunHolder{Holder: "h1:7", Expires: past, Orphaned: true, Lapsed: true, Gone: true}, "which lapsed at"},
		{"no lease", control.RunHolder{Orphaned: true}, "no process holds its run"},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := c.run
			s := &control.State{Plan: &refill.Plan{ID: "p1", Status: refill.StatusRunning}, Run: &run}
			out := renderState(s)
			if !strings.Contains(out, c.want) {
				t.Errorf("show says:\n%s\nwant %q", out, c.want)
			}
			for _, m := range stamp.FindAllStringSubmatch(out, -1) {
				at, err := time.Parse("2006-01-02 15:04:05 MST", m[2])
				if err != nil {
					t.Fatal(err)
				}
				if m[1] == "lapsed" && at.After(now) {
					t.Errorf("%q: a lease said to have lapsed at a time still to come", m[0])
				}
				if m[1] != "lapsed" && at.Before(now) {
					t.Errorf("%q: a lease said to expire at a time past", m[0])
				}
			}
		})
	}
}
