package planner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/policy"
	"github.com/refill-dev/refill/store"
)

// proven says every job has a current passing proof, so that only what a
// test adds keeps a plan from auto.
type proven struct{}

func (proven) ProofStatus(context.Context, string, string) (policy.Evidence, error) {
	return policy.Evidence{Exists: true, Current: true}, nil
}

// TestConsumersOutsideRefill: a dataset refill does not manage that
// OpenLineage saw read a dataset the plan rewrites is listed in the plan,
// adds no step, and keeps the plan from auto with a reason naming it;
// a managed reader, a reader of a dataset the plan does not rewrite, and
// an older report of the same consumer change nothing.
func TestConsumersOutsideRefill(t *testing.T) {
	t.Parallel()
	fixtures := append([]string{
		"CREATE TABLE src (day TEXT, v INTEGER)",
		"CREATE TABLE copy (day TEXT, v INTEGER)",
		"CREATE TABLE side (day TEXT, v INTEGER)",
	}, seasonal("src", day("2026-10-01"), day("2026-11-29"), 10, 4)...)
	datasets := map[string]*refill.Dataset{
		"src":  {Table: "src", Partition: refill.PartitionSpec{Column: "day"}},
		"copy": {Table: "copy", Partition: refill.PartitionSpec{Column: "day"}, Upstream: []string{"src"}, Job: &refill.Job{Kind: refill.JobQuery, Query: "SELECT day, v FROM src WHERE day = :partition"}},
		"side": {Table: "side", Partition: refill.PartitionSpec{Column: "day"}, Upstream: []string{"src"}, Job: &refill.Job{Kind: refill.JobQuery, Query: "SELECT day, v FROM src WHERE day = :partition"}},
	}
	each(t, datasets, fixtures, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		b.p.Proofs = proven{}
		before, err := b.p.Plan(ctx, req("copy", "2026-11-25", "2026-11-27"))
		if err != nil {
			t.Fatal(err)
		}
		if before.Tier != refill.TierAuto || len(before.Consumers) != 0 {
			t.Fatalf("before any lineage: tier %s, consumers %v (%v)", before.Tier, before.Consumers, before.Reasons)
		}
		if body, _ := json.Marshal(before); strings.Contains(string(body), "consumers") {
			t.Errorf("a plan without consumers shows the key: %s", body)
		}

		n := func(ns, name string) refill.OpenLineageName { return refill.OpenLineageName{Namespace: ns, Name: name} }
		at := func(d int) time.Time { return time.Date(2026, 11, d, 6, 0, 0, 0, time.UTC) }
		sync := n("metabase", "metabase.sync")
		if _, err := b.st.RecordLineage(ctx, []store.LineageEdge{
			{Input: n("pg", "warehouse.main.copy"), Output: n("bi", "analytics.finance_dashboard"), Job: sync, Producer: "p", FirstSeen: at(29), LastSeen: at(29)},
			{Input: n("other", "copy"), Output: n("bi", "analytics.finance_dashboard"), Job: sync, Producer: "p", FirstSeen: at(20), LastSeen: at(20)},
			{Input: n("pg", "warehouse.main.copy"), Output: n("pg", "warehouse.main.side"), Job: n("af", "side"), Producer: "p", FirstSeen: at(29), LastSeen: at(29)},
			{Input: n("pg", "warehouse.main.src"), Output: n("bi", "raw_dashboard"), Job: sync, Producer: "p", FirstSeen: at(29), LastSeen: at(29)},
			{Input: n("pg", "warehouse.main.side"), Output: n("bi", "side_dashboard"), Job: sync, Producer: "p", FirstSeen: at(29), LastSeen: at(29)},
		}, store.LineageReport{Actor: "ol"}); err != nil {
			t.Fatal(err)
		}
		plan, err := b.p.Plan(ctx, req("copy", "2026-11-25", "2026-11-27"))
		if err != nil {
			t.Fatal(err)
		}
		want := []refill.Consumer{{Dataset: "analytics.finance_dashboard", Namespace: "bi", Reads: "copy", Job: "metabase.sync",
			JobNamespace: "metabase", Producer: "p", LastSeen: at(29)}}
		if !slices.Equal(plan.Consumers, want) {
			t.Errorf("consumers %+v, want %+v", plan.Consumers, want)
		}
		if !slices.Equal(plan.Datasets(), []string{"copy"}) {
			t.Errorf("steps %v: a consumer outside refill added a step", plan.Datasets())
		}
		reason := "copy is read by analytics.finance_dashboard (job metabase.sync, seen 2026-11-29), a consumer outside refill: not rebuilt"
		if plan.Tier != refill.TierSemiAuto || !slices.Contains(plan.Reasons, reason) {
			t.Errorf("tier %s, reasons %q; want semi-auto with %q", plan.Tier, plan.Reasons, reason)
		}
		// Sealed: the stored plan loads with its consumers, and the hash
		// covers them.
		got, err := b.st.Plan(ctx, plan.ID)
		if err != nil || !slices.Equal(got.Consumers, want) {
			t.Fatalf("stored plan: %v, consumers %+v", err, got)
		}
		forged := *got
		forged.Consumers = nil
		if forged.ComputeHash() == got.Hash {
			t.Error("the plan's hash does not cover its consumers")
		}
	})
}

