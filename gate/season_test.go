package gate_test

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/config"
	"github.com/refill-dev/refill/gate"
	"github.com/refill-dev/refill/internal/whtest"
	"github.com/refill-dev/refill/store"
)

// The hourly series: 13 weeks of a city's hourly events in New York time,
// ending the day before seasonEnd, across the end of daylight saving time
// (2026-11-01). Weekday nights are quiet, weekday mornings and evenings
// rush, Friday and Saturday nights are busy, weekend days are steady; each
// hour is that level ±10% and then Poisson-sampled, as counts are.
var seasonDaily = flag.Bool("season.daily", false, "gate the hourly series day by day instead of week by week")

var (
	seasonEnd  = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	seasonDays = 91
	// The evaluated days: the last 8 weeks, each week gated alone as a
	// weekly backfill would be (or each day, with -season.daily, as a team
	// gates day by day: seven times the queries), with 5 weeks of history
	// before the first.
	evalDays = 56
	// Planted faults, in UTC hours: a 40% drop over three consecutive
	// hours (Wednesday 11-18 10:00-12:00 New York) and one duplicated
	// hourly load (Tuesday 11-24 15:00 New York).
	dropHours = []string{"2026-11-18T15", "2026-11-18T16", "2026-11-18T17"}
	dupHour   = "2026-11-24T20"
)

func level(t time.Time) float64 {
	h, wd := t.Hour(), t.Weekday()
	weekend := wd == time.Saturday || wd == time.Sunday
	lateFriSat := (wd == time.Friday || wd == time.Saturday) && h >= 20
	earlySatSun := weekend && h < 4
	switch {
	case lateFriSat || earlySatSun:
		return 380
	case h < 6:
		return 40
	case weekend && h < 20:
		return 260
	case weekend:
		return 200
	case h < 7:
		return 120
	case h < 10:
		return 450
	case h < 17:
		return 300
	case h < 20:
		return 420
	default:
		return 200
	}
}

func poisson(rng *rand.Rand, lambda float64) int {
	if lambda > 60 {
		return max(0, int(math.Round(lambda+math.Sqrt(lambda)*rng.NormFloat64())))
	}
	l, k, p := math.Exp(-lambda), 0, 1.0
	for {
		p *= rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// hourlyCounts is the series by UTC hour key, with the faults planted.
func hourlyCounts(seed uint64) map[string]int {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		panic(err)
	}
	rng := rand.New(rand.NewPCG(seed, 14))
	out := map[string]int{}
	start := seasonEnd.AddDate(0, 0, -seasonDays)
	for t := start; t.Before(seasonEnd); t = t.Add(time.Hour) {
		out[t.Format("2006-01-02T15")] = poisson(rng, level(t.In(ny))*(0.9+0.2*rng.Float64()))
	}
	for _, h := range dropHours {
		out[h] = int(math.Round(float64(out[h]) * 0.6))
	}
	out[dupHour] *= 2
	return out
}

// seasonFigures is what gating the series at one grain found.
type seasonFigures struct {
	grain     string
	evaluated int
	failed    []string // failed partitions outside the planted faults
	caught    []string // planted faults that failed
}

func (f seasonFigures) String() string {
	return fmt.Sprintf("%s grain: %d of %d clean partitions failed (%.2f%%); planted faults caught: %d %v",
		f.grain, len(f.failed), f.evaluated, 100*float64(len(f.failed))/float64(f.evaluated), len(f.caught), f.caught)
}

// gateSeason gates the series week by week (or day by day) at one grain.
func gateSeason(t *testing.T, w *whtest.Warehouse, yaml string, grain refill.Grain) seasonFigures {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), "refill.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "state.db"), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	g := &gate.Gate{Config: cfg, Warehouse: w.WH, Store: st, Now: func() time.Time { return seasonEnd }}
	planted := map[string]bool{dupHour: true}
	for _, h := range dropHours {
		planted[h] = true
	}
	if grain == refill.GrainDay {
		planted = map[string]bool{}
	}
	fig := seasonFigures{grain: string(grain)}
	step := 7
	if *seasonDaily {
		step = 1
	}
	for n := evalDays; n >= 1; n -= step {
		from, to := seasonEnd.AddDate(0, 0, -n).Format("2006-01-02"), seasonEnd.AddDate(0, 0, -n+step-1).Format("2006-01-02")
		r, err := refill.ParseRange(from, to, 0)
		if err != nil {
			t.Fatal(err)
		}
		res, err := g.Check(context.Background(), []string{"hv"}, r)
		if err != nil {
			t.Fatal(err)
		}
		fig.evaluated += len(r.Partitions(grain))
		for _, f := range res.Findings {
			if f.Passed || f.Warning {
				continue
			}
			if planted[f.Partition] {
				fig.caught = append(fig.caught, f.Partition)
				continue
			}
			fig.failed = append(fig.failed, f.Partition+" "+f.Message)
		}
	}
	fig.evaluated -= len(planted)
	sort.Strings(fig.caught)
	return fig
}

