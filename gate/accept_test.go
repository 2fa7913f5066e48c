package gate

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
	"github.com/refill-dev/refill/store/storetest"
)

func findingOf(fs []refill.Finding, check, column string) *refill.Finding {
	for i, f := range fs {
		if f.Check == check && f.Column == column {
			return &fs[i]
		}
	}
	return nil
}

func acceptNow(t *testing.T, st *store.Store, a refill.Acceptance) {
	t.Helper()
	a.At = time.Now()
	if err := st.Update(context.Background(), func(tx *store.Tx) error { return storetest.RecordAccept(context.Background(), tx, a) }); err != nil {
		t.Fatal(err)
	}
}

// TestAcceptancePassesOnlyItsFinding: day 3 lost half its rows and a third
// of its user_ids. Accepting the volume finding passes volume and nothing
// else; an acceptance of not_null on another column passes nothing; once
// the partition changes, the acceptance lapses.
func TestAcceptancePassesOnlyItsFinding(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		data := seasonal(rand.New(rand.NewPCG(14, 1)), 60, 150)
		half := data[day(3)][:len(data[day(3)])/2]
		for i := range half {
			if i%3 == 0 {
				half[i].user = nil
			}
		}
		data[day(3)] = half
		load(t, b.db, data)
		res, err := b.gate.Check(ctx, []string{"ev"}, rangeOf(t, 3, 3))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(failedAt(res), " "); got != "not_null:"+day(3)+":user_id volume:"+day(3) {
			t.Fatalf("failed: %s", got)
		}
		measured := res.Measured[MeasureKey("ev", day(3), CheckVolume, "")]
		if want := "rows=" + itoa(len(half)); measured != want {
			t.Fatalf("volume measured %q, want %q", measured, want)
		}
		acceptNow(t, b.st, refill.Acceptance{Dataset: "ev", Partition: day(3), Check: CheckVolume, By: "carol", Reason: "half-day holiday", Measured: measured})
		acceptNow(t, b.st, refill.Acceptance{Dataset: "ev", Partition: day(3), Check: CheckNotNull, Column: "amount", By: "carol", Reason: "wrong column",
			Measured: res.Measured[MeasureKey("ev", day(3), CheckNotNull, "user_id")]})
		// An acceptance of another partition passes nothing here.
		acceptNow(t, b.st, refill.Acceptance{Dataset: "ev", Partition: day(4), Check: CheckNotNull, Column: "user_id", By: "carol", Reason: "another day",
			Measured: res.Measured[MeasureKey("ev", day(3), CheckNotNull, "user_id")]})

		res, err = b.gate.Check(ctx, []string{"ev"}, rangeOf(t, 3, 3))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(failedAt(res), " "); got != "not_null:"+day(3)+":user_id" || res.Passed {
			t.Fatalf("after accepting volume, failed: %s (passed %v)", got, res.Passed)
		}
		v := findingOf(res.Findings, CheckVolume, "")
		if v == nil || !v.Passed || v.Accepted == nil || v.Accepted.By != "carol" || v.Accepted.Reason != "half-day holiday" {
			t.Fatalf("accepted volume finding: %+v", v)
		}
		if len(res.Flags) != 1 || res.Flags[0].Check != CheckNotNull {
			t.Errorf("flags: an accepted finding flags nothing, a failing one does: %+v", res.Flags)
		}

		b.db.Exec("INSERT INTO ev (day, user_id, amount, event_time, ingested_at) VALUES ('" + day(3) + "', 1, 1, '" + day(3) + " 10:00:00', '" + day(3) + " 10:01:00')")
		res, err = b.gate.Check(ctx, []string{"ev"}, rangeOf(t, 3, 3))
		if err != nil {
			t.Fatal(err)
		}
		v = findingOf(res.Findings, CheckVolume, "")
		if v == nil || v.Passed || v.Accepted != nil || !strings.Contains(v.Message, "lapsed") {
			t.Fatalf("volume after the partition changed: %+v", v)
		}
	})
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestCalendarAndAcceptedDaysLeaveHistory: 31 days of data give day 3
// exactly four same-weekday points (days 10, 17, 24, 31). A calendar day
// or an accepted partition among them leaves history, so day 3 is then
// short of history; a volume failure on a calendar day is a warning that
// says why.
func TestCalendarAndAcceptedDaysLeaveHistory(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		data := seasonal(rand.New(rand.NewPCG(15, 1)), 31, 150)
		data[day(3)] = data[day(3)][:len(data[day(3)])/2]
		load(t, b.db, data)
		vol := func() refill.Finding {
			t.Helper()
			res, err := b.gate.Check(ctx, []string{"ev"}, rangeOf(t, 3, 3))
			if err != nil {
				t.Fatal(err)
			}
			f := findingOf(res.Findings, CheckVolume, "")
			if f == nil {
				t.Fatalf("no volume finding: %+v", res.Findings)
			}
			return *f
		}
		if f := vol(); f.Passed || f.Warning {
			t.Fatalf("half a day passed volume: %+v", f)
		}
		v := b.gate.Config.Datasets["ev"].Checks.Volume
		for _, cal := range []string{day(3), day(3)[5:]} {
			v.Calendar = []string{cal}
			if f := vol(); !f.Passed || !f.Warning || !strings.Contains(f.Message, "on the calendar ("+cal+"), so a warning: ") {
				t.Errorf("calendar %s: %+v", cal, f)
			}
		}
		v.Calendar = []string{day(10)}
		b.gate.Config.Datasets["ev"].Checks.Drift = &refill.DriftCheck{Columns: []string{"amount"}, Lookback: 28, MaxZ: 4}
		if f := vol(); !f.Warning || f.Observed != 3 || !strings.Contains(f.Message, "insufficient history: 3 earlier non-empty") {
			t.Errorf("with day 10 on the calendar, day 3 still had four points: %+v", f)
		}
		res, err := b.gate.Check(ctx, []string{"ev"}, rangeOf(t, 3, 3))
		if err != nil {
			t.Fatal(err)
		}
		if f := findingOf(res.Findings, CheckDrift, "amount"); f == nil || !f.Warning || f.Observed != 3 {
			t.Errorf("drift with day 10 on the calendar: %+v", f)
		}
		b.gate.Config.Datasets["ev"].Checks.Drift = nil
		v.Calendar = nil
		acceptNow(t, b.st, refill.Acceptance{Dataset: "ev", Partition: day(17), Check: CheckVolume, By: "carol", Reason: "launch", Measured: "rows=1"})
		if f := vol(); !f.Warning || f.Observed != 3 {
			t.Errorf("with day 17 accepted, day 3 still had four points: %+v", f)
		}
	})
}

