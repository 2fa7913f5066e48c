package refill

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseRange(t *testing.T) {
	cases := []struct {
		from, to string
		days     int
		err      string
	}{
		{"2026-11-01", "2026-11-03", 3, ""},
		{"2026-11-01", "2026-11-01", 1, ""},
		{"2026-02-28", "2026-03-01", 2, ""},
		{"2024-02-29", "2024-02-29", 1, ""},
		{"2026-11-01T22", "2026-11-02T01", 2, ""},
		{"2026-02-30", "2026-03-01", 0, `"2026-02-30" is not a valid date`},
		{"2025-02-29", "2025-03-01", 0, `"2025-02-29" is not a valid date`},
		{"2026-11-01T24", "2026-11-02T01", 0, "not a valid date"},
		{"2026-11-05", "2026-11-02", 0, "--from 2026-11-05 is after --to 2026-11-02"},
		{"2026-11-01", "2026-11-02T03", 0, "both be dates or both be hours"},
		{"", "2026-11-02", 0, "both --from and --to are required"},
		{"11/01/2026", "2026-11-02", 0, "not a valid date"},
		{"2016-01-01", "2026-01-08", 0, "is 3661 days, over the maximum of 3660"},
		// Years are bounded at parse time, not found out later.
		{"1900-01-01", "1900-01-01", 1, ""},
		{"2999-12-31T23", "2999-12-31T23", 1, ""},
		{"0000-01-01", "0000-01-05", 0, `--from: "0000-01-01" is in the year 0000: refill takes years 1900 to 2999`},
		{"9999-12-30", "9999-12-31", 0, `"9999-12-30" is in the year 9999`},
		{"1899-12-31", "1900-01-02", 0, `"1899-12-31" is in the year 1899`},
		{"2999-12-31", "3000-01-01", 0, `--to: "3000-01-01" is in the year 3000`},
		{"3000-01-01T00", "3000-01-01T01", 0, "in the year 3000"},
	}
	for _, c := range cases {
		r, err := ParseRange(c.from, c.to, 0)
		if c.err != "" {
			if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s..%s: err = %v, want bad input with %q", c.from, c.to, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s..%s: %v", c.from, c.to, err)
			continue
		}
		if r.Days() != c.days {
			t.Errorf("%s..%s: %d days, want %d", c.from, c.to, r.Days(), c.days)
		}
	}
	if _, err := ParseRange("2026-11-01", "2026-11-10", 5); err == nil || !strings.Contains(err.Error(), "over the maximum of 5") {
		t.Errorf("configured maximum not applied: %v", err)
	}
}

func TestPartitions(t *testing.T) {
	r, err := ParseRange("2026-11-01", "2026-11-02", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.Partitions(GrainDay), ","); got != "2026-11-01,2026-11-02" {
		t.Errorf("days = %s", got)
	}
	hours := r.Partitions(GrainHour)
	if len(hours) != 48 || hours[0] != "2026-11-01T00" || hours[47] != "2026-11-02T23" {
		t.Errorf("hours of two days = %d, %s..%s", len(hours), hours[0], hours[len(hours)-1])
	}
	h, err := ParseRange("2026-11-01T22", "2026-11-02T01", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(h.Partitions(GrainHour), ","); got != "2026-11-01T22,2026-11-01T23,2026-11-02T00,2026-11-02T01" {
		t.Errorf("hours = %s", got)
	}
	if got := strings.Join(h.Partitions(GrainDay), ","); got != "2026-11-01,2026-11-02" {
		t.Errorf("days an hour range touches = %s", got)
	}
	if got := r.Extend(GrainDay, 3).Partitions(GrainDay)[0]; got != "2026-10-29" {
		t.Errorf("extend = %s", got)
	}
}

// TestFitGrains: hours given for datasets all partitioned by day are
// refused, naming the datasets, their grain and the days they would
// become; with an hour-grain dataset among them, hours are what to
// rebuild.
func TestFitGrains(t *testing.T) {
	hours, err := ParseRange("2026-11-01T05", "2026-11-02T03", 0)
	if err != nil {
		t.Fatal(err)
	}
	days, err := ParseRange("2026-11-01", "2026-11-02", 0)
	if err != nil {
		t.Fatal(err)
	}
	err = hours.FitGrains(map[string]Grain{"sessions": GrainDay})
	if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "sessions is partitioned by day") ||
		!strings.Contains(err.Error(), "would rebuild 2026-11-01..2026-11-02; give dates (--from 2026-11-01 --to 2026-11-02)") {
		t.Errorf("hours for a day dataset: %v", err)
	}
	err = hours.FitGrains(map[string]Grain{"sessions": GrainDay, "billing": GrainDay})
	if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "billing, sessions are all partitioned by day") {
		t.Errorf("hours for two day datasets: %v", err)
	}
	for _, c := range []struct {
		r      Range
		grains map[string]Grain
	}{
		{hours, map[string]Grain{"sessions": GrainDay, "clicks": GrainHour}},
		{hours, map[string]Grain{"clicks": GrainHour}},
		{days, map[string]Grain{"sessions": GrainDay}},
		{days, map[string]Grain{"clicks": GrainHour}},
	} {
		if err := c.r.FitGrains(c.grains); err != nil {
			t.Errorf("%s..%s for %v: %v", c.r.FromString(), c.r.ToString(), c.grains, err)
		}
	}
}

