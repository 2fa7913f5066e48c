// Package gate is the source gate: before anything is reprocessed, it asks
// whether the inputs are safe now. A fixed pipeline over a still-broken
// source gives the same wrong answer, so a plan whose inputs fail the gate
// is blocked.
//
// Per partition it checks null ratios, volume against history (a robust
// score, docs/design.md §9), timestamp inversions and future timestamps, all from
// one scan of the range in the warehouse; per dataset it checks the schema
// against the one recorded with the previous plan.
package gate

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/refill-dev/refill"
)

// Check names, as findings carry them.
const (
	CheckNotNull     = "not_null"
	CheckVolume      = "volume"
	CheckTimeOrder   = "time_order"
	CheckNoFuture    = "no_future"
	CheckSchemaDrift = "schema_drift"
	CheckUnique      = "unique"
	CheckAccepted    = "accepted_values"
	CheckDrift       = "drift"
)

// MinHistory is the fewest same-slot history points a volume score needs;
// with fewer the finding is a warning that is shown and does not block.
const MinHistory = 4

// scaleFloor keeps the volume score from alerting on changes under ~10%.
var scaleFloor = math.Log(1.10)

// Gate checks datasets against their configured checks.
type Gate struct {
	Config    *refill.Config
	Warehouse refill.Warehouse
	Store     Store
	Now       refill.Clock
	// Baseline, when set, is the schema each dataset is judged against
	// instead of the accepted one in the store: the apply-time re-check
	// judges against the columns the plan itself saw and sealed.
	Baseline map[string][]refill.Column
}

// Store is what the gate reads from the state store: the accepted schema
// it judges drift against, the partitions whose checks failed before, and
// the acceptances that let a finding pass. *store.Store implements it; a
// nil Store judges without history (no baseline, nothing flagged, nothing
// accepted).
type Store interface {
	SchemaBaseline(ctx context.Context, dataset string) (refill.SchemaSnapshot, bool, error)
	Flagged(ctx context.Context, dataset string) (map[string]bool, error)
	Acceptances(ctx context.Context, dataset, partition string) ([]refill.Acceptance, error)
}

// Result is a gate verdict plus what it saw, so a plan can record schemas
// and flagged partitions in the state store.
type Result struct {
	refill.GateVerdict
	Schemas []refill.SchemaSnapshot
	Flags   []refill.Flag
	// Measured is what each failing or accepted finding's check saw (by
	// MeasureKey): the figures an acceptance is bound to.
	Measured map[string]string
}

// MeasureKey names a finding's measurement in Result.Measured.
func MeasureKey(dataset, partition, check, column string) string {
	return dataset + "\x00" + partition + "\x00" + check + "\x00" + column
}

// Check runs the gate over datasets for the partitions of r.
func (g *Gate) Check(ctx context.Context, datasets []string, r refill.Range) (Result, error) {
	res := Result{GateVerdict: refill.GateVerdict{Passed: true, Checked: []string{}, Findings: []refill.Finding{}}, Measured: map[string]string{}}
	for _, name := range datasets {
		d, ok := g.Config.Datasets[name]
		if !ok {
			return res, refill.NotFoundf("unknown dataset %q (known: %s)", name, strings.Join(g.Config.DatasetNames(), ", "))
		}
		if d.Table == "" {
			continue
		}
		res.Checked = append(res.Checked, name)
		cols, err := g.Warehouse.Columns(ctx, d.Table)
		if err != nil {
			return res, fmt.Errorf("dataset %s: %w", name, err)
		}
		drift, err := g.drift(ctx, d, cols)
		if err != nil {
			return res, err
		}
		res.Findings = append(res.Findings, drift...)
		res.Schemas = append(res.Schemas, refill.SchemaSnapshot{Dataset: name, Columns: cols})
		if d.Checks != nil {
			fs, err := g.partitions(ctx, g.Warehouse, d, r, res.Measured)
			if err != nil {
				return res, err
			}
			res.Findings = append(res.Findings, fs...)
		}
	}
	for _, f := range res.Findings {
		if !f.Passed && !f.Warning {
			res.Passed = false
			// A future timestamp depends on the clock (REFILL_NOW may move
			// it), not only on the data: it blocks, but never takes a
			// partition out of later volume history.
			if f.Partition != "" && f.Check != CheckNoFuture {
				res.Flags = append(res.Flags, refill.Flag{Dataset: f.Dataset, Partition: f.Partition, Check: f.Check})
			}
		}
	}
	return res, nil
}