// loadSeason writes the series into table hv (one row per event, ts the
// event's UTC time), on either engine, by expanding per-hour counts in SQL.
func loadSeason(t *testing.T, w *whtest.Warehouse, counts map[string]int) {
	t.Helper()
	w.Exec(t,
		w.Pick(`CREATE TABLE hc (h TEXT, n INTEGER)`, `CREATE TABLE hc (h timestamptz, n integer)`),
		w.Pick(`CREATE TABLE hv (ts TEXT)`, `CREATE TABLE hv (ts timestamptz)`))
	var vals []string
	for h, n := range counts {
		tm, _ := time.Parse("2006-01-02T15", h)
		vals = append(vals, fmt.Sprintf("('%s', %d)", tm.Format("2006-01-02 15:04:05"), n))
	}
	for i := 0; i < len(vals); i += 500 {
		w.Exec(t, "INSERT INTO hc (h, n) VALUES "+strings.Join(vals[i:min(i+500, len(vals))], ","))
	}
	w.Exec(t,
		w.Pick(`INSERT INTO hv (ts) WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < 2000)
				SELECT strftime('%Y-%m-%d %H:%M:%S', hc.h, '+' || ((s.i * 7) % 3600) || ' seconds') FROM hc JOIN s ON s.i < hc.n`,
			`INSERT INTO hv (ts) SELECT hc.h + ((i * 7) % 3600) * interval '1 second' FROM hc, generate_series(0, hc.n - 1) AS g(i)`),
		`CREATE INDEX hv_ts ON hv (ts)`)
}

// seasonTZ places the hour dataset in New York's week.
const seasonTZ = ", timezone: America/New_York"

const seasonYAML = `version: 1
warehouse: sqlite:unused.db
datasets:
  hv:
    table: hv
    partition: {column: ts, grain: %s%s}
    checks:
      volume: {lookback: 28, max_z: 3}
`

// TestHourlySeasons gates three months of generated hourly data with
// weekly seasonality and a daylight-saving change, week by week, at hour and
// day grain: false alarms stay at or under 1% and the planted faults are
// caught. Its log lines are the figures in BENCHMARKS.md ("Hourly
// seasons"):
//
//	go test ./gate -run TestHourlySeasons -v
//	go test ./gate -run TestHourlySeasons -v -season.daily
func TestHourlySeasons(t *testing.T) {
	t.Parallel()
	counts := hourlyCounts(2026)
	whtest.Each(t, func(t *testing.T, w *whtest.Warehouse) {
		loadSeason(t, w, counts)
		hour := gateSeason(t, w, fmt.Sprintf(seasonYAML, "hour", seasonTZ), refill.GrainHour)
		day := gateSeason(t, w, fmt.Sprintf(seasonYAML, "day", ""), refill.GrainDay)
		t.Log(hour)
		t.Log(day)
		if limit := hour.evaluated / 100; len(hour.failed) > limit {
			t.Errorf("%d false alarms at hour grain, over 1%% (%d): %s", len(hour.failed), limit, strings.Join(hour.failed, "\n"))
		}
		want := append(append([]string(nil), dropHours...), dupHour)
		sort.Strings(want)
		if strings.Join(hour.caught, " ") != strings.Join(want, " ") {
			t.Errorf("hour grain caught %v of the planted faults %v", hour.caught, want)
		}
		if len(day.failed) > 0 {
			t.Errorf("%d false alarms at day grain: %s", len(day.failed), strings.Join(day.failed, "\n"))
		}
	})
}
