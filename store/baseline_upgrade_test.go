package store

import (
	"database/sql"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/refill-dev/refill"
)

// TestBaselineUpgrade opens a state store whose snapshots were recorded
// before drift baselines had to be accepted (0007): drift was judged against
// the latest schema then, and must still be after the upgrade, not against
// the first schema ever recorded. Snapshots recorded since 0007 never move
// the baseline, and a store created at 0007 or later is left as it is.
func TestBaselineUpgrade(t *testing.T) {
	t.Parallel()
	first := []refill.Column{{Name: "id", Type: "integer"}}
	evolved := []refill.Column{{Name: "id", Type: "integer"}, {Name: "region", Type: "text"}}
	seenSince := []refill.Column{{Name: "id", Type: "bigint"}, {Name: "region", Type: "text"}}
	for _, tc := range upgradeEngines {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			// legacyGate writes the gate entry an older refill wrote beside
			// each plan's schemas: it names no schema, and makes every
			// schema row of its plan count.
			legacyGate := func(t *testing.T, s *Store, plans ...string) {
				t.Helper()
				for _, p := range plans {
					if err := s.Update(ctx, func(tx *Tx) error {
						return tx.Append(ctx, &refill.Event{Kind: refill.EventGateResult, Actor: "alice", PlanID: p, Detail: refill.Detail(map[string]any{"passed": true})})
					}); err != nil {
						t.Fatal(err)
					}
				}
			}
			wantBaseline := func(t *testing.T, s *Store, dataset, plan string, cols []refill.Column, by string) {
				t.Helper()
				got, ok, err := s.SchemaBaseline(ctx, dataset)
				if err != nil || !ok || got.PlanID != plan || !reflect.DeepEqual(got.Columns, cols) || got.AcceptedBy != by {
					t.Errorf("SchemaBaseline(%s) = %+v, %v, %v; want plan %s's %v, accepted by %q", dataset, got, ok, err, plan, cols, by)
				}
			}

			t.Run("upgraded", func(t *testing.T) {
				storeDSN, driver, rawDSN := tc.dsn(t)
				db, err := sql.Open(driver, rawDSN)
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				record := func(dataset, plan string, cols []refill.Column, at time.Time) {
					t.Helper()
					if _, err := db.ExecContext(ctx, tc.d.rebind(`INSERT INTO schema_snapshots (dataset, plan_id, columns, recorded_at) VALUES (?, ?, ?, ?)`),
						dataset, plan, mustJSON(t, cols), tc.d.timestamp(at)); err != nil {
						t.Fatal(err)
					}
				}
				// Before 0007: orders' source gained a column, and drift
				// was judged against the evolved schema.
				migrateTo(t, ctx, tc.d, db, 6)
				record("orders", "p1", first, time.Now().Add(-48*time.Hour))
				record("orders", "p2", evolved, time.Now().Add(-24*time.Hour))
				// Since 0007, under the refill before this fix: a plan saw
				// orders change again, and customers for the first time.
				migrateTo(t, ctx, tc.d, db, 12)
				record("orders", "p3", seenSince, time.Now())
				record("customers", "p4", first, time.Now())
				record("customers", "p5", evolved, time.Now())

				s, err := Open(ctx, storeDSN, t.TempDir())
				if err != nil {
					t.Fatalf("Open of a version 12 store: %v", err)
				}
				defer s.Close()
				legacyGate(t, s, "p1", "p2", "p3", "p4", "p5")
				wantBaseline(t, s, "orders", "p2", evolved, refill.AcceptedByUpgrade)
				if b, _, _ := s.SchemaBaseline(ctx, "orders"); b.Origin() != "the latest schema seen before the upgrade to accepted baselines (plan p2)" {
					t.Errorf("the carried-over baseline's origin reads %q", b.Origin())
				}
				wantBaseline(t, s, "customers", "p4", first, "")
			})

			t.Run("created since", func(t *testing.T) {
				storeDSN, _, _ := tc.dsn(t)
				s, err := Open(ctx, storeDSN, t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				for _, snap := range []refill.SchemaSnapshot{{Dataset: "orders", PlanID: "p1", Columns: first}, {Dataset: "orders", PlanID: "p2", Columns: evolved}} {
					if err := s.Update(ctx, func(tx *Tx) error { return tx.SaveSchemas(ctx, []refill.SchemaSnapshot{snap}) }); err != nil {
						t.Fatal(err)
					}
				}
				// The migration once more, as if this store had just been
				// upgraded to it: nothing was recorded before 0007.
				if _, err := s.DB().ExecContext(ctx, `DELETE FROM refill_migrations WHERE version = 13`); err != nil {
					t.Fatal(err)
				}
				s.Close()
				if s, err = Open(ctx, storeDSN, t.TempDir()); err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				legacyGate(t, s, "p1", "p2")
				wantBaseline(t, s, "orders", "p1", first, "")
			})
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
