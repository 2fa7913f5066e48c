package postgres_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
)

// Text timestamps are cast, and like timestamps without a time zone and
// dates they mean UTC, whatever the session's TimeZone (Asia/Kolkata here).
func TestProfileTypesInUTC(t *testing.T) {
	h := setup(t)
	h.Exec(t, "CREATE TABLE clicks (day date, at text, seen timestamp, stamped timestamptz, due date)")
	h.Exec(t, `INSERT INTO clicks VALUES
		('2026-11-02', '2026-11-02 13:45:00', '2026-11-02 13:44:59', '2026-11-02 13:45:00+00', '2026-11-02'),
		('2026-11-02', '2026-11-02T13:45:00Z', '2026-11-02 13:45:00', '2026-11-02 13:45:00+00', '2026-11-03'),
		('2026-11-02', '2026-11-02 15:45:00+02:00', '2026-11-02 14:00:00', '2026-11-02 13:44:00+00', '2026-11-02'),
		('2026-11-02', '2026-11-02 22:30:00', NULL, '2026-11-02 22:30:00+00', NULL),
		('2026-11-02', NULL, '2026-11-02 23:00:00.000001', '2026-11-02 22:59:59.999999+00', '2026-11-02')`)
	spec := refill.ProfileSpec{
		TimeOrder: []refill.TimeOrderCheck{{Earlier: "at", Later: "seen"}, {Earlier: "seen", Later: "stamped"}, {Earlier: "due", Later: "at"}},
		NoFuture:  []string{"at", "seen", "stamped", "due"},
		Now:       time.Date(2026, 11, 2, 22, 0, 0, 0, time.UTC),
	}
	got, err := h.Warehouse.(refill.Profiler).Profile(t.Context(), refill.TableRef{Table: "clicks", Column: "day", Grain: refill.GrainDay}, spec, "2026-11-02", "2026-11-02")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]refill.Profile{"2026-11-02": {
		Rows: 5, Nulls: map[string]int64{},
		// at > seen: row 1 only. seen > stamped: row 3 (14:00 > 13:44)
		// and row 5 (by two microseconds). due > at: row 2 (midnight
		// on the 3rd).
		Inversions: []int64{1, 2, 1},
		Future:     map[string]int64{"at": 1, "seen": 1, "stamped": 2, "due": 1},
	}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Profile =\n%v\nwant\n%v", got, want)
	}
}

// A text column checked as a timestamp that holds something else fails the
// profile with a message naming the value, not with a wrong count.
func TestProfileTextNotATimestamp(t *testing.T) {
	h := setup(t)
	h.Exec(t, "CREATE TABLE clicks (day date, at text)")
	h.Exec(t, "INSERT INTO clicks VALUES ('2026-11-02', 'yesterday-ish')")
	_, err := h.Warehouse.(refill.Profiler).Profile(t.Context(), refill.TableRef{Table: "clicks", Column: "day", Grain: refill.GrainDay},
		refill.ProfileSpec{NoFuture: []string{"at"}, Now: time.Now()}, "2026-11-02", "2026-11-02")
	if err == nil || !strings.Contains(err.Error(), "yesterday-ish") || !strings.Contains(err.Error(), "clicks") {
		t.Errorf("error = %v, want one naming the table and the value", err)
	}
}