// TestPlansWithoutConsumersHashAsBefore: the hash of a plan with no
// consumers is what refill computed before consumers existed, so plans
// stored earlier still load and their approvals still hold.
func TestPlansWithoutConsumersHashAsBefore(t *testing.T) {
	t.Parallel()
	// hashed as plan.go had it before consumers.
	type hashedBefore struct {
		Request     refill.Request      `json:"request"`
		Tier        refill.Tier         `json:"tier"`
		Reasons     []string            `json:"reasons"`
		Steps       []refill.Step       `json:"steps"`
		Sources     []string            `json:"sources"`
		Gate        refill.GateVerdict  `json:"gate"`
		Policy      refill.Policy       `json:"policy"`
		Seal        int                 `json:"seal,omitempty"`
		SourceSeals []refill.SourceSeal `json:"source_seals,omitempty"`
		Run         *refill.RunSeal     `json:"run,omitempty"`
		Warehouse   string              `json:"warehouse,omitempty"`
	}
	p := &refill.Plan{ID: "p1", Tier: refill.TierAuto, Reasons: []string{"r"}, Request: refill.Request{Targets: []string{"a"}, From: "2026-11-01", To: "2026-11-02", Days: 2},
		Steps: []refill.Step{{Dataset: "a", Order: 1, Kind: refill.JobQuery}}, Policy: refill.DefaultPolicy(), Seal: refill.SealVersion,
		Run: &refill.RunSeal{Tolerance: 0.1}, Warehouse: "sqlite:w.db"}
	b, err := json.Marshal(hashedBefore{p.Request, p.Tier, p.Reasons, p.Steps, p.Sources, p.Gate, p.Policy, p.Seal, p.SourceSeals, p.Run, p.Warehouse})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if want := "sha256:" + hex.EncodeToString(sum[:]); p.ComputeHash() != want {
		t.Errorf("a plan without consumers hashes to %s, before consumers %s", p.ComputeHash(), want)
	}
}

// TestConsumersOfAView: a dashboard reading a lineage-only view over a
// rebuilt table reads rewritten rows too, and is named.
func TestConsumersOfAView(t *testing.T) {
	t.Parallel()
	fixtures := append([]string{
		"CREATE TABLE src (day TEXT, v INTEGER)",
		"CREATE TABLE copy (day TEXT, v INTEGER)",
	}, seasonal("src", day("2026-10-01"), day("2026-11-29"), 10, 4)...)
	datasets := map[string]*refill.Dataset{
		"src":    {Table: "src", Partition: refill.PartitionSpec{Column: "day"}},
		"copy":   {Table: "copy", Partition: refill.PartitionSpec{Column: "day"}, Upstream: []string{"src"}, Job: &refill.Job{Kind: refill.JobQuery, Query: "SELECT day, v FROM src WHERE day = :partition"}},
		"copy_v": {Table: "copy_v", Upstream: []string{"copy"}, LineageOnly: true},
	}
	each(t, datasets, fixtures, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		b.p.Proofs = proven{}
		at := time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)
		if _, err := b.st.RecordLineage(ctx, []store.LineageEdge{{Input: refill.OpenLineageName{Namespace: "pg", Name: "main.copy_v"},
			Output: refill.OpenLineageName{Namespace: "bi", Name: "dash"}, Job: refill.OpenLineageName{Namespace: "bi", Name: "sync"}, FirstSeen: at, LastSeen: at}}, store.LineageReport{Actor: "ol"}); err != nil {
			t.Fatal(err)
		}
		plan, err := b.p.Plan(ctx, req("copy", "2026-11-25", "2026-11-27"))
		if err != nil {
			t.Fatal(err)
		}
		if len(plan.Consumers) != 1 || plan.Consumers[0].Reads != "copy_v" || plan.Tier != refill.TierSemiAuto {
			t.Errorf("consumers %+v, tier %s %q", plan.Consumers, plan.Tier, plan.Reasons)
		}
	})
}
