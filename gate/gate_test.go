package gate

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/internal/whtest"
	"github.com/refill-dev/refill/store"
	"github.com/refill-dev/refill/store/storetest"
)

// now is the clock of every test: data runs up to the day before.
var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

type bundle struct {
	gate   *Gate
	db     *sql.DB
	driver string
	st     *store.Store
}

func checks() *refill.Checks {
	return &refill.Checks{
		NotNull:   &refill.NotNullCheck{Columns: []string{"user_id", "amount"}, MaxRatio: 0.01},
		Volume:    &refill.VolumeCheck{Lookback: 28, MaxZ: 3},
		TimeOrder: []refill.TimeOrderCheck{{Earlier: "event_time", Later: "ingested_at"}},
		NoFuture:  []string{"event_time"},
	}
}

// each runs fn against a fresh warehouse of every driver, holding the
// events table ev.
func each(t *testing.T, fn func(t *testing.T, b *bundle)) {
	whtest.Each(t, func(t *testing.T, w *whtest.Warehouse) {
		w.Exec(t, w.Pick(
			`CREATE TABLE ev (day TEXT, user_id INTEGER, amount REAL, event_time TIMESTAMP, ingested_at TIMESTAMP)`,
			`CREATE TABLE ev (day date, user_id integer, amount numeric, event_time timestamptz, ingested_at timestamptz)`))
		st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "state.db"), "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		cfg := &refill.Config{Datasets: map[string]*refill.Dataset{
			"ev": {Name: "ev", Table: "ev", Partition: refill.PartitionSpec{Column: "day", Grain: refill.GrainDay}, Checks: checks()},
		}}
		g := &Gate{Config: cfg, Warehouse: w.WH, Store: st, Now: func() time.Time { return now }}
		fn(t, &bundle{gate: g, db: w.DB, driver: w.Driver, st: st})
	})
}

// row is one event; times are UTC text both drivers read.
type row struct {
	day             string
	user            any
	amount          any
	event, ingested time.Time
}

// seasonal makes days of clean events ending the day before now: weekdays
// `weekday` rows, weekends 40% of that, each ±10%.
func seasonal(rng *rand.Rand, days, weekday int) map[string][]row {
	out := map[string][]row{}
	for n := days; n >= 1; n-- {
		d := now.Truncate(24*time.Hour).AddDate(0, 0, -n)
		base := float64(weekday)
		if d.Weekday() == time.Saturday || d.Weekday() == time.Sunday {
			base *= 0.4
		}
		count := int(base * (0.9 + 0.2*rng.Float64()))
		key := d.Format("2006-01-02")
		for i := 0; i < count; i++ {
			ev := d.Add(time.Duration(rng.IntN(86000)) * time.Second)
			out[key] = append(out[key], row{key, 1 + rng.IntN(1000), float64(rng.IntN(10000)) / 100, ev, ev.Add(time.Duration(1+rng.IntN(300)) * time.Second)})
		}
	}
	return out
}

func load(t *testing.T, db *sql.DB, data map[string][]row) {
	t.Helper()
	var all []row
	for _, rs := range data {
		all = append(all, rs...)
	}
	const ts = "2006-01-02 15:04:05"
	for i := 0; i < len(all); i += 400 {
		batch := all[i:min(i+400, len(all))]
		var vals []string
		for _, r := range batch {
			vals = append(vals, fmt.Sprintf("('%s', %s, %s, '%s', '%s')", r.day, lit(r.user), lit(r.amount), r.event.Format(ts), r.ingested.Format(ts)))
		}
		if _, err := db.Exec("INSERT INTO ev (day, user_id, amount, event_time, ingested_at) VALUES " + strings.Join(vals, ",")); err != nil {
			t.Fatal(err)
		}
	}
}

func lit(v any) string {
	if v == nil {
		return "NULL"
	}
	return fmt.Sprint(v)
}

func day(n int) string { return now.Truncate(24*time.Hour).AddDate(0, 0, -n).Format("2006-01-02") }

