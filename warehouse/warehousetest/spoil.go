package warehousetest

import (
	"context"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
)

func exerciseSpoil(t *testing.T, setup func(t *testing.T) (*Harness, context.Context)) {
	t.Run("SpoilMakesAPartitionStale", func(t *testing.T) {
		h, ctx := setup(t)
		r := rehearserOf(t, h)
		loadRevenue(t, h)
		h.Exec(t, "CREATE TABLE events (id INTEGER PRIMARY KEY, seen_at TIMESTAMP, flag BOOLEAN, note TEXT, score REAL, n INTEGER)")
		h.Exec(t, `INSERT INTO events (id, seen_at, flag, note, score, n) VALUES
			(1, '2026-11-02 13:05:00', TRUE, 'a', 1.5, NULL),
			(2, '2026-11-02 13:10:00', FALSE, NULL, 2.5, 7),
			(3, '2026-11-02 13:20:00', TRUE, 'c', NULL, 8),
			(4, '2026-11-02 14:05:00', TRUE, 'd', 4.5, 9)`)
		h.Exec(t, "CREATE TABLE hourly (hour TEXT, n INTEGER)")
		h.Exec(t, "INSERT INTO hourly (hour, n) VALUES ('2026-11-02T13', 1), ('2026-11-02T13', 1), ('2026-11-02T14', 2)")
		// n + 1 of the first row collides with the third's: the change is
		// made one column seen_at a time, and the copy is refused.
		h.Exec(t, "CREATE TABLE uniq (day DATE, n INTEGER UNIQUE, note TEXT)")
		h.Exec(t, "INSERT INTO uniq (day, n, note) VALUES ('2026-11-01', 1, 'a'), ('2026-11-01', 5, 'b'), ('2026-11-01', 2, 'c'), ('2026-11-02', 7, 'd')")
		uniq := refill.TableRef{Table: "uniq", Column: "day", Grain: refill.GrainDay}
		events := refill.TableRef{Table: "events", Column: "seen_at", Grain: refill.GrainHour}
		hourly := refill.TableRef{Table: "hourly", Column: "hour", Grain: refill.GrainHour}

		for _, c := range []struct {
			ref              refill.TableRef
			partition, other string
			want             []string // in what Spoil says
		}{
			{revenue, "2026-11-01", "2026-11-02", []string{"changed 1 row", "deleted 1 row", "added 1 row"}},
			{revenue, "2026-10-31", "2026-11-01", []string{"changed 1 row", "added 1 row"}}, // one row: none to delete
			{events, "2026-11-02T13", "2026-11-02T14", []string{"changed 1 row", "deleted 1 row", "added 1 row"}},
			// Two equal rows: the one changed and the one deleted are
			// still two rows.
			{hourly, "2026-11-02T13", "2026-11-02T14", []string{"changed 1 row", "deleted 1 row", "added 1 row"}},
			{uniq, "2026-11-01", "2026-11-02", []string{"changed 1 row", "deleted 1 row"}},
		} {
			name := c.ref.Table + " " + c.partition
			clean := digestOf(t, ctx, r, c.ref, c.partition)
			other := digestOf(t, ctx, r, c.ref, c.other)
			var spoiled []refill.Digest
			for range 2 {
				err := r.Rehearse(ctx, func(tx refill.WarehouseTx) error {
					what, changed, err := tx.Spoil(ctx, c.ref, c.partition)
					if err != nil {
						return err
					}
					if !changed {
						t.Errorf("%s: Spoil changed nothing (%s)", name, what)
					}
					for _, w := range c.want {
						if !strings.Contains(what, w) {
							t.Errorf("%s: Spoil says %q, want it to say %q", name, what, w)
						}
					}
					d := digestOf(t, ctx, tx, c.ref, c.partition)
					if d.Checksum == clean.Checksum {
						t.Errorf("%s: Spoil left the partition's checksum as it was: %v", name, d)
					}
					if d := digestOf(t, ctx, tx, c.ref, c.other); d != other {
						t.Errorf("%s: Spoil changed partition %s: %v, was %v", name, c.other, d, other)
					}
					spoiled = append(spoiled, d)
					return nil
				})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
			}
			if spoiled[0] != spoiled[1] {
				t.Errorf("%s: spoiled twice, two results: %v and %v; want the same rows every time", name, spoiled[0], spoiled[1])
			}
			// Rolled back with the rehearsal.
			if d := digestOf(t, ctx, r, c.ref, c.partition); d != clean {
				t.Errorf("%s: after the rehearsal %v, want %v", name, d, clean)
			}
		}

		err := r.Rehearse(ctx, func(tx refill.WarehouseTx) error {
			what, changed, err := tx.Spoil(ctx, revenue, "2026-11-05")
			if err == nil && changed {
				t.Errorf("Spoil of an empty partition changed it: %s", what)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	})

	t.Run("SpoilCatchesJobsThatKeepWhatWasThere", func(t *testing.T) {
		// What Spoil is for: a job that rebuilds its partition gives the
		// same rows over a spoiled partition; one that only inserts what
		// is missing keeps the stale rows.
		h, ctx := setup(t)
		r := rehearserOf(t, h)
		loadRevenue(t, h)
		rebuild := "DELETE FROM revenue_daily WHERE day = :partition;\n" +
			"INSERT INTO revenue_daily (day, region, amount) SELECT day, region, amount FROM revenue_src WHERE day = :partition"
		missing := "INSERT INTO revenue_daily (day, region, amount) SELECT day, region, amount FROM revenue_src s WHERE day = :partition " +
			"AND NOT EXISTS (SELECT 1 FROM revenue_daily d WHERE d.day = s.day AND d.region = s.region)"
		for job, wantSame := range map[string]bool{rebuild: true, missing: false} {
			err := r.Rehearse(ctx, func(tx refill.WarehouseTx) error {
				if err := tx.ExecSQL(ctx, revenue, job, "2026-11-01"); err != nil {
					return err
				}
				fresh := digestOf(t, ctx, tx, revenue, "2026-11-01")
				if _, _, err := tx.Spoil(ctx, revenue, "2026-11-01"); err != nil {
					return err
				}
				if err := tx.ExecSQL(ctx, revenue, job, "2026-11-01"); err != nil {
					return err
				}
				if same := digestOf(t, ctx, tx, revenue, "2026-11-01") == fresh; same != wantSame {
					t.Errorf("%q over a spoiled partition gives the same rows: %v, want %v", job, same, wantSame)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	})
}
