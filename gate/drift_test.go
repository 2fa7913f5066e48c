package gate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/internal/whtest"
)

// sale is one row of the sales table the drift tests load.
type sale struct {
	day       string
	id        int
	user      int
	eventType string
	currency  string
	amount    float64
}

// sales makes days of clean sales ending the day before now, with weekly
// seasonality (weekends 40% of weekday volume, and a different mix of
// event types), a month-end peak of +20% and ±10% noise.
func sales(rng *rand.Rand, days, weekday int) map[string][]sale {
	out := map[string][]sale{}
	id := 0
	for n := days; n >= 1; n-- {
		d := now.Truncate(24*time.Hour).AddDate(0, 0, -n)
		base := float64(weekday)
		weekend := d.Weekday() == time.Saturday || d.Weekday() == time.Sunday
		if weekend {
			base *= 0.4
		}
		if d.AddDate(0, 0, 1).Day() == 1 {
			base *= 1.2
		}
		key := d.Format("2006-01-02")
		for range int(base * (0.9 + 0.2*rng.Float64())) {
			id++
			typ := "view"
			switch r := rng.Float64(); {
			case weekend && r < 0.3, !weekend && r < 0.45:
				typ = "click"
			case r < 0.6:
				typ = "purchase"
			}
			cur := "KRW"
			if rng.IntN(4) == 0 {
				cur = "USD"
			}
			out[key] = append(out[key], sale{key, id, 1 + rng.IntN(5000), typ, cur, float64(1 + rng.IntN(10000))})
		}
	}
	return out
}

func driftChecks() *refill.Checks {
	return &refill.Checks{
		Volume:         &refill.VolumeCheck{Lookback: 28, MaxZ: 3},
		Unique:         []string{"id"},
		AcceptedValues: &refill.AcceptedValuesCheck{Columns: []refill.AcceptedValues{{Column: "currency", Values: []string{"KRW", "USD"}}}, MaxRatio: 0.01},
		Drift:          &refill.DriftCheck{Columns: []string{"amount", "event_type", "user_id"}, Lookback: 28, MaxZ: 4},
	}
}

// eachSales runs fn against a fresh warehouse of every driver holding
// data in the sales table: the same data and checks, so the same verdicts.
func eachSales(t *testing.T, data map[string][]sale, fn func(t *testing.T, g *Gate)) {
	whtest.Each(t, func(t *testing.T, w *whtest.Warehouse) {
		w.Exec(t, w.Pick(
			`CREATE TABLE sales (day TEXT, id INTEGER, user_id INTEGER, event_type TEXT, currency TEXT, amount REAL)`,
			`CREATE TABLE sales (day date, id integer, user_id integer, event_type text, currency text, amount numeric)`))
		var all []sale
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range data {
				if !yield(k) {
					return
				}
			}
		}) {
			all = append(all, data[k]...)
		}
		for i := 0; i < len(all); i += 500 {
			var vals []string
			for _, s := range all[i:min(i+500, len(all))] {
				vals = append(vals, fmt.Sprintf("('%s', %d, %d, '%s', '%s', %g)", s.day, s.id, s.user, s.eventType, s.currency, s.amount))
			}
			w.Exec(t, "INSERT INTO sales (day, id, user_id, event_type, currency, amount) VALUES "+strings.Join(vals, ","))
		}
		cfg := &refill.Config{Datasets: map[string]*refill.Dataset{
			"sales": {Name: "sales", Table: "sales", Partition: refill.PartitionSpec{Column: "day", Grain: refill.GrainDay}, Checks: driftChecks()},
		}}
		fn(t, &Gate{Config: cfg, Warehouse: w.WH, Now: func() time.Time { return now }})
	})
}

