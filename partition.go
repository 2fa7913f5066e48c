package refill

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

const (
	dayLayout  = "2006-01-02"
	hourLayout = "2006-01-02T15"
)

// DefaultMaxRangeDays bounds a request's range unless the config says
// otherwise: ten years is longer than any sane backfill and short enough that
// a typo in the year is caught.
const DefaultMaxRangeDays = 3660

// Range is a closed interval of partitions as the user asked for it. From and
// To keep the user's precision: a date, or a date and hour.
type Range struct {
	From time.Time
	To   time.Time
	// Hourly is true when the user gave hours (2026-11-02T13).
	Hourly bool
}

// MinYear and MaxYear bound the years a range may name. Anything outside
// is a typo (9999 for 2026, 0000), and would fail late and obscurely: a
// partition before year 1 does not print as a date.
const (
	MinYear = 1900
	MaxYear = 2999
)

// ParsePoint parses a partition boundary: YYYY-MM-DD or YYYY-MM-DDTHH, in UTC.
// Impossible dates such as 2026-02-30 are rejected, not normalised, and so
// are years outside MinYear..MaxYear.
func ParsePoint(s string) (t time.Time, hourly bool, err error) {
	s = strings.TrimSpace(s)
	switch len(s) {
	case len(dayLayout):
		t, err = time.Parse(dayLayout, s)
	case len(hourLayout):
		t, err = time.Parse(hourLayout, s)
		hourly = true
	default:
		err = fmt.Errorf("want YYYY-MM-DD or YYYY-MM-DDTHH")
	}
	if err != nil {
		return time.Time{}, false, BadInputf("%q is not a valid date: want YYYY-MM-DD (a real calendar day) or YYYY-MM-DDTHH", s)
	}
	if y := t.Year(); y < MinYear || y > MaxYear {
		return time.Time{}, false, BadInputf("%q is in the year %04d: refill takes years %d to %d", s, y, MinYear, MaxYear)
	}
	return t, hourly, nil
}

// NoRangeLimit asks ParseRange for no limit on the range's length.
const NoRangeLimit = -1

// ParseRange parses --from and --to. Both ends count; from must not be after
// to, and the range may span at most maxDays days (0: the default limit;
// NoRangeLimit: none, for a stored plan's range, which was bounded by the
// config in force when it was planned).
func ParseRange(from, to string, maxDays int) (Range, error) {
	if from == "" || to == "" {
		return Range{}, BadInputf("both --from and --to are required (YYYY-MM-DD)")
	}
	f, fh, err := ParsePoint(from)
	if err != nil {
		return Range{}, fmt.Errorf("--from: %w", err)
	}
	t, th, err := ParsePoint(to)
	if err != nil {
		return Range{}, fmt.Errorf("--to: %w", err)
	}
	if fh != th {
		return Range{}, BadInputf("--from %s and --to %s must both be dates or both be hours", from, to)
	}
	if f.After(t) {
		return Range{}, BadInputf("--from %s is after --to %s", from, to)
	}
	r := Range{From: f, To: t, Hourly: fh}
	if maxDays == 0 {
		maxDays = DefaultMaxRangeDays
	}
	if d := r.Days(); maxDays > 0 && d > maxDays {
		return Range{}, BadInputf("range %s..%s is %d days, over the maximum of %d (max_range_days)", from, to, d, maxDays)
	}
	return r, nil
}

// FitGrains refuses a range given in hours for datasets that are all
// partitioned by day (grains maps each dataset asked for to its grain): a
// day partition is rebuilt whole, so the hours would silently become
// their whole days — more than was asked for, and more than a person
// approving the plan may expect. With any hour-grain dataset among them
// the hours say what to rebuild, and are kept.
func (r Range) FitGrains(grains map[string]Grain) error {
	if !r.Hourly || len(grains) == 0 {
		return nil
	}
	var names []string
	for name, g := range grains {
		if g == GrainHour {
			return nil
		}
		names = append(names, name)
	}
	slices.Sort(names)
	is := " is"
	if len(names) > 1 {
		is = " are all"
	}
	days := r.Partitions(GrainDay)
	return BadInputf("--from %s and --to %s are hours, but %s%s partitioned by day: each day is rebuilt whole, so this would rebuild %s..%s; give dates (--from %s --to %s)",
		r.FromString(), r.ToString(), strings.Join(names, ", "), is, days[0], days[len(days)-1], days[0], days[len(days)-1])
}