// TestCouldExist: a range that starts after the last partition that
// could exist — today, or this hour for a range in hours — is refused,
// naming that partition; one that starts by then is not, whatever its
// end.
func TestCouldExist(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 30, 0, 0, time.UTC)
	for _, c := range []struct {
		from, to string
		last     string // "" when it has begun
	}{
		{"2026-11-30", "2026-12-02", ""},
		{"2026-11-29", "2026-11-29", ""},
		{"2026-12-01", "2026-12-01", "2026-11-30"},
		{"2026-11-30T12", "2026-11-30T20", ""},
		{"2026-11-30T13", "2026-11-30T14", "2026-11-30T12"},
		{"2026-12-01T00", "2026-12-01T00", "2026-11-30T12"},
	} {
		r, err := ParseRange(c.from, c.to, 0)
		if err != nil {
			t.Fatal(err)
		}
		err = r.CouldExist(now)
		if c.last == "" {
			if err != nil {
				t.Errorf("%s..%s at %s: %v", c.from, c.to, now, err)
			}
			continue
		}
		if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "--from "+c.from+" is after "+c.last+", the last partition that could exist yet") {
			t.Errorf("%s..%s at %s: %v, want bad input naming %s", c.from, c.to, now, err, c.last)
		}
	}
}

// FuzzParseRange checks that any --from/--to either parses into a sane
// range or is bad input — never a panic, never another error class — and
// that the rules a plan adds hold of every range it accepts: hours for
// day partitions are refused, and so is a range that starts after now.
func FuzzParseRange(f *testing.F) {
	for _, s := range [][2]string{
		{"2026-11-01", "2026-11-03"}, {"2026-02-30", "2026-03-01"}, {"2026-11-01T05", "2026-11-01T07"},
		{"9999-12-31", "0001-01-01"}, {"2026-11-01", "2026-11-01T00"}, {" 2026-11-01", "2026-11-01 "},
		// Years out of bounds, and the bounds themselves.
		{"0000-01-01", "0000-01-05"}, {"9999-12-30", "9999-12-31"}, {"1899-12-31", "1900-01-02"},
		{"1900-01-01", "1900-01-01"}, {"2999-12-31T23", "2999-12-31T23"}, {"3000-01-01T00", "3000-01-01T01"},
		// An hour on its own, as a day-grain plan would be asked for it;
		// a range to come.
		{"2026-11-01T05", "2026-11-01T05"}, {"2026-12-03", "2026-12-05"}, {"2999-12-31", "2999-12-31"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, from, to string) {
		r, err := ParseRange(from, to, 400)
		if err != nil {
			if !errors.Is(err, ErrBadInput) {
				t.Fatalf("%q..%q: %v is not bad input", from, to, err)
			}
			return
		}
		if r.From.After(r.To) || r.Days() < 1 || r.Days() > 400 {
			t.Fatalf("%q..%q: accepted %v..%v (%d days)", from, to, r.From, r.To, r.Days())
		}
		g := GrainDay
		if r.Hourly {
			g = GrainHour
		}
		ps := r.Partitions(g)
		if len(ps) == 0 {
			t.Fatalf("%q..%q: no partitions", from, to)
		}
		for _, p := range ps {
			if _, err := PartitionTime(p, g); err != nil {
				t.Fatalf("partition %q does not parse back: %v", p, err)
			}
		}
		if r.From.Location() != time.UTC {
			t.Fatalf("not UTC: %v", r.From.Location())
		}
		if y := r.From.Year(); y < MinYear || r.To.Year() > MaxYear {
			t.Fatalf("%q..%q: accepted years %d..%d", from, to, y, r.To.Year())
		}
		// The history before the range reads as partitions too.
		for _, p := range r.Extend(g, 28).Partitions(g)[:1] {
			if _, err := PartitionTime(p, g); err != nil {
				t.Fatalf("history partition %q does not parse back: %v", p, err)
			}
		}
		// Hours for day partitions: refused, naming the grain; kept for
		// hour partitions.
		err = r.FitGrains(map[string]Grain{"d": GrainDay})
		if r.Hourly != (err != nil) || (err != nil && (!errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "d is partitioned by day"))) {
			t.Fatalf("%q..%q for a day dataset: %v", from, to, err)
		}
		if err := r.FitGrains(map[string]Grain{"h": GrainHour, "d": GrainDay}); err != nil {
			t.Fatalf("%q..%q for an hour dataset: %v", from, to, err)
		}
		// It could exist from its first partition's start, and not a
		// partition before, naming that partition.
		if err := r.CouldExist(r.From); err != nil {
			t.Fatalf("%q..%q at its own start: %v", from, to, err)
		}
		step := 24 * time.Hour
		if r.Hourly {
			step = time.Hour
		}
		before := r.From.Add(-step)
		if err := r.CouldExist(before); !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "after "+r.LastPartition(before)) {
			t.Fatalf("%q..%q a partition before it starts: %v", from, to, err)
		}
	})
}