// failedColumns lists "check:partition:column" of the failed findings,
// each once.
func failedColumns(res Result) []string {
	var out []string
	for _, f := range res.Findings {
		if !f.Passed && !f.Warning {
			out = append(out, f.Check+":"+f.Partition+":"+f.Column)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestDriftUniqueAccepted plants one fault per partition in 60 days of
// clean sales and checks each is caught on its partition, by its check and
// column, and nothing else is, on both warehouses.
func TestDriftUniqueAccepted(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(13, 1))
	data := sales(rng, 60, 300)
	for i := range data[day(20)][:7] { // seven ids loaded twice, one of them three times
		data[day(20)] = append(data[day(20)], data[day(20)][i])
	}
	data[day(20)] = append(data[day(20)], data[day(20)][0])
	for i := range data[day(18)] { // 5% in a currency outside the list
		if i%20 == 0 {
			data[day(18)][i].currency = "EUR"
		}
	}
	for i := range data[day(16)] { // every event type remapped
		data[day(16)][i].eventType = "unknown"
	}
	for i := range data[day(14)] { // amounts in cents
		data[day(14)][i].amount *= 100
	}
	for i := range data[day(12)] { // 60% zero amounts
		if i%5 < 3 {
			data[day(12)][i].amount = 0
		}
	}
	for i := range data[day(10)] { // a third of the users collapsed into one
		if i%3 == 0 {
			data[day(10)][i].user = 7
		}
	}
	eachSales(t, data, func(t *testing.T, g *Gate) {
		res, err := g.Check(t.Context(), []string{"sales"}, rangeOf(t, 21, 10))
		if err != nil {
			t.Fatal(err)
		}
		want := []string{
			"accepted_values:" + day(18) + ":currency",
			"drift:" + day(12) + ":amount",
			"drift:" + day(14) + ":amount",
			"drift:" + day(16) + ":event_type",
			"drift:" + day(10) + ":user_id",
			"unique:" + day(20) + ":id",
		}
		slices.Sort(want)
		if got := failedColumns(res); !slices.Equal(got, want) {
			t.Errorf("failed findings:\n got %v\nwant %v", got, want)
		}
		msgs := map[string]string{}
		for _, f := range res.Findings {
			if !f.Passed {
				msgs[f.Check+":"+f.Partition] += f.Message + "\n"
			}
		}
		for key, mention := range map[string][]string{
			"unique:" + day(20):          {fmt.Sprintf("15 of %d rows share a key", len(data[day(20)])), "7 duplicated keys", "up to 3 rows on one key", "(id) = ("},
			"accepted_values:" + day(18): {"non-null rows hold a value outside [KRW, USD]", "limit 1.00%"},
			"drift:" + day(16):           {"event_type: top value share 100% (history"},
			"drift:" + day(14):           {"amount: mean"},
			"drift:" + day(12):           {"amount: zero share 60% (history 0%"},
			"drift:" + day(10):           {"user_id: top value share 33% (history 1%", "user_id: distinct values"},
		} {
			for _, m := range mention {
				if !strings.Contains(msgs[key], m) {
					t.Errorf("%s: messages %q do not mention %q", key, msgs[key], m)
				}
			}
		}
	})
}

// TestDriftCleanDataRarelyFlags checks false alarms of every check on 90
// days of clean sales (weekly seasonality, a month-end peak of +20%, ±10%
// noise) stay at or under 1% of partitions: none of 62.
func TestDriftCleanDataRarelyFlags(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(2026, 13))
	eachSales(t, sales(rng, 90, 300), func(t *testing.T, g *Gate) {
		res, err := g.Check(t.Context(), []string{"sales"}, rangeOf(t, 62, 1))
		if err != nil {
			t.Fatal(err)
		}
		flagged := map[string]bool{}
		for _, f := range res.Findings {
			if !f.Passed && !f.Warning {
				flagged[f.Partition] = true
			}
			if f.Warning {
				t.Errorf("warning on clean data with history: %v", f)
			}
		}
		t.Logf("%d of 62 clean partitions flagged", len(flagged))
		if len(flagged) > 0 {
			t.Errorf("%d of 62 clean partitions flagged: %v", len(flagged), failedColumns(res))
		}
	})
}

// TestDriftInsufficientHistoryWarns checks a range without history warns
// (shown, not passed for auto) instead of passing silently.
func TestDriftInsufficientHistoryWarns(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	eachSales(t, sales(rng, 10, 100), func(t *testing.T, g *Gate) {
		res, err := g.Check(context.Background(), []string{"sales"}, rangeOf(t, 3, 1))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, f := range res.Findings {
			if f.Check == CheckDrift && f.Warning && strings.Contains(f.Message, "insufficient history") {
				n++
			}
		}
		if n != 3 {
			t.Errorf("%d drift warnings for 3 partitions without history: %v", n, res.Findings)
		}
	})
}
