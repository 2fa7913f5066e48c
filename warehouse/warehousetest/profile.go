package warehousetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
)

// profileNow is the clock the profile fixture is judged against.
var profileNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// loadEvents creates the profile fixture. Timestamps carry their offset,
// so that both warehouses read the same instants, and mix the forms SQLite
// stores as text, chosen so that comparing the text would get the order
// wrong: ' ' sorts before 'T', and 15:45+02:00 is before 14:00Z.
func loadEvents(t *testing.T, h *Harness) {
	t.Helper()
	h.Exec(t, `CREATE TABLE events (id INTEGER, day DATE, customer TEXT, amount NUMERIC,
		event_time TIMESTAMP WITH TIME ZONE, ingested_at TIMESTAMP WITH TIME ZONE)`)
	h.Exec(t, `INSERT INTO events (id, day, customer, amount, event_time, ingested_at) VALUES
		(1, '2026-11-01', 'ada', 10, '2026-11-01 10:00:00+00:00', '2026-11-01T10:05:00Z'),
		(2, '2026-11-01', NULL, 20, '2026-11-01 13:45:00+00:00', '2026-11-01T13:44:00Z'),
		(3, '2026-11-01', 'bob', NULL, '2026-11-01 15:45:00+02:00', '2026-11-01 14:00:00+00:00'),
		(4, '2026-11-01', NULL, NULL, '2026-11-01T13:45:00Z', '2026-11-01 13:45:00+00:00'),
		(5, '2026-11-01', 'cyd', 5, NULL, '2026-11-01 09:00:00+00:00'),
		(6, '2026-11-02', 'ada', 1, '2026-11-02 12:00:00.500+00:00', '2026-11-02T12:00:00.250Z'),
		(7, '2026-11-02', 'ada', 1, '2026-11-02 12:00:00+00:00', '2099-01-01 00:00:00+00:00'),
		(8, '2026-11-02', 'bob', 2, '2026-12-25 00:00:00+00:00', '2026-12-25T01:00:00Z'),
		(9, '2026-11-02', 'bob', 2, '2026-11-30 12:00:00+00:00', '2026-11-30T12:00:00.001Z'),
		(10, '2026-11-04', NULL, 3, '2026-11-04 08:00:00+00:00', NULL),
		(11, '2026-10-31', NULL, NULL, '2099-01-01 00:00:00+00:00', '2000-01-01 00:00:00+00:00')`)
}

// profileOf returns the warehouse's Profiler or fails the test.
func profileOf(t *testing.T, h *Harness) refill.Profiler {
	t.Helper()
	p, ok := h.Warehouse.(refill.Profiler)
	if !ok {
		t.Fatalf("%T does not implement refill.Profiler", h.Warehouse)
	}
	return p
}

