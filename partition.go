package refill

import (
	"fmt"
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

// ParsePoint parses a partition boundary: YYYY-MM-DD or YYYY-MM-DDTHH, in UTC.
// Impossible dates such as 2026-02-30 are rejected, not normalised.
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

// Days counts the calendar days the range touches, both ends included
// (DESIGN.md §4).
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
