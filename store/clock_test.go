package store_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
)

// TestStoreTakesItsClockFromItsOptions: what the store stamps (an audit
// entry's time, a lease's comparison) follows the clock it was opened
// with, and the real clock when it was given none.
func TestStoreTakesItsClockFromItsOptions(t *testing.T) {
	ctx := context.Background()
	fixed := time.Date(2020, 3, 4, 5, 6, 7, 0, time.UTC) // long past by the real clock
	st, err := store.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "state.db"), "", store.WithClock(func() time.Time { return fixed }))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e := &refill.Event{Kind: refill.EventFreeze, Actor: "carol", Detail: refill.Detail(map[string]any{"reason": "clock"})}
	if err := st.Update(ctx, func(tx *store.Tx) error { return tx.Append(ctx, e) }); err != nil {
		t.Fatal(err)
	}
	if !e.At.Equal(fixed) {
		t.Errorf("the entry is stamped %s, want the store's clock %s", e.At, fixed)
	}
	// A lease that lapsed long ago by the real clock is alive by the
	// store's.
	lapsed := time.Now().Add(-time.Hour)
	if err := st.Update(ctx, func(tx *store.Tx) error {
		return tx.TakeLease(ctx, "p1", "host:1", fixed.Add(time.Minute), func(store.Lease) bool { return true })
	}); err != nil {
		t.Fatal(err)
	}
	err = st.Update(ctx, func(tx *store.Tx) error {
		return tx.TakeLease(ctx, "p1", "host:2", lapsed, func(store.Lease) bool { return true })
	})
	if err == nil {
		t.Error("a second holder took a lease alive by the store's clock")
	}

	real, err := store.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "state.db"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer real.Close()
	e = &refill.Event{Kind: refill.EventFreeze, Actor: "carol", At: fixed}
	before := time.Now()
	if err := real.Update(ctx, func(tx *store.Tx) error { return tx.Append(ctx, e) }); err != nil {
		t.Fatal(err)
	}
	if e.At.Before(before.Add(-time.Second)) || e.At.After(time.Now().Add(time.Second)) || !e.AsOf.Equal(fixed) {
		t.Errorf("without a clock: At %s (want the real clock), AsOf %s (want the caller's %s)", e.At, e.AsOf, fixed)
	}
}