func rangeOf(t *testing.T, from, to int) refill.Range {
	r, err := refill.ParseRange(day(from), day(to), 0)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// failedAt lists "check:partition[:column]" of the failed findings.
func failedAt(res Result) []string {
	var out []string
	for _, f := range res.Findings {
		if !f.Passed && !f.Warning {
			k := f.Check + ":" + f.Partition
			if f.Column != "" {
				k += ":" + f.Column
			}
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// TestVerdicts injects one fault per partition into 60 days of clean data
// and checks the gate finds each fault on its partition and nothing else.
func TestVerdicts(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b *bundle) {
		rng := rand.New(rand.NewPCG(7, 11))
		data := seasonal(rng, 60, 200)
		// A null spike in user_id.
		for i := range data[day(20)] {
			if i%3 == 0 {
				data[day(20)][i].user = nil
			}
		}
		data[day(19)] = data[day(19)][:len(data[day(19)])*3/10]                           // volume drop to 30%
		data[day(18)] = append(append(data[day(18)], data[day(18)]...), data[day(18)]...) // spike to 300%
		delete(data, day(17))                                                             // an empty partition
		inverted := 0
		for i := range data[day(16)] { // 2% inverted timestamps
			if i%50 == 0 {
				inverted++
				r := &data[day(16)][i]
				r.event, r.ingested = r.ingested, r.event
			}
		}
		for i := range data[day(15)][:5] { // a few events from the future
			data[day(15)][i].event = now.Add(48 * time.Hour)
			data[day(15)][i].ingested = now.Add(49 * time.Hour)
		}
		data[day(12)] = append(data[day(12)], data[day(12)]...) // a duplicated load
		load(t, b.db, data)

		res, err := b.gate.Check(context.Background(), []string{"ev"}, rangeOf(t, 21, 10))
		if err != nil {
			t.Fatal(err)
		}
		got := failedAt(res)
		want := []string{
			"no_future:" + day(15) + ":event_time",
			"not_null:" + day(20) + ":user_id",
			"time_order:" + day(16) + ":event_time>ingested_at",
			"volume:" + day(12),
			"volume:" + day(17),
			"volume:" + day(18),
			"volume:" + day(19),
		}
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Errorf("failed findings:\n got %v\nwant %v", got, want)
		}
		if res.Passed {
			t.Error("the gate passed")
		}
		for _, f := range res.Findings {
			switch {
			case f.Check == CheckNotNull && (f.Observed < 0.33 || f.Observed > 0.34 || f.Limit != 0.01):
				t.Errorf("null ratio observed %v limit %v, want ~0.333 and 0.01", f.Observed, f.Limit)
			case f.Check == CheckTimeOrder && f.Observed != round(float64(inverted)/float64(len(data[day(16)]))):
				t.Errorf("inversion ratio %v, want %d/%d", f.Observed, inverted, len(data[day(16)]))
			case f.Check == CheckVolume && f.Partition == day(19) && f.Observed > -3:
				t.Errorf("drop to 30%% scored z=%v, want below -3", f.Observed)
			case f.Check == CheckVolume && f.Partition == day(18) && f.Observed < 3:
				t.Errorf("spike to 300%% scored z=%v, want above 3", f.Observed)
			}
		}
		// Flags are what Check reports for the plan to store: every failed
		// partition but the future-timestamp one, which depends on the
		// clock and so never leaves volume history.
		if len(res.Flags) != len(want)-1 {
			t.Errorf("flags = %v", res.Flags)
		}
		for _, f := range res.Flags {
			if f.Check == CheckNoFuture {
				t.Errorf("a no_future failure became a flag: %v", f)
			}
		}
	})
}

// TestCleanDataRarelyFlags checks false alarms on clean seasonal data with
// ±10% noise stay at or under 1% of partitions.
func TestCleanDataRarelyFlags(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b *bundle) {
		rng := rand.New(rand.NewPCG(2026, 1))
		load(t, b.db, seasonal(rng, 90, 150))
		res, err := b.gate.Check(context.Background(), []string{"ev"}, rangeOf(t, 62, 1))
		if err != nil {
			t.Fatal(err)
		}
		flagged := map[string]bool{}
		for _, f := range res.Findings {
			if !f.Passed && !f.Warning {
				flagged[f.Partition] = true
			}
		}
		if len(flagged) > 0 { // 62 partitions: 1% allows none
			t.Errorf("%d of 62 clean partitions flagged: %v", len(flagged), failedAt(res))
		}
		if !res.Passed {
			t.Error("clean data did not pass")
		}
	})
}

