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

// FuzzParseRange checks that any --from/--to either parses into a sane
// range or is bad input — never a panic, never another error class.
func FuzzParseRange(f *testing.F) {
	for _, s := range [][2]string{
		{"2026-11-01", "2026-11-03"}, {"2026-02-30", "2026-03-01"}, {"2026-11-01T05", "2026-11-01T07"},
		{"9999-12-31", "0001-01-01"}, {"2026-11-01", "2026-11-01T00"}, {" 2026-11-01", "2026-11-01 "},
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
	})
}
