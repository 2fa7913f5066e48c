package gate

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/internal/whtest"
)

// memStore is the gate's Store held in memory: what the state store
// would answer, with no database behind it.
type memStore struct {
	baseline map[string][]refill.Column
	flagged  map[string]bool
	accepted []refill.Acceptance
}

func (m *memStore) SchemaBaseline(_ context.Context, dataset string) (refill.SchemaSnapshot, bool, error) {
	cols, ok := m.baseline[dataset]
	return refill.SchemaSnapshot{Dataset: dataset, Columns: cols, PlanID: "p0"}, ok, nil
}

func (m *memStore) Flagged(context.Context, string) (map[string]bool, error) {
	out := map[string]bool{}
	for p, v := range m.flagged {
		out[p] = v
	}
	return out, nil
}

func (m *memStore) Acceptances(_ context.Context, dataset, _ string) ([]refill.Acceptance, error) {
	var out []refill.Acceptance
	for _, a := range m.accepted {
		if a.Dataset == dataset {
			out = append(out, a)
		}
	}
	return out, nil
}

// TestRulesOverASmallStore: the gate's rules that depend on history — a
// schema judged against its baseline, an acceptance passing exactly its
// finding — hold over any Store, here one in memory.
func TestRulesOverASmallStore(t *testing.T) {
	t.Parallel()
	whtest.Each(t, func(t *testing.T, w *whtest.Warehouse) {
		ctx := context.Background()
		w.Exec(t, w.Pick(
			`CREATE TABLE ev (day TEXT, user_id INTEGER, amount REAL, event_time TIMESTAMP, ingested_at TIMESTAMP)`,
			`CREATE TABLE ev (day date, user_id integer, amount numeric, event_time timestamptz, ingested_at timestamptz)`))
		data := seasonal(rand.New(rand.NewPCG(21, 1)), 60, 150)
		half := data[day(3)][:len(data[day(3)])/2]
		data[day(3)] = half
		load(t, w.DB, data)
		cfg := &refill.Config{Datasets: map[string]*refill.Dataset{
			"ev": {Name: "ev", Table: "ev", Partition: refill.PartitionSpec{Column: "day", Grain: refill.GrainDay}, Checks: checks()},
		}}
		ms := &memStore{}
		g := &Gate{Config: cfg, Warehouse: w.WH, Store: ms, Now: func() time.Time { return now }}

		res, err := g.Check(ctx, []string{"ev"}, rangeOf(t, 3, 3))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(failedAt(res), " "); got != "volume:"+day(3) {
			t.Fatalf("before: failed %q, want the volume of %s", got, day(3))
		}
		// A baseline missing a column the table has now is drift.
		ms.baseline = map[string][]refill.Column{"ev": {}}
		for _, c := range res.Schemas {
			for _, col := range c.Columns {
				if col.Name != "ingested_at" {
					ms.baseline["ev"] = append(ms.baseline["ev"], col)
				}
			}
		}
		if len(ms.baseline["ev"]) != 4 {
			t.Fatalf("schema seen: %+v", res.Schemas)
		}
		ms.accepted = []refill.Acceptance{{Dataset: "ev", Partition: day(3), Check: CheckVolume, By: "carol", Reason: "half-day holiday",
			Measured: res.Measured[MeasureKey("ev", day(3), CheckVolume, "")], At: now}}
		res, err = g.Check(ctx, []string{"ev"}, rangeOf(t, 3, 3))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(failedAt(res), " "); got != "schema_drift::ingested_at" {
			t.Fatalf("after: failed %q, want the added column as drift and volume accepted", got)
		}
		v := findingOf(res.Findings, CheckVolume, "")
		if v == nil || !v.Passed || v.Accepted == nil || v.Accepted.By != "carol" {
			t.Fatalf("the accepted volume finding: %+v", v)
		}
	})
}