// LastPartition is the last partition that could exist at now, in the
// range's form: today, or for a range given in hours, this hour.
func (r Range) LastPartition(now time.Time) string {
	return formatPoint(r.lastStart(now), r.Hourly)
}

// lastStart is when the last partition that could exist at now began.
func (r Range) lastStart(now time.Time) time.Time {
	if r.Hourly {
		return now.UTC().Truncate(time.Hour)
	}
	return now.UTC().Truncate(24 * time.Hour)
}

// CouldExist refuses a range that starts after the last partition that
// could exist at now (LastPartition): none of its partitions has begun,
// so a plan of it would rebuild nothing that is there, and count and
// approve what is not.
func (r Range) CouldExist(now time.Time) error {
	if r.From.After(r.lastStart(now)) {
		return BadInputf("--from %s is after %s, the last partition that could exist yet: a plan rebuilds partitions that have begun", r.FromString(), r.LastPartition(now))
	}
	return nil
}

// Days counts the calendar days the range touches, both ends included
// (docs/design.md §4).
func (r Range) Days() int {
	f := r.From.Truncate(24 * time.Hour)
	t := r.To.Truncate(24 * time.Hour)
	return int(t.Sub(f).Hours()/24) + 1
}

// FromString and ToString render the range's ends as the user gave them.
func (r Range) FromString() string { return formatPoint(r.From, r.Hourly) }

// ToString renders the range's upper end.
func (r Range) ToString() string { return formatPoint(r.To, r.Hourly) }

func formatPoint(t time.Time, hourly bool) string {
	if hourly {
		return t.Format(hourLayout)
	}
	return t.Format(dayLayout)
}

// Partitions lists the partitions of grain g that the range covers, in order.
// A day-grain dataset asked for hours gets the days those hours touch; an
// hour-grain dataset asked for days gets every hour of those days.
func (r Range) Partitions(g Grain) []string {
	var out []string
	switch g {
	case GrainHour:
		from, to := r.From, r.To
		if !r.Hourly {
			to = to.Add(23 * time.Hour)
		}
		for t := from; !t.After(to); t = t.Add(time.Hour) {
			out = append(out, t.Format(hourLayout))
		}
	default:
		from := r.From.Truncate(24 * time.Hour)
		to := r.To.Truncate(24 * time.Hour)
		for t := from; !t.After(to); t = t.AddDate(0, 0, 1) {
			out = append(out, t.Format(dayLayout))
		}
	}
	return out
}

// Extend returns the range widened by n partitions of grain g before From,
// so one grouped query can read both the range and its history.
func (r Range) Extend(g Grain, n int) Range {
	out := r
	if g == GrainHour {
		out.From = r.From.Add(-time.Duration(n) * time.Hour)
	} else {
		out.From = r.From.AddDate(0, 0, -n)
	}
	return out
}

// PartitionTime parses a partition key of grain g.
func PartitionTime(p string, g Grain) (time.Time, error) {
	layout := dayLayout
	if g == GrainHour {
		layout = hourLayout
	}
	t, err := time.Parse(layout, p)
	if err != nil {
		return time.Time{}, BadInputf("partition %q is not a valid %s partition (want %s)", p, g, strings.ReplaceAll(strings.ReplaceAll(layout, "2006-01-02", "YYYY-MM-DD"), "T15", "THH"))
	}
	return t, nil
}

// FormatPartition renders t as a partition key of grain g.
func FormatPartition(t time.Time, g Grain) string {
	if g == GrainHour {
		return t.UTC().Format(hourLayout)
	}
	return t.UTC().Format(dayLayout)
}