func exerciseProfile(t *testing.T, setup func(t *testing.T) (*Harness, context.Context)) {
	t.Run("Profile", func(t *testing.T) {
		h, ctx := setup(t)
		loadEvents(t, h)
		spec := refill.ProfileSpec{
			NotNull:   []string{"customer", "amount"},
			TimeOrder: []refill.TimeOrderCheck{{Earlier: "event_time", Later: "ingested_at"}},
			NoFuture:  []string{"event_time", "ingested_at"},
			Now:       profileNow,
		}
		got, err := profileOf(t, h).Profile(ctx, refill.TableRef{Table: "events", Column: "day", Grain: refill.GrainDay}, spec, "2026-11-01", "2026-11-04")
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]refill.Profile{
			// Row 2 is inverted by a minute across formats; rows 3 and 4
			// are not, though their text says so; row 5 has no event time.
			"2026-11-01": {Rows: 5, Nulls: map[string]int64{"customer": 2, "amount": 2}, Inversions: []int64{1},
				Future: map[string]int64{"event_time": 0, "ingested_at": 0}},
			// Row 6 is inverted by 250 ms. Row 9's event time is Now
			// itself, not after it; its ingestion is a millisecond after.
			"2026-11-02": {Rows: 4, Nulls: map[string]int64{"customer": 0, "amount": 0}, Inversions: []int64{1},
				Future: map[string]int64{"event_time": 1, "ingested_at": 3}},
			// 2026-11-03 is empty, so absent; row 10 has no ingestion time.
			"2026-11-04": {Rows: 1, Nulls: map[string]int64{"customer": 1, "amount": 0}, Inversions: []int64{0},
				Future: map[string]int64{"event_time": 0, "ingested_at": 0}},
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Profile =\n%v\nwant\n%v", got, want)
		}
	})

	t.Run("ProfileKeysValuesAndShapes", func(t *testing.T) {
		// Accepted values, means and zeros come from the one scan; value
		// shapes and duplicate keys from one grouped query each. Every
		// count is exact, and the same on every warehouse, so the gate's
		// verdicts are too.
		h, ctx := setup(t)
		loadEvents(t, h)
		h.Exec(t, `INSERT INTO events (id, day, customer, amount) VALUES (12, '2026-11-03', 'ada', 0), (13, '2026-11-03', 'ada', -4)`)
		spec := refill.ProfileSpec{
			Accepted: []refill.AcceptedValues{{Column: "customer", Values: []string{"ada", "bob"}}, {Column: "id", Values: []string{"1", "2", "3"}}},
			Drift:    []string{"customer", "amount"},
			Unique:   []string{"customer"},
			Now:      profileNow,
		}
		got, err := profileOf(t, h).Profile(ctx, refill.TableRef{Table: "events", Column: "day", Grain: refill.GrainDay}, spec, "2026-11-01", "2026-11-04")
		if err != nil {
			t.Fatal(err)
		}
		type shape struct {
			Rows     int64
			Accepted map[string]refill.AcceptedProfile
			Numeric  map[string]refill.NumericProfile
			Values   map[string]refill.ValueProfile
			Dup      refill.Duplicates
		}
		have := map[string]shape{}
		for p, pr := range got {
			s := shape{Rows: pr.Rows, Accepted: pr.Accepted, Numeric: map[string]refill.NumericProfile{}, Values: pr.Values}
			for c, n := range pr.Numeric {
				n.Mean = math.Round(n.Mean*1e6) / 1e6
				s.Numeric[c] = n
			}
			if pr.Duplicates != nil {
				s.Dup = *pr.Duplicates
			}
			have[p] = s
		}
		want := map[string]shape{
			// cyd is outside the list, the NULLs are not_null's; customer
			// is text, so it has no mean.
			"2026-11-01": {Rows: 5,
				Accepted: map[string]refill.AcceptedProfile{"customer": {NonNull: 3, Outside: 1}, "id": {NonNull: 5, Outside: 2}},
				Numeric:  map[string]refill.NumericProfile{"amount": {NonNull: 3, Mean: 11.666667}},
				Values:   map[string]refill.ValueProfile{"customer": {NonNull: 3, Distinct: 3, Top: 1}, "amount": {NonNull: 3, Distinct: 3, Top: 1}}},
			// Two keys shared by two rows each: ada comes first.
			"2026-11-02": {Rows: 4,
				Accepted: map[string]refill.AcceptedProfile{"customer": {NonNull: 4}, "id": {NonNull: 4, Outside: 4}},
				Numeric:  map[string]refill.NumericProfile{"amount": {NonNull: 4, Mean: 1.5}},
				Values:   map[string]refill.ValueProfile{"customer": {NonNull: 4, Distinct: 2, Top: 2}, "amount": {NonNull: 4, Distinct: 2, Top: 2}},
				Dup:      refill.Duplicates{Keys: 2, Rows: 4, Max: 2, Example: []string{"ada"}}},
			// A zero and a negative amount.
			"2026-11-03": {Rows: 2,
				Accepted: map[string]refill.AcceptedProfile{"customer": {NonNull: 2}, "id": {NonNull: 2, Outside: 2}},
				Numeric:  map[string]refill.NumericProfile{"amount": {NonNull: 2, Mean: -2, Zeros: 1}},
				Values:   map[string]refill.ValueProfile{"customer": {NonNull: 2, Distinct: 1, Top: 2}, "amount": {NonNull: 2, Distinct: 2, Top: 1}},
				Dup:      refill.Duplicates{Keys: 1, Rows: 2, Max: 2, Example: []string{"ada"}}},
			// An all-NULL customer has no shape and no duplicates.
			"2026-11-04": {Rows: 1,
				Accepted: map[string]refill.AcceptedProfile{"customer": {}, "id": {NonNull: 1, Outside: 1}},
				Numeric:  map[string]refill.NumericProfile{"amount": {NonNull: 1, Mean: 3}},
				Values:   map[string]refill.ValueProfile{"amount": {NonNull: 1, Distinct: 1, Top: 1}}},
		}
		if fmt.Sprint(have) != fmt.Sprint(want) {
			t.Errorf("Profile =\n%v\nwant\n%v", have, want)
		}
		for _, bad := range []refill.ProfileSpec{{Unique: []string{"nope"}}, {Drift: []string{"nope"}}, {Accepted: []refill.AcceptedValues{{Column: "nope", Values: []string{"x"}}}}} {
			if _, err := profileOf(t, h).Profile(ctx, refill.TableRef{Table: "events", Column: "day", Grain: refill.GrainDay}, bad, "2026-11-01", "2026-11-04"); !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), "nope") {
				t.Errorf("Profile(%+v): error = %v, want bad input naming the column", bad, err)
			}
		}
	})

	t.Run("ProfileMatchesPartitionCounts", func(t *testing.T) {
		// Whatever the partition column and grain, the profile's row
		// counts are PartitionCounts' counts, and an empty spec still
		// counts rows.
		h, ctx := setup(t)
		loadEvents(t, h)
		// The same partitions in a text key column and a timestamp without
		// time zone.
		h.Exec(t, "CREATE TABLE copies (id INTEGER, day TEXT, seen_at TIMESTAMP, customer TEXT)")
		h.Exec(t, "INSERT INTO copies (id, day, seen_at, customer) SELECT id, day, event_time, customer FROM events")
		for _, ref := range []refill.TableRef{
			{Table: "events", Column: "day", Grain: refill.GrainDay},
			{Table: "events", Column: "event_time", Grain: refill.GrainDay},
			{Table: "events", Column: "event_time", Grain: refill.GrainHour},
			{Table: "copies", Column: "day", Grain: refill.GrainDay},
			{Table: "copies", Column: "seen_at", Grain: refill.GrainDay},
			{Table: "copies", Column: "seen_at", Grain: refill.GrainHour},
		} {
			from, to := "2026-10-30", "2026-12-31"
			if ref.Grain == refill.GrainHour {
				from, to = "2026-11-01T00", "2026-11-02T23"
			}
			counts, err := h.Warehouse.PartitionCounts(ctx, ref, from, to)
			if err != nil {
				t.Fatal(err)
			}
			got, err := profileOf(t, h).Profile(ctx, ref, refill.ProfileSpec{NotNull: []string{"customer"}, Now: profileNow}, from, to)
			if err != nil {
				t.Fatal(err)
			}
			rows := map[string]int64{}
			for p, pr := range got {
				rows[p] = pr.Rows
			}
			if !maps.Equal(rows, counts) || len(counts) == 0 {
				t.Errorf("%s.%s %s: Profile rows %v, PartitionCounts %v", ref.Table, ref.Column, ref.Grain, rows, counts)
			}
		}
	})

	t.Run("ProfileErrors", func(t *testing.T) {
		h, ctx := setup(t)
		loadEvents(t, h)
		p := profileOf(t, h)
		ref := refill.TableRef{Table: "events", Column: "day", Grain: refill.GrainDay}
		numeric := "numeric"
		if h.Warehouse.Driver() == "duckdb" {
			numeric = "decimal(18,3)" // as DuckDB names NUMERIC
		}
		for _, tt := range []struct {
			spec    refill.ProfileSpec
			mention []string
		}{
			{refill.ProfileSpec{NotNull: []string{"customer", "no_such"}}, []string{"events", "no_such", "customer, amount, event_time"}},
			{refill.ProfileSpec{TimeOrder: []refill.TimeOrderCheck{{Earlier: "event_time", Later: "ingest"}}}, []string{"events", "ingest", "ingested_at"}},
			{refill.ProfileSpec{NoFuture: []string{"gone"}}, []string{"gone"}},
			{refill.ProfileSpec{TimeOrder: []refill.TimeOrderCheck{{Earlier: "amount", Later: "event_time"}}}, []string{"column amount of table events is " + numeric, "timestamp"}},
			{refill.ProfileSpec{NoFuture: []string{"id"}}, []string{"column id of table events is integer", "timestamp"}},
		} {
			_, err := p.Profile(ctx, ref, tt.spec, "2026-11-01", "2026-11-04")
			if !errors.Is(err, refill.ErrBadInput) {
				t.Errorf("Profile(%+v): error = %v, want bad input", tt.spec, err)
				continue
			}
			for _, m := range tt.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("Profile(%+v): error %q does not mention %q", tt.spec, err, m)
				}
			}
		}
		if _, err := p.Profile(ctx, refill.TableRef{Table: "nope", Column: "day", Grain: refill.GrainDay}, refill.ProfileSpec{}, "2026-11-01", "2026-11-04"); !errors.Is(err, refill.ErrNoTable) {
			t.Errorf("missing table: error = %v, want ErrNoTable", err)
		}
		if _, err := p.Profile(ctx, ref, refill.ProfileSpec{}, "2026-11-04", "2026-11-01"); !errors.Is(err, refill.ErrBadInput) {
			t.Errorf("backwards range: error = %v, want bad input", err)
		}
	})
}