// drift compares a table's columns with its baseline: the schema last
// accepted (by an applied plan or `refill schema accept`), or else the
// first one recorded. A plan that merely saw a new schema — even a blocked
// one — never moves the baseline, so drift cannot be cleared by planning
// again.
func (g *Gate) drift(ctx context.Context, d *refill.Dataset, cols []refill.Column) ([]refill.Finding, error) {
	var prev refill.SchemaSnapshot
	if base, ok := g.Baseline[d.Name]; ok {
		prev = refill.SchemaSnapshot{Dataset: d.Name, Columns: base, PlanID: "(this plan)"}
	} else {
		if g.Store == nil {
			return nil, nil
		}
		snap, ok, err := g.Store.SchemaBaseline(ctx, d.Name)
		if err != nil || !ok {
			return nil, err
		}
		prev = snap
	}
	before := map[string]string{}
	for _, c := range prev.Columns {
		before[c.Name] = c.Type
	}
	now := map[string]string{}
	for _, c := range cols {
		now[c.Name] = c.Type
	}
	// The way forward differs: a plan judged against its own sealed
	// baseline (at apply) ran over a schema it never saw, so only a new
	// plan can; a new plan is judged against the accepted schema, which a
	// person may move when the change was intended.
	next := "; if the change is intended, accept it: refill schema accept " + d.Name + " --reason ..."
	if _, sealed := g.Baseline[d.Name]; sealed {
		next = "; this plan cannot run over it: if the change is intended, accept it (refill schema accept " + d.Name + " --reason ...) and plan again"
	}
	var out []refill.Finding
	add := func(col, msg string) {
		out = append(out, refill.Finding{Dataset: d.Name, Check: CheckSchemaDrift, Column: col, Observed: 1, Limit: 0,
			Message: msg + " since " + prev.Origin() + next})
	}
	for _, c := range cols {
		t, had := before[c.Name]
		switch {
		case !had:
			add(c.Name, fmt.Sprintf("column %s (%s) was added", c.Name, c.Type))
		case t != c.Type:
			add(c.Name, fmt.Sprintf("column %s changed type from %s to %s", c.Name, t, c.Type))
		}
	}
	for _, c := range prev.Columns {
		if _, has := now[c.Name]; !has {
			add(c.Name, fmt.Sprintf("column %s (%s) was dropped", c.Name, c.Type))
		}
	}
	return out, nil
}

