// Package refill holds the domain of a backfill control plane: datasets and
// their lineage, requests, plans, tiers and gate findings, the contracts the
// warehouse drivers and job kinds implement (Warehouse, WarehouseTx,
// JobRunner), and the records the state store (package store, one concrete
// store behind a dialect per engine) keeps.
//
// It imports nothing else of refill's, so that the flow of docs/design.md §3 —
// request, plan, approval, run, report, audit — reads the same in every
// package that builds on it.
package refill

import (
	"errors"
	"fmt"
	"time"
)

// Clock is a source of "now". A nil Clock is the real clock; REFILL_NOW
// gives a fixed one, the "as of" time plans and checks run on.
type Clock func() time.Time

// Now is the clock's time in UTC.
func (c Clock) Now() time.Time {
	if c == nil {
		return time.Now().UTC()
	}
	return c().UTC()
}

// Passed is the time a check that something has already happened compares
// with — no row is from the future, a partition has begun: the earlier of
// the clock and the real clock. The "as of" clock (REFILL_NOW) may be set
// by anyone, so it may move a decision against refill, never in its
// favour: set in the past it makes such checks stricter, and set ahead it
// changes nothing.
func (c Clock) Passed() time.Time {
	now, real := c.Now(), time.Now().UTC()
	if real.Before(now) {
		return real
	}
	return now
}

// Latest is the later of the clock and the real clock: the time a check
// that refuses a request for what cannot exist yet compares with (a range
// that starts after the last partition that could exist), so that neither
// clock makes it refuse what the other would take. A plan made on a clock
// set ahead records both and is never auto (Ahead).
func (c Clock) Latest() time.Time {
	now, real := c.Now(), time.Now().UTC()
	if real.After(now) {
		return real
	}
	return now
}

// Ahead reports whether the clock is set later than the real clock (by
// more than a second of drift): a plan made on such a clock records both
// (PlanClock) and is never auto.
func (c Clock) Ahead() (asOf, real time.Time, ahead bool) {
	asOf, real = c.Now(), time.Now().UTC()
	return asOf, real, asOf.Sub(real) > time.Second
}

// Sentinel errors classify failures so the command line can map them to the
// exit codes of docs/design.md §7 in one place. Wrap them with context; callers
// branch with errors.Is.
var (
	// ErrBadInput is wrong configuration, arguments, dates or names (exit 2).
	ErrBadInput = errors.New("bad input")
	// ErrBlocked is a plan stopped by the source gate (exit 3).
	ErrBlocked = errors.New("blocked by the source gate")
	// ErrNotPermitted is a missing approval, self-approval, wrong role or a
	// stale or rejected plan (exit 4).
	ErrNotPermitted = errors.New("not permitted")
	// ErrVerification is a failed proof, audit chain or report check (exit 5).
	ErrVerification = errors.New("verification failed")
	// ErrNotFound is an unknown plan, dataset or stored object. It is bad
	// input from the user's point of view.
	ErrNotFound = errors.New("not found")
	// ErrLocked is a plan refused because another live plan holds some of
	// its partitions. It is not permitted (exit 4); the server answers it
	// with 409 Conflict, since it clears when the other plan is done.
	ErrLocked = errors.New("partitions locked by another plan")
)

// Exit codes of docs/design.md §7.
const (
	ExitOK           = 0
	ExitInternal     = 1
	ExitBadInput     = 2
	ExitBlocked      = 3
	ExitNotPermitted = 4
	ExitVerification = 5
)

// ExitCode maps an error to the process exit code of docs/design.md §7. Anything
// not classified is an internal or infrastructure error.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, ErrBadInput), errors.Is(err, ErrNotFound):
		return ExitBadInput
	case errors.Is(err, ErrBlocked):
		return ExitBlocked
	case errors.Is(err, ErrNotPermitted):
		return ExitNotPermitted
	case errors.Is(err, ErrVerification):
		return ExitVerification
	default:
		return ExitInternal
	}
}

// BadInputf returns an error wrapping ErrBadInput with a formatted message.
// The message is what the user sees, so it must say what and where.
func BadInputf(format string, args ...any) error {
	return &classified{msg: fmt.Sprintf(format, args...), kind: ErrBadInput}
}

// NotFoundf returns an error wrapping ErrNotFound.
func NotFoundf(format string, args ...any) error {
	return &classified{msg: fmt.Sprintf(format, args...), kind: ErrNotFound}
}

// NotPermittedf returns an error wrapping ErrNotPermitted.
func NotPermittedf(format string, args ...any) error {
	return &classified{msg: fmt.Sprintf(format, args...), kind: ErrNotPermitted}
}

// Lockedf returns an error wrapping both ErrNotPermitted and ErrLocked.
func Lockedf(format string, args ...any) error {
	return &classified{msg: fmt.Sprintf(format, args...), kind: errors.Join(ErrNotPermitted, ErrLocked)}
}

// classified is an error whose text is the user's message alone, while
// errors.Is still finds its class.
type classified struct {
	msg  string
	kind error
}

func (e *classified) Error() string { return e.msg }
func (e *classified) Unwrap() error { return e.kind }
