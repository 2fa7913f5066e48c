package refill

import (
	"errors"
	"testing"
)

func TestSeasonSlotsFollowLocalTime(t *testing.T) {
	ny := TableRef{Grain: GrainHour, Timezone: "America/New_York"}.Season()
	utc := TableRef{Grain: GrainHour}.Season()
	for _, c := range []struct {
		s    Season
		p    string
		want string
	}{
		// 14:00 UTC is 10:00 in New York during daylight saving time (EDT,
		// UTC-4) and 09:00 after it ends on 2026-11-01 (EST, UTC-5).
		{ny, "2026-10-28T14", "Wednesdays 10:00"},
		{ny, "2026-11-04T15", "Wednesdays 10:00"},
		{ny, "2026-11-04T14", "Wednesdays 09:00"},
		// The repeated hour: 05:00 and 06:00 UTC are both 01:00 local.
		{ny, "2026-11-01T05", "Sundays 01:00"},
		{ny, "2026-11-01T06", "Sundays 01:00"},
		// Saturday night in New York is Sunday morning in UTC.
		{ny, "2026-11-01T03", "Saturdays 23:00"},
		{utc, "2026-11-01T03", "Sundays 03:00"},
		{TableRef{}.Season(), "2026-11-01", "Sundays"},
	} {
		if got := c.s.Describe(c.p); got != c.want {
			t.Errorf("%s in %s: %s, want %s", c.p, c.s.Loc, got, c.want)
		}
	}
	a, _ := ny.Slot("2026-10-28T14")
	b, _ := ny.Slot("2026-11-04T15")
	if a != b {
		t.Errorf("the same local hour across the DST change has slots %d and %d", a, b)
	}
	if _, ok := ny.Slot("2026-11-04"); ok {
		t.Error("a day key has a slot at hour grain")
	}
}

func TestCalendar(t *testing.T) {
	ny := TableRef{Grain: GrainHour, Timezone: "America/New_York"}.Season()
	day := TableRef{Grain: GrainDay}.Season()
	cal := []string{"12-25", "2026-11-26"}
	for _, c := range []struct {
		s    Season
		p    string
		want string
	}{
		{day, "2026-12-25", "12-25"},
		{day, "2031-12-25", "12-25"},
		{day, "2026-11-26", "2026-11-26"},
		{day, "2027-11-26", ""},
		{day, "2026-12-24", ""},
		// 03:00 UTC on the 26th is still Christmas evening in New York.
		{ny, "2026-12-26T03", "12-25"},
		{ny, "2026-12-25T03", ""},
	} {
		got, ok := c.s.OnCalendar(c.p, cal)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("%s: %q %v, want %q", c.p, got, ok, c.want)
		}
	}
	for _, good := range []string{"12-25", "02-29", "2026-11-26"} {
		if err := ParseCalendarDay(good); err != nil {
			t.Errorf("%s: %v", good, err)
		}
	}
	for _, bad := range []string{"", "2-29", "02-30", "13-01", "2026-02-29", "2026-11-26T10", "12/25", "christmas"} {
		if err := ParseCalendarDay(bad); !errors.Is(err, ErrBadInput) {
			t.Errorf("%q: %v, want bad input", bad, err)
		}
	}
}

func TestLoadZone(t *testing.T) {
	for _, good := range []string{"", "UTC", "Europe/Berlin", "Asia/Seoul"} {
		if _, err := LoadZone(good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
	for _, bad := range []string{"Local", "Mars/Olympus", "../../etc/passwd", "EST5EDT,M3.2.0"} {
		if _, err := LoadZone(bad); !errors.Is(err, ErrBadInput) {
			t.Errorf("%q: %v, want bad input", bad, err)
		}
	}
}
