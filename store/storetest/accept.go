package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
)

// exerciseAccept covers accepted findings: one acceptance in force per
// finding and measurement; revoking withdraws every one in force and lets
// the finding be accepted afresh; the list keeps them all, oldest first.
func exerciseAccept(t *testing.T, setup func(t *testing.T) (*store.Store, string)) {
	t.Run("AcceptancesOnePerMeasurement", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		when := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
		a := refill.Acceptance{Dataset: "ev", Partition: "2026-11-25", Check: "volume", By: "alice", Reason: "half day", At: when, Measured: "rows=239"}
		accept := func(a refill.Acceptance) error {
			return s.Update(ctx, func(tx *store.Tx) error { return RecordAccept(ctx, tx, a) })
		}
		if err := accept(a); err != nil {
			t.Fatal(err)
		}
		b := a
		b.By = "bob"
		if err := accept(b); !errors.Is(err, refill.ErrBadInput) {
			t.Fatalf("the same finding and measurement accepted twice: %v", err)
		}
		c := a
		c.Measured, c.At = "rows=240", when.Add(time.Hour)
		if err := accept(c); err != nil {
			t.Fatalf("a new measurement: %v", err)
		}
		var n int64
		if err := s.Update(ctx, func(tx *store.Tx) error {
			var err error
			n, err = RecordRevoke(ctx, tx, a, refill.Accepted{By: "carol", Reason: "not a holiday", At: when.Add(2 * time.Hour)})
			return err
		}); err != nil || n != 2 {
			t.Fatalf("revoke: %d withdrawn, %v; want 2", n, err)
		}
		if err := accept(b); err != nil {
			t.Fatalf("accepted afresh after the withdrawal: %v", err)
		}
		got, err := s.Acceptances(ctx, "ev", "2026-11-25")
		if err != nil || len(got) != 3 {
			t.Fatalf("acceptances: %v %v", got, err)
		}
		if got[0].Revoked == nil || got[0].Revoked.By != "carol" || !got[0].Revoked.At.Equal(when.Add(2*time.Hour)) || got[1].Revoked == nil || got[2].Revoked != nil || got[2].By != "bob" {
			t.Fatalf("acceptances after revoke and re-accept: %+v", got)
		}
		if other, err := s.Acceptances(ctx, "ev", "2026-11-26"); err != nil || len(other) != 0 {
			t.Fatalf("another partition: %v %v", other, err)
		}
	})
}