// partitions runs the per-partition checks from one profile scan of the
// range (and, with drift, of its history), one grouped count of the volume
// history, and at most one grouped query each for unique keys and drift's
// value shapes.
func (g *Gate) partitions(ctx context.Context, prof refill.Profiler, d *refill.Dataset, r refill.Range, measured map[string]string) ([]refill.Finding, error) {
	c := d.Checks
	ref := d.Ref()
	grain, season := ref.Grain, ref.Season()
	// A future timestamp is judged against the real clock when the "as
	// of" clock is set ahead of it: a clock moved forward must not make
	// rows from the future look past.
	spec := RowSpec(c, g.Now.Passed())
	parts := r.Partitions(grain)
	from := parts[0]
	if c.Drift != nil {
		// Drift's history is profiled in the same scan as the range.
		spec.Drift = c.Drift.Columns
		from = r.Extend(grain, depth(c.Drift.Lookback, season)).Partitions(grain)[0]
	}
	profiles, err := prof.Profile(ctx, ref, spec, from, parts[len(parts)-1])
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", d.Name, err)
	}
	flagged := map[string]bool{}
	accepted := map[string]refill.Acceptance{}
	if g.Store != nil {
		if c.Volume != nil || c.Drift != nil {
			if flagged, err = g.Store.Flagged(ctx, d.Name); err != nil {
				return nil, err
			}
		}
		as, err := g.Store.Acceptances(ctx, d.Name, "")
		if err != nil {
			return nil, err
		}
		for _, a := range as {
			// The newest acceptance of a finding not revoked is the one in
			// force; an accepted partition never returns to history,
			// lapsed or revoked, so neither a holiday nor a mistake
			// becomes the norm.
			flagged[a.Partition] = true
			if a.Revoked == nil {
				accepted[MeasureKey(a.Dataset, a.Partition, a.Check, a.Column)] = a
			}
		}
	}
	var out []refill.Finding
	var vol *volume
	if c.Volume != nil {
		if vol, err = g.history(ctx, d, ref, r, c.Volume, flagged); err != nil {
			return nil, err
		}
	}
	var dr *driftScore
	if c.Drift != nil {
		var calendar []string
		if c.Volume != nil {
			calendar = c.Volume.Calendar
		}
		dr = newDrift(c.Drift, season, r, profiles, flagged, calendar)
	}
	for _, p := range parts {
		pr := profiles[p]
		var fs []refill.Finding
		if vol != nil {
			fs = append(fs, vol.judge(d.Name, p, pr.Rows)...)
		}
		fs = append(fs, Judge(d.Name, p, pr, c, spec.Now)...)
		if dr != nil {
			fs = append(fs, dr.judge(d.Name, p, pr)...)
		}
		for i := range fs {
			f := &fs[i]
			if f.Passed || f.Warning {
				continue
			}
			key := MeasureKey(f.Dataset, f.Partition, f.Check, f.Column)
			m := Measure(f.Check, f.Column, pr, c)
			measured[key] = m
			if a, ok := accepted[key]; ok {
				g.accept(f, d, a, m)
			}
		}
		out = append(out, fs...)
	}
	return out, nil
}

// accept applies an acceptance to the failing finding it names: while the
// partition measures what it measured when accepted, the finding passes and
// says who accepted it and why; once it measures differently, the
// acceptance has lapsed and the finding fails, saying so. On a dataset
// that needs a lead's acceptance (policy.accept_lead_tags, perhaps tagged
// since), only a lead's counts.
func (g *Gate) accept(f *refill.Finding, d *refill.Dataset, a refill.Acceptance, now string) {
	day := a.At.UTC().Format("2006-01-02")
	by := &refill.Accepted{By: a.By, Reason: a.Reason, At: a.At}
	if g.Config.AcceptNeedsLead(d) && !g.Config.Users[a.By].HasRole(refill.RoleLead) {
		f.Lapsed = by
		f.Message = fmt.Sprintf("%s; accepted as real by %s on %s, but on a dataset tagged %s only a lead's acceptance counts (policy.accept_lead_tags)", f.Message, a.By, day, strings.Join(d.Tags, ", "))
		return
	}
	if a.Measured != now {
		f.Lapsed = by
		f.Message = fmt.Sprintf("%s; accepted as real by %s on %s, but the partition changed since (then %s, now %s), so the acceptance has lapsed", f.Message, a.By, day, a.Measured, now)
		return
	}
	f.Passed = true
	f.Accepted = by
	f.Message = fmt.Sprintf("accepted as real by %s on %s (%s): %s", a.By, day, refill.OneLine(a.Reason), f.Message)
}

// Measure renders what check saw of column in a partition's profile, the
// figures an acceptance is bound to: the row count, and the counts (or,
// for drift, the profile) the check judged.
func Measure(check, column string, pr refill.Profile, c *refill.Checks) string {
	m := fmt.Sprintf("rows=%d", pr.Rows)
	switch check {
	case CheckNotNull:
		m += fmt.Sprintf(" nulls=%d", pr.Nulls[column])
	case CheckTimeOrder:
		for i, to := range c.TimeOrder {
			if to.Earlier+">"+to.Later == column && i < len(pr.Inversions) {
				m += fmt.Sprintf(" inversions=%d", pr.Inversions[i])
			}
		}
	case CheckNoFuture:
		m += fmt.Sprintf(" future=%d", pr.Future[column])
	case CheckUnique:
		if du := pr.Duplicates; du != nil {
			m += fmt.Sprintf(" shared=%d keys=%d max=%d", du.Rows, du.Keys, du.Max)
		}
	case CheckAccepted:
		ap := pr.Accepted[column]
		m += fmt.Sprintf(" non_null=%d outside=%d", ap.NonNull, ap.Outside)
	case CheckDrift:
		if np, ok := pr.Numeric[column]; ok {
			// Nine significant digits: a mean summed in another order
			// (a parallel scan) is the same mean.
			m += fmt.Sprintf(" non_null=%d zeros=%d mean=%.9g", np.NonNull, np.Zeros, np.Mean)
		}
		if vp, ok := pr.Values[column]; ok {
			m += fmt.Sprintf(" distinct=%d top=%d", vp.Distinct, vp.Top)
		}
	}
	return m
}

