package gate

import (
	"fmt"
	"math"
	"strings"

	"github.com/refill-dev/refill"
)

// Drift metrics are scored like volume (docs/design.md §9): a robust z of the
// partition's value against the median and MAD of same-slot history, with a
// floor under the scale so that small, ordinary changes never alert.
//
// Shares (of zeros, of the most frequent value) are scored as differences,
// with a floor of shareFloor: at max_z 4 a share must move by more than 12
// percentage points, so 0% → 60% zeros fails however quiet history was.
// Means and distinct counts are scored on a log scale, sign-preserving
// log1p(|x|) for means that may be negative. Distinct counts take volume's
// floor (ratios within ~10% never alert); means a wider one, ln 1.5: a
// mean of a skewed or mostly-zero column (amounts) moves by a third from
// sampling alone, and four same-weekday points understate that spread,
// while the faults a mean is for (cents for units, a sign flip) move it by
// orders of magnitude.
const shareFloor = 0.03

var meanFloor = math.Log(1.5)

// metric is one measurement of one column in one partition.
type metric struct {
	name  string // as a finding says it: "mean", "top value share"
	share bool   // a share in [0, 1], else scored on a log scale
}

var (
	metricMean     = metric{name: "mean"}
	metricZeros    = metric{name: "zero share", share: true}
	metricDistinct = metric{name: "distinct values"}
	metricTop      = metric{name: "top value share", share: true}
	metrics        = []metric{metricMean, metricZeros, metricDistinct, metricTop}
)

// value reads m for col from a partition's profile; ok is false when the
// partition has no such measurement (an empty partition, a column that is
// all NULL, a text column's mean).
func (m metric) value(pr refill.Profile, col string) (float64, bool) {
	switch m {
	case metricMean, metricZeros:
		n, ok := pr.Numeric[col]
		if !ok || n.NonNull == 0 {
			return 0, false
		}
		if m == metricMean {
			return n.Mean, true
		}
		return float64(n.Zeros) / float64(n.NonNull), true
	default:
		v, ok := pr.Values[col]
		if !ok || v.NonNull == 0 {
			return 0, false
		}
		if m == metricDistinct {
			return float64(v.Distinct), true
		}
		return float64(v.Top) / float64(v.NonNull), true
	}
}

// scale maps a value to where it is scored.
func (m metric) scale(x float64) float64 {
	if m.share {
		return x
	}
	return math.Copysign(math.Log1p(math.Abs(x)), x)
}

func (m metric) floor() float64 {
	switch {
	case m.share:
		return shareFloor
	case m == metricMean:
		return meanFloor
	}
	return scaleFloor
}

func (m metric) format(x float64) string {
	switch {
	case m.share:
		return fmt.Sprintf("%.0f%%", 100*x)
	case m == metricDistinct:
		return fmt.Sprintf("%.0f", x)
	}
	return fmt.Sprintf("%.4g", x)
}

// driftScore holds what a range's partitions are scored against: the
// profiles of the range and of its history, from one scan.
type driftScore struct {
	check    refill.DriftCheck
	season   refill.Season
	points   int
	profiles map[string]refill.Profile
	// before lists the partitions before the range, newest first, flagged
	// ones left out; slots are their places in the week.
	before []string
	slots  []int
}

// newDrift reads history as volume does: flagged partitions and calendar
// days (volume.calendar) are left out and replaced by older ones.
func newDrift(c *refill.DriftCheck, se refill.Season, r refill.Range, profiles map[string]refill.Profile, flagged map[string]bool, calendar []string) *driftScore {
	d := depth(c.Lookback, se)
	window := r.Extend(se.Grain, d).Partitions(se.Grain)[:d]
	s := &driftScore{check: *c, season: se, points: points(c.Lookback), profiles: profiles}
	for i := len(window) - 1; i >= 0; i-- {
		if _, holiday := se.OnCalendar(window[i], calendar); !flagged[window[i]] && !holiday {
			s.before = append(s.before, window[i])
			s.slots = append(s.slots, slotOf(se, window[i]))
		}
	}
	return s
}

// judge scores each drift column's metrics in partition p. An empty
// partition is volume's to judge; too little history is one warning for
// the partition, shown and never a pass for auto.
func (s *driftScore) judge(dataset, p string, pr refill.Profile) []refill.Finding {
	if pr.Rows == 0 {
		return nil
	}
	slot, ok := s.season.Slot(p)
	if !ok {
		return nil
	}
	var hist []refill.Profile
	for i, h := range s.before {
		if len(hist) == s.points {
			break
		}
		if hp, ok := s.profiles[h]; ok && hp.Rows > 0 && s.slots[i] == slot {
			hist = append(hist, hp)
		}
	}
	if len(hist) < MinHistory {
		return []refill.Finding{{Dataset: dataset, Partition: p, Check: CheckDrift, Column: strings.Join(s.check.Columns, ", "),
			Observed: float64(len(hist)), Limit: s.check.MaxZ, Passed: true, Warning: true,
			Message: fmt.Sprintf("insufficient history: %d earlier non-empty %s before the range, need %d; drift not scored", len(hist), s.season.Describe(p), MinHistory)}}
	}
	var out []refill.Finding
	for _, col := range s.check.Columns {
		for _, m := range metrics {
			x, ok := m.value(pr, col)
			if !ok {
				continue
			}
			var ys []float64
			for _, hp := range hist {
				if y, ok := m.value(hp, col); ok {
					ys = append(ys, m.scale(y))
				}
			}
			if len(ys) < MinHistory {
				continue // the column was mostly NULL in history: not_null speaks
			}
			centre := Median(ys)
			dev := make([]float64, len(ys))
			for i, y := range ys {
				dev[i] = math.Abs(y - centre)
			}
			floor := m.floor()
			if m == metricDistinct {
				// A small count moves by its own Poisson noise, about
				// 1/√n on the log scale: 42 distinct amounts one week
				// and 25 the next is chance, 300 users then 180 is not.
				floor = math.Max(floor, 1/math.Sqrt(math.Max(1, math.Expm1(centre))))
			}
			scale := math.Max(1.4826*Median(dev), floor)
			z := (m.scale(x) - centre) / scale
			if math.Abs(z) <= s.check.MaxZ {
				continue
			}
			typical := centre
			if !m.share {
				typical = math.Copysign(math.Expm1(math.Abs(centre)), centre)
			}
			out = append(out, refill.Finding{Dataset: dataset, Partition: p, Check: CheckDrift, Column: col,
				Observed: round(z), Limit: s.check.MaxZ,
				Message: fmt.Sprintf("%s: %s %s (history %s, %d earlier %s): %s",
					col, m.name, m.format(x), m.format(typical), len(ys), s.season.Describe(p), zText(z, s.check.MaxZ))})
		}
	}
	return out
}
