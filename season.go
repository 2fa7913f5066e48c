package refill

import (
	"fmt"
	"sync"
	"time"
	// Zone names resolve on machines without a zoneinfo database too.
	_ "time/tzdata"
)

// Season places a dataset's partitions in its week, the cycle its data
// repeats: a day partition by its weekday, an hour partition by the hour of
// the week in the dataset's timezone. Partition keys are UTC; on a
// daylight-saving day two UTC hours can share a local slot and a local
// hour can have none, as people's behaviour does.
type Season struct {
	Grain Grain
	Loc   *time.Location
}

// Season is the week t's partitions follow. A zone the config loader has
// not checked falls back to UTC; LoadZone is the check.
func (t TableRef) Season() Season {
	g := t.Grain
	if g == "" {
		g = GrainDay
	}
	loc, err := LoadZone(t.Timezone)
	if err != nil {
		loc = time.UTC
	}
	return Season{Grain: g, Loc: loc}
}

var zones sync.Map // name → *time.Location

// LoadZone resolves an IANA zone name ("" and "UTC" are UTC).
func LoadZone(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	if l, ok := zones.Load(name); ok {
		return l.(*time.Location), nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil || name == "Local" {
		return nil, BadInputf("unknown timezone %q: want an IANA name such as Europe/Berlin or America/New_York", name)
	}
	zones.Store(name, loc)
	return loc, nil
}

// PerDay is how many partitions make a day.
func (s Season) PerDay() int {
	if s.Grain == GrainHour {
		return 24
	}
	return 1
}

// Slot is p's place in the week: its weekday at day grain, its local
// weekday and hour at hour grain (0..167).
func (s Season) Slot(p string) (int, bool) {
	t, ok := s.Local(p)
	if !ok {
		return 0, false
	}
	if s.Grain == GrainHour {
		return int(t.Weekday())*24 + t.Hour(), true
	}
	return int(t.Weekday()), true
}

// Local is p's start in local time; a day partition is its calendar date.
func (s Season) Local(p string) (time.Time, bool) {
	t, err := PartitionTime(p, s.Grain)
	if err != nil {
		return time.Time{}, false
	}
	if s.Grain == GrainHour {
		return t.In(s.Loc), true
	}
	return t, true
}

// Describe names a slot for a reader: "Tuesdays", "Saturdays 02:00".
func (s Season) Describe(p string) string {
	t, ok := s.Local(p)
	if !ok {
		return "same-slot"
	}
	if s.Grain == GrainHour {
		return fmt.Sprintf("%ss %02d:00", t.Weekday(), t.Hour())
	}
	return t.Weekday().String() + "s"
}

// OnCalendar reports the calendar entry p falls on, if any: a date
// (2026-11-26) or a recurring month-day (12-25), matched against p's local
// date.
func (s Season) OnCalendar(p string, calendar []string) (string, bool) {
	if len(calendar) == 0 {
		return "", false
	}
	t, ok := s.Local(p)
	if !ok {
		return "", false
	}
	date, md := t.Format(dayLayout), t.Format("01-02")
	for _, c := range calendar {
		if c == date || c == md {
			return c, true
		}
	}
	return "", false
}

// ParseCalendarDay checks one calendar entry: YYYY-MM-DD, or MM-DD for a
// day that recurs every year (02-29 included).
func ParseCalendarDay(s string) error {
	switch len(s) {
	case len(dayLayout):
		if _, err := time.Parse(dayLayout, s); err == nil {
			return nil
		}
	case len("01-02"):
		// 2024 is a leap year, so 02-29 is a real recurring day.
		if _, err := time.Parse(dayLayout, "2024-"+s); err == nil {
			return nil
		}
	}
	return BadInputf("%q is not a calendar day: want YYYY-MM-DD for one date or MM-DD for a day every year", s)
}
