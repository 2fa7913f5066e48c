// Package failpoint lets tests stop refill between two writes that must
// both happen — the warehouse's and the state store's — the way a crash or
// a lost connection would, to show the next attempt finishes or cleans up.
//
// REFILL_FAILPOINT names the points to fail, separated by commas. It is
// read at each point, so a test sets it for one command only.
package failpoint

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// Check returns an error if the point name is armed.
func Check(name string) error {
	// REFILL_FAILPOINT is for tests only: it is no setting of refill's, is
	// not documented for users, and arming it in production makes the
	// commands that pass a point fail half-way on purpose.
	v := os.Getenv("REFILL_FAILPOINT")
	if v == "" {
		return nil
	}
	if slices.Contains(strings.Split(v, ","), name) {
		return fmt.Errorf("failpoint %s: stopped here on purpose (REFILL_FAILPOINT)", name)
	}
	return nil
}