func TestInsufficientHistoryWarnsAndFlaggedHistoryIsSkipped(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b *bundle) {
		rng := rand.New(rand.NewPCG(3, 3))
		data := seasonal(rng, 50, 100)
		load(t, b.db, data)
		ctx := context.Background()
		// Only 20 days of history before the range: not 4 same-weekday points.
		short, err := b.gate.Check(ctx, []string{"ev"}, rangeOf(t, 30, 28))
		if err != nil {
			t.Fatal(err)
		}
		warnings := 0
		for _, f := range short.Findings {
			if f.Warning && f.Check == CheckVolume && strings.Contains(f.Message, "insufficient history") {
				warnings++
			}
		}
		if warnings != 3 || !short.Passed {
			t.Errorf("want 3 insufficient-history warnings and a pass, got %d (passed %v): %+v", warnings, short.Passed, short.Findings)
		}
		// Flag the same weekday one, two, three and four weeks back: the
		// history walks past them, so a partition is still scored against
		// four clean points rather than failing for lack of them.
		var flags []refill.Flag
		for _, n := range []int{8, 15} {
			flags = append(flags, refill.Flag{Dataset: "ev", Partition: day(n), Check: CheckVolume})
		}
		// Each flag has its audit entry, as a plan records it.
		for i := range flags {
			flags[i].PlanID = "p1"
		}
		if err := b.st.Update(ctx, func(tx *store.Tx) error { return storetest.RecordFlags(ctx, tx, flags) }); err != nil {
			t.Fatal(err)
		}
		res, err := b.gate.Check(ctx, []string{"ev"}, rangeOf(t, 1, 1))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range res.Findings {
			if f.Warning {
				t.Errorf("history skipping flagged partitions ran short: %+v", f)
			}
		}
	})
}

func TestSchemaDrift(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		load(t, b.db, seasonal(rand.New(rand.NewPCG(1, 1)), 3, 10))
		first, err := b.gate.Check(ctx, []string{"ev"}, rangeOf(t, 1, 1))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.st.Update(ctx, func(tx *store.Tx) error { return storetest.RecordSeen(ctx, tx, "p1", withPlan(first.Schemas, "p1")) }); err != nil {
			t.Fatal(err)
		}
		alter := []string{"ALTER TABLE ev DROP COLUMN amount", "ALTER TABLE ev ADD COLUMN amount_cents INTEGER"}
		if b.driver != "sqlite" {
			alter = append(alter, "ALTER TABLE ev ALTER COLUMN user_id TYPE text")
		} else {
			// SQLite cannot retype a column in place: rebuild the table.
			alter = append(alter,
				"CREATE TABLE ev2 (day TEXT, user_id TEXT, event_time TIMESTAMP, ingested_at TIMESTAMP, amount_cents INTEGER)",
				"INSERT INTO ev2 SELECT day, user_id, event_time, ingested_at, amount_cents FROM ev",
				"DROP TABLE ev", "ALTER TABLE ev2 RENAME TO ev")
		}
		for _, q := range alter {
			if _, err := b.db.Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		b.gate.Config.Datasets["ev"].Checks = nil // amount is gone; drift alone
		res, err := b.gate.Check(ctx, []string{"ev"}, rangeOf(t, 1, 1))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range res.Findings {
			if f.Check == CheckSchemaDrift && !f.Passed {
				got = append(got, f.Column+": "+f.Message)
			}
		}
		sort.Strings(got)
		if len(got) != 3 || !strings.Contains(got[0], "column amount (") || !strings.Contains(got[0], "was dropped since the schema first recorded (plan p1)") ||
			!strings.Contains(got[1], "amount_cents") || !strings.Contains(got[1], "was added") ||
			!strings.Contains(got[2], "user_id changed type from integer to "+map[bool]string{true: "varchar", false: "text"}[b.driver == "duckdb"]) {
			t.Errorf("drift findings = %q", got)
		}
		if res.Passed {
			t.Error("schema drift passed the gate")
		}
	})
}

func withPlan(s []refill.SchemaSnapshot, id string) []refill.SchemaSnapshot {
	for i := range s {
		s[i].PlanID = id
	}
	return s
}

func TestBadChecks(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b *bundle) {
		d := b.gate.Config.Datasets["ev"]
		for _, c := range []struct {
			checks *refill.Checks
			want   string
		}{
			{&refill.Checks{NotNull: &refill.NotNullCheck{Columns: []string{"nope"}}}, "nope"},
			{&refill.Checks{NoFuture: []string{"user_id"}}, "user_id"},
			{&refill.Checks{TimeOrder: []refill.TimeOrderCheck{{Earlier: "amount", Later: "event_time"}}}, "amount"},
		} {
			d.Checks = c.checks
			_, err := b.gate.Check(context.Background(), []string{"ev"}, rangeOf(t, 2, 1))
			if refill.ExitCode(err) != refill.ExitBadInput || !strings.Contains(err.Error(), c.want) {
				t.Errorf("checks %+v: err = %v, want bad input naming %s", c.checks, err, c.want)
			}
		}
	})
}