// TestEmptyHourOfAFewRows: an empty day against a positive median always
// fails; an hour that holds two rows on a typical week is empty by chance,
// and fails only when its score says so.
func TestEmptyHourOfAFewRows(t *testing.T) {
	t.Parallel()
	judge := func(g refill.Grain, history []int64, rows int64) []refill.Finding {
		se := refill.TableRef{Grain: g}.Season()
		p := "2026-11-24T10"
		step := 7 * 24 * time.Hour
		if g == refill.GrainDay {
			p = "2026-11-24"
		}
		pt, _ := refill.PartitionTime(p, g)
		v := &volume{check: refill.VolumeCheck{Lookback: 28, MaxZ: 3}, season: se, points: 4, counts: map[string]int64{}}
		for i, n := range history {
			h := refill.FormatPartition(pt.Add(-time.Duration(i+1)*step), g)
			v.before, v.slots = append(v.before, h), append(v.slots, slotOf(se, h))
			v.counts[h] = n
		}
		return v.judge("ev", p, rows)
	}
	if fs := judge(refill.GrainHour, []int64{2, 1, 3, 2}, 0); len(fs) != 0 {
		t.Errorf("an empty hour against 2 rows typical: %+v", fs)
	}
	if fs := judge(refill.GrainHour, []int64{40, 38, 45, 41}, 0); len(fs) != 1 || fs[0].Passed || !strings.Contains(fs[0].Message, "partition is empty") {
		t.Errorf("an empty hour against 40 rows typical: %+v", fs)
	}
	if fs := judge(refill.GrainDay, []int64{2, 1, 3, 2}, 0); len(fs) != 1 || fs[0].Passed {
		t.Errorf("an empty day against 2 rows typical: %+v", fs)
	}
}

func TestZText(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		z, limit float64
		want     string
	}{
		{-3.04, 3, "z = -3.04, limit 3.0"},
		{3.04, 3, "z = 3.04, limit 3.0"},
		{-7.48, 3, "z = -7.5, limit 3.0"},
		{4.21, 4, "z = 4.2, limit 4.0"},
	} {
		if got := zText(c.z, c.limit); got != c.want {
			t.Errorf("zText(%g, %g) = %q, want %q", c.z, c.limit, got, c.want)
		}
	}
}
