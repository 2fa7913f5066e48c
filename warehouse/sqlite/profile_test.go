package sqlite_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/refill-dev/refill"
)

// SQLite stores timestamps as text in whatever form they were written.
// Text without an offset is UTC, as in SQLite's date functions; the checks
// compare instants, not text.
func TestProfileMixedTextFormats(t *testing.T) {
	h := setup(t)
	h.Exec(t, "CREATE TABLE clicks (id INTEGER, at TEXT, seen DATETIME, note)")
	h.Exec(t, `INSERT INTO clicks VALUES
		(1, '2026-11-02 13:45:00', '2026-11-02T13:44:59Z', 'inverted by a second; the text says not'),
		(2, '2026-11-02T13:45:00Z', '2026-11-02 13:45:00', 'equal; the text says inverted'),
		(3, '2026-11-02 15:45:00+02:00', '2026-11-02 14:00', 'in order; the text says inverted'),
		(4, '2026-11-02 13:45', '2026-11-02 13:45:00.000', 'equal'),
		(5, '2026-11-02 13:45:00.001', '2026-11-02 13:45', 'inverted by a millisecond'),
		(6, '2026-11-02T23:59:59.999+00:00', 'not a time', 'no inversion without a time'),
		(7, '2026-11-02 13:00', '2026-11-02 12:30:00-01:00', 'in order; 13:30 UTC'),
		(8, '2026-11-02 22:00:00-03:00', '2026-11-03 02:00', 'future: 2026-11-03 01:00 UTC, key 2026-11-03')`)
	ref := refill.TableRef{Table: "clicks", Column: "at", Grain: refill.GrainDay}
	spec := refill.ProfileSpec{
		NotNull:   []string{"note"},
		TimeOrder: []refill.TimeOrderCheck{{Earlier: "at", Later: "seen"}},
		NoFuture:  []string{"at", "seen"},
		Now:       time.Date(2026, 11, 2, 23, 0, 0, 0, time.UTC),
	}
	got, err := h.Warehouse.(refill.Profiler).Profile(t.Context(), ref, spec, "2026-11-02", "2026-11-03")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]refill.Profile{
		"2026-11-02": {Rows: 7, Nulls: map[string]int64{"note": 0}, Inversions: []int64{2}, Future: map[string]int64{"at": 1, "seen": 0}},
		"2026-11-03": {Rows: 1, Nulls: map[string]int64{"note": 0}, Inversions: []int64{0}, Future: map[string]int64{"at": 1, "seen": 1}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Profile =\n%v\nwant\n%v", got, want)
	}
}

// More not-null columns than one flag argument carries, and a column named
// in several checks.
func TestProfileManyColumns(t *testing.T) {
	h := setup(t)
	const n = 70
	cols, vals := "day TEXT", "'2026-11-02'"
	for i := range n {
		cols += fmt.Sprintf(", c%d TEXT", i)
		if i%3 == 0 {
			vals += ", NULL"
		} else {
			vals += ", 'x'"
		}
	}
	h.Exec(t, "CREATE TABLE wide ("+cols+")")
	h.Exec(t, "INSERT INTO wide VALUES ("+vals+"), ("+vals+")")
	spec := refill.ProfileSpec{Now: time.Now()}
	for i := range n {
		spec.NotNull = append(spec.NotNull, fmt.Sprintf("c%d", i))
	}
	got, err := h.Warehouse.(refill.Profiler).Profile(t.Context(), refill.TableRef{Table: "wide", Column: "day", Grain: refill.GrainDay}, spec, "2026-11-02", "2026-11-02")
	if err != nil {
		t.Fatal(err)
	}
	p := got["2026-11-02"]
	for i := range n {
		want := int64(0)
		if i%3 == 0 {
			want = 2
		}
		if c := fmt.Sprintf("c%d", i); p.Nulls[c] != want {
			t.Errorf("nulls of %s = %d, want %d", c, p.Nulls[c], want)
		}
	}
}