// slotOf is p's place in the week, or -1 for a key that is not a partition.
func slotOf(s refill.Season, p string) int {
	if slot, ok := s.Slot(p); ok {
		return slot
	}
	return -1
}

// points is how many same-slot history points a score with this lookback
// (in days) compares against: one per week, at least MinHistory.
func points(lookback int) int { return max(MinHistory, lookback/7) }

// depth is how many partitions before a range a score with this lookback
// reads: twice its same-slot points' weeks, so flagged partitions can be
// replaced by older ones of the same slot.
func depth(lookback int, s refill.Season) int {
	return max(lookback, points(lookback)*7) * s.PerDay() * 2
}

// Judge checks one partition's profile against the row-level checks — null
// ratios, timestamp order, future timestamps — and returns the failures.
// The gate judges sources with it, and a run judges the rows it staged
// before publishing them.
func Judge(dataset, p string, pr refill.Profile, c *refill.Checks, now time.Time) []refill.Finding {
	if pr.Rows == 0 || c == nil {
		return nil // ratios of nothing say nothing; volume speaks for empty partitions
	}
	var out []refill.Finding
	find := func(check, col string, observed, limit float64, msg string) {
		out = append(out, refill.Finding{Dataset: dataset, Partition: p, Check: check, Column: col,
			Observed: round(observed), Limit: limit, Message: msg})
	}
	rows := float64(pr.Rows)
	if c.NotNull != nil {
		for _, col := range c.NotNull.Columns {
			ratio := float64(pr.Nulls[col]) / rows
			if ratio > c.NotNull.MaxRatio {
				find(CheckNotNull, col, ratio, c.NotNull.MaxRatio,
					fmt.Sprintf("%s of %s rows are null (%.1f%%), limit %.1f%%", humanize.Comma(pr.Nulls[col]), humanize.Comma(pr.Rows), 100*ratio, 100*c.NotNull.MaxRatio))
			}
		}
	}
	for i, to := range c.TimeOrder {
		if i >= len(pr.Inversions) {
			break
		}
		ratio := float64(pr.Inversions[i]) / rows
		if ratio > c.MaxRatio {
			find(CheckTimeOrder, to.Earlier+">"+to.Later, ratio, c.MaxRatio,
				fmt.Sprintf("%s of %s rows have %s after %s (%.2f%%), limit %.2f%%", humanize.Comma(pr.Inversions[i]), humanize.Comma(pr.Rows), to.Earlier, to.Later, 100*ratio, 100*c.MaxRatio))
		}
	}
	for _, col := range c.NoFuture {
		ratio := float64(pr.Future[col]) / rows
		if ratio > c.MaxRatio {
			find(CheckNoFuture, col, ratio, c.MaxRatio,
				fmt.Sprintf("%s of %s rows have %s in the future (after %s)", humanize.Comma(pr.Future[col]), humanize.Comma(pr.Rows), col, now.Format(time.RFC3339)))
		}
	}
	if du := pr.Duplicates; len(c.Unique) > 0 && du != nil && du.Keys > 0 {
		key := strings.Join(c.Unique, ", ")
		find(CheckUnique, key, float64(du.Rows), 0,
			fmt.Sprintf("%s of %s rows share a key (%s) with another row: %s duplicated %s, up to %d rows on one key, e.g. (%s) = (%s)",
				humanize.Comma(du.Rows), humanize.Comma(pr.Rows), key, humanize.Comma(du.Keys), plural(du.Keys, "key", "keys"), du.Max, key, strings.Join(du.Example, ", ")))
	}
	if av := c.AcceptedValues; av != nil {
		for _, a := range av.Columns {
			ap := pr.Accepted[a.Column]
			if ap.NonNull == 0 {
				continue // NULLs are not_null's to judge
			}
			ratio := float64(ap.Outside) / float64(ap.NonNull)
			if ratio > av.MaxRatio {
				find(CheckAccepted, a.Column, ratio, av.MaxRatio,
					fmt.Sprintf("%s of %s non-null rows hold a value outside [%s] (%.2f%%), limit %.2f%%",
						humanize.Comma(ap.Outside), humanize.Comma(ap.NonNull), strings.Join(a.Values, ", "), 100*ratio, 100*av.MaxRatio))
			}
		}
	}
	return out
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// HasRowChecks reports whether c has a check Judge judges one partition by
// (not volume or drift, which need history).
func HasRowChecks(c *refill.Checks) bool {
	return c != nil && (c.NotNull != nil || len(c.TimeOrder) > 0 || len(c.NoFuture) > 0 || len(c.Unique) > 0 || c.AcceptedValues != nil)
}

// RowSpec is the profile the row-level checks of c need.
func RowSpec(c *refill.Checks, now time.Time) refill.ProfileSpec {
	spec := refill.ProfileSpec{TimeOrder: c.TimeOrder, NoFuture: c.NoFuture, Now: now, Unique: c.Unique}
	if c.NotNull != nil {
		spec.NotNull = c.NotNull.Columns
	}
	if c.AcceptedValues != nil {
		spec.Accepted = c.AcceptedValues.Columns
	}
	return spec
}

// volume holds the history a range's partitions are scored against.
type volume struct {
	check  refill.VolumeCheck
	season refill.Season
	// points is how many same-slot partitions a score compares against.
	points int
	// before lists the partitions before the range, newest first, with
	// their row counts; flagged ones and calendar days are already left
	// out.
	before []string
	// slots are before's places in the week, computed once.
	slots  []int
	counts map[string]int64
}

// floor is the smallest scale a score divides by. At day grain it is the
// relative floor, ln 1.10 (volume.min_change overrides it): daily counts
// are thousands of rows, and changes under ~10% never alert. An hour holds
// a few hundred rows or a few dozen, and its count carries its own
// sampling noise, about 1/√n on the log scale (Poisson): 6% at 300 rows,
// 16% at 40. At hour grain the two add as independent noises do, in
// quadrature, sqrt(ln(1.10)² + 1/n): 11% at 300 rows, 19% at 40, and the
// day-grain floor as counts grow. Measured on generated hourly data
// (BENCHMARKS.md, "Hourly seasons"), that keeps false alarms under 0.1%
// of hours where the wider ln 1.15 alone raised 0.8% and missed one hour
// of a 40% drop.
func (v *volume) floor(typical float64) float64 {
	f := scaleFloor
	if v.check.MinChange > 0 {
		f = math.Log1p(v.check.MinChange)
	}
	if v.season.Grain == refill.GrainHour {
		f = math.Sqrt(f*f + 1/math.Max(1, typical))
	}
	return f
}

// history reads, in one grouped count, the partitions before the range that
// a score may compare against: lookback days, so lookback/7 same-slot
// points (at least MinHistory). Partitions the gate flagged before, and
// calendar days, are skipped and replaced by older ones of the same slot,
// so an earlier incident or a holiday neither becomes the norm nor starves
// the next check of history.
func (g *Gate) history(ctx context.Context, d *refill.Dataset, ref refill.TableRef, r refill.Range, vc *refill.VolumeCheck, flagged map[string]bool) (*volume, error) {
	season := ref.Season()
	depth := depth(vc.Lookback, season)
	window := r.Extend(ref.Grain, depth).Partitions(ref.Grain)[:depth]
	counts, err := g.Warehouse.PartitionCounts(ctx, ref, window[0], window[len(window)-1])
	if err != nil {
		return nil, fmt.Errorf("dataset %s: history: %w", d.Name, err)
	}
	v := &volume{check: *vc, season: season, points: points(vc.Lookback), counts: counts}
	for i := len(window) - 1; i >= 0; i-- {
		if _, holiday := season.OnCalendar(window[i], vc.Calendar); !flagged[window[i]] && !holiday {
			v.before = append(v.before, window[i])
			v.slots = append(v.slots, slotOf(season, window[i]))
		}
	}
	return v, nil
}

// judge scores one partition's row count: y = ln(1+rows) against the
// nearest non-empty history partitions in the same slot of the week (the
// weekday at day grain, the local hour of the weekday at hour grain);
// centre is their median, scale max(1.4826·MAD, floor). On a calendar day
// a failure is a warning.
func (v *volume) judge(dataset, p string, rows int64) []refill.Finding {
	slot, ok := v.season.Slot(p)
	if !ok {
		return nil
	}
	var ys []float64
	for i, h := range v.before {
		if len(ys) == v.points {
			break
		}
		if n := v.counts[h]; n > 0 && v.slots[i] == slot {
			ys = append(ys, math.Log1p(float64(n)))
		}
	}
	when := v.season.Describe(p)
	f := refill.Finding{Dataset: dataset, Partition: p, Check: CheckVolume, Limit: v.check.MaxZ}
	if len(ys) < MinHistory {
		f.Passed, f.Warning = true, true
		f.Observed = float64(len(ys))
		f.Message = fmt.Sprintf("insufficient history: %d earlier non-empty %s before the range, need %d; volume not scored (%s rows)", len(ys), when, MinHistory, humanize.Comma(rows))
		if rows == 0 && len(ys) > 0 {
			f.Passed, f.Warning = false, false
			f.Message = fmt.Sprintf("partition is empty; history has rows (%d earlier %s)", len(ys), when)
		}
		return v.onCalendar(f)
	}
	centre := Median(ys)
	dev := make([]float64, len(ys))
	for i, y := range ys {
		dev[i] = math.Abs(y - centre)
	}
	typical := int64(math.Round(math.Expm1(centre)))
	scale := math.Max(1.4826*Median(dev), v.floor(float64(typical)))
	z := (math.Log1p(float64(rows)) - centre) / scale
	f.Observed = round(z)
	switch {
	// An empty day against a positive median always fails. An hour of a
	// few rows is empty by chance now and then (a Poisson count of mean 2
	// is zero one hour in seven), so at hour grain an empty hour fails
	// when its score does: from a typical count of about five rows.
	case rows == 0 && typical > 0 && (v.season.Grain != refill.GrainHour || math.Abs(z) > v.check.MaxZ):
		f.Message = fmt.Sprintf("partition is empty; typical on %s is %s rows", when, humanize.Comma(typical))
	case math.Abs(z) > v.check.MaxZ:
		f.Message = fmt.Sprintf("%s rows vs typical %s (%s, %d earlier %s): %s",
			humanize.Comma(rows), humanize.Comma(typical), pct(rows, typical), len(ys), when, zText(z, v.check.MaxZ))
	default:
		return nil // a pass is not worth a line
	}
	return v.onCalendar(f)
}

// onCalendar turns a failure on a calendar day into a warning that says
// so: shown, not blocking, never a pass for auto.
func (v *volume) onCalendar(f refill.Finding) []refill.Finding {
	if day, ok := v.season.OnCalendar(f.Partition, v.check.Calendar); ok && !f.Passed {
		f.Passed, f.Warning = true, true
		f.Message = fmt.Sprintf("on the calendar (%s), so a warning: %s", day, f.Message)
	}
	return []refill.Finding{f}
}

// zText shows a score beside its limit with one decimal, or two where one
// would make a failing score read as the limit itself (z = -3.0, limit 3.0).
func zText(z, limit float64) string {
	if math.Abs(math.Round(z*10)/10) == math.Round(limit*10)/10 {
		return fmt.Sprintf("z = %.2f, limit %.1f", z, limit)
	}
	return fmt.Sprintf("z = %.1f, limit %.1f", z, limit)
}

func pct(rows, typical int64) string {
	if typical == 0 {
		return "new"
	}
	return fmt.Sprintf("%.0f%% of typical", 100*float64(rows)/float64(typical))
}

// Median is the middle of xs (the mean of the two middle values when
// their number is even), xs left as it was: the gate's typical volume, and
// the planner's history expectation.
func Median[T int64 | float64](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// round keeps findings readable in JSON: four decimals are plenty for a
// ratio or a score.
func round(x float64) float64 { return math.Round(x*1e4) / 1e4 }
