package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
)

// exercisePlans covers how plans are recorded and read back beyond a single
// plan: a plan recorded with its gate's evidence in one transaction, the
// same writes made by a caller's transaction, several plans loaded at once,
// the counts the metrics report, and the plans over a range of partitions.
func exercisePlans(t *testing.T, setup func(t *testing.T) (*store.Store, string)) {
	t.Run("RecordPlanCommitsTogether", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		cols := []refill.Column{{Name: "id", Type: "integer"}}
		kinds := func(planID string) []string {
			t.Helper()
			evs, err := s.Audit(ctx, store.AuditFilter{PlanID: planID})
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, e := range evs {
				out = append(out, strings.TrimSpace(string(e.Kind)+" "+e.Dataset+" "+e.Partition))
			}
			return out
		}

		a := planFor("p-a", at(0), "orders", "2026-11-01", "2026-11-02")
		superseded, err := s.RecordPlan(ctx, refill.PlanRecord{Plan: a,
			Schemas: []refill.SchemaSnapshot{{Dataset: "raw_orders", Columns: cols}},
			Flags:   []refill.Flag{{Dataset: "raw_orders", Partition: "2026-11-02", Check: "volume"}}})
		if err != nil || len(superseded) != 0 {
			t.Fatalf("RecordPlan(a) = %v, %v; want nothing superseded", superseded, err)
		}
		if got, err := s.Plan(ctx, a.ID); err != nil || !reflect.DeepEqual(got, a) {
			t.Fatalf("Plan(a) = %+v, %v", got, err)
		}
		if snap, ok, _ := s.LatestSchema(ctx, "raw_orders"); !ok || snap.PlanID != a.ID || !reflect.DeepEqual(snap.Columns, cols) {
			t.Errorf("the schema a's gate saw: %+v, %v; want it under plan %s", snap, ok, a.ID)
		}
		if got, _ := s.Flagged(ctx, "raw_orders"); !reflect.DeepEqual(got, map[string]bool{"2026-11-02": true}) {
			t.Errorf("Flagged = %v", got)
		}
		if got, want := kinds(a.ID), []string{"plan_created", "gate_result", "gate_result raw_orders 2026-11-02"}; !slices.Equal(got, want) {
			t.Errorf("a's audit entries = %q, want %q", got, want)
		}

		// The same request with other content supersedes a.
		b := planFor("p-b", at(1), "orders", "2026-11-01", "2026-11-02")
		b.Request.Reason = "the inputs changed"
		b.Hash = b.ComputeHash()
		superseded, err = s.RecordPlan(ctx, refill.PlanRecord{Plan: b})
		if err != nil || !slices.Equal(superseded, []string{a.ID}) {
			t.Fatalf("RecordPlan(b) = %v, %v; want [%s]", superseded, err, a.ID)
		}
		if got, _ := s.Plan(ctx, a.ID); got.Status != refill.StatusSuperseded {
			t.Errorf("a is %s after b, want superseded", got.Status)
		}
		if evs, _ := s.Audit(ctx, store.AuditFilter{PlanID: a.ID, Kind: refill.EventSuperseded}); len(evs) != 1 || detail(t, evs[0])["by"] != b.ID {
			t.Errorf("a's superseded entries = %+v, want one by %s", evs, b.ID)
		}

		// A record that fails part-way leaves nothing: not the plan, not
		// the supersession, not an entry.
		before, _ := s.AuditHead(ctx)
		c := planFor("p-c", at(2), "orders", "2026-11-01", "2026-11-02")
		c.Request.Reason = "changed again"
		c.Hash = c.ComputeHash()
		if _, err := s.RecordPlan(ctx, refill.PlanRecord{Plan: c, Schemas: []refill.SchemaSnapshot{{Columns: cols}}}); err == nil {
			t.Fatal("RecordPlan with a schema of no dataset succeeded")
		}
		if _, err := s.Plan(ctx, c.ID); !errors.Is(err, refill.ErrNotFound) {
			t.Errorf("a failed record stored its plan: %v", err)
		}
		if got, _ := s.Plan(ctx, b.ID); got.Status != refill.StatusPending {
			t.Errorf("a failed record superseded b: %s", got.Status)
		}
		if after, _ := s.AuditHead(ctx); after != before {
			t.Errorf("a failed record wrote audit entries: head %+v, was %+v", after, before)
		}

		if _, err := s.RecordPlan(ctx, refill.PlanRecord{Plan: a}); !errors.Is(err, refill.ErrNotPermitted) {
			t.Errorf("recording a twice: %v, want not permitted", err)
		}

		// The same targets and range, narrowed by selectors, are another
		// request: neither supersedes the other; the same selectors do.
		narrow := func(id string, n int) *refill.Plan {
			p := planFor(id, at(3+n), "orders", "2026-11-01", "2026-11-02")
			p.Request.Select, p.Request.NoDownstream = []string{"orders"}, true
			p.Request.Reason = fmt.Sprintf("narrow %d", n)
			p.Hash = p.ComputeHash()
			return p
		}
		d1 := narrow("p-d1", 1)
		if superseded, err := s.RecordPlan(ctx, refill.PlanRecord{Plan: d1}); err != nil || len(superseded) != 0 {
			t.Errorf("RecordPlan(orders --no-downstream) = %v, %v; want the plain plan b left alone", superseded, err)
		}
		if got, _ := s.Plan(ctx, b.ID); got.Status != refill.StatusPending {
			t.Errorf("a narrowed plan superseded b: %s", got.Status)
		}
		if superseded, err := s.RecordPlan(ctx, refill.PlanRecord{Plan: narrow("p-d2", 2)}); err != nil || !slices.Equal(superseded, []string{d1.ID}) {
			t.Errorf("RecordPlan(orders --no-downstream again) = %v, %v; want [%s]", superseded, err, d1.ID)
		}
	})

	t.Run("TxWritesCommitTogether", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		p := planFor("p-tx", at(0), "orders", "2026-11-01")
		proof := &refill.Proof{Dataset: "orders", Partition: "2026-11-01", Kind: refill.JobSQL, Fingerprint: "sha256:a", Passed: true,
			Warehouse: "warehouse", ProvenAt: at(1), ProvenBy: "alice"}
		write := func(tx *store.Tx) error {
			if err := RecordPlanRow(ctx, tx, p); err != nil {
				return err
			}
			if err := tx.SaveSchemas(ctx, []refill.SchemaSnapshot{{Dataset: "orders", PlanID: p.ID, Columns: []refill.Column{{Name: "id", Type: "integer"}}}}); err != nil {
				return err
			}
			if err := RecordFlags(ctx, tx, []refill.Flag{{Dataset: "orders", Partition: "2026-11-01", Check: "not_null", PlanID: p.ID}}); err != nil {
				return err
			}
			return tx.SaveProof(ctx, proof)
		}

		boom := errors.New("the caller failed after its writes")
		if err := s.Update(ctx, func(tx *store.Tx) error {
			if err := write(tx); err != nil {
				return err
			}
			return boom
		}); !errors.Is(err, boom) {
			t.Fatalf("Update = %v", err)
		}
		if _, err := s.Plan(ctx, p.ID); !errors.Is(err, refill.ErrNotFound) {
			t.Errorf("the plan of a failed transaction: %v", err)
		}
		if _, ok, _ := s.LatestSchema(ctx, "orders"); ok {
			t.Error("the schema of a failed transaction was kept")
		}
		if got, _ := s.Flagged(ctx, "orders"); len(got) != 0 {
			t.Errorf("the flags of a failed transaction were kept: %v", got)
		}
		if got, _ := s.Audit(ctx, store.AuditFilter{}); len(got) != 0 {
			t.Errorf("the audit entries of a failed transaction were kept: %+v", got)
		}

		if err := s.Update(ctx, write); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Plan(ctx, p.ID); err != nil {
			t.Error(err)
		}
		if snap, ok, _ := s.LatestSchema(ctx, "orders"); !ok || snap.PlanID != p.ID {
			t.Errorf("LatestSchema = %+v, %v", snap, ok)
		}
		if got, _ := s.Flagged(ctx, "orders"); !got["2026-11-01"] {
			t.Errorf("Flagged = %v", got)
		}
		// Proofs lists only proofs the audit log records: the entry came
		// with the proof.
		if got, err := s.Proofs(ctx, "orders"); err != nil || len(got) != 1 || got[0].ProvenBy != "alice" {
			t.Errorf("Proofs = %+v, %v", got, err)
		}
		if err := s.Update(ctx, func(tx *store.Tx) error { return tx.SaveProof(ctx, &refill.Proof{Dataset: "orders"}) }); err == nil {
			t.Error("a proof without a fingerprint was saved in a transaction")
		}
	})

	t.Run("PlansByIDInTheOrderAsked", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		p1 := planOver(t, s, "p-1", at(0), "orders", "2026-11-01")
		p2 := planOver(t, s, "p-2", at(1), "orders", "2026-11-02")
		p3 := planOver(t, s, "p-3", at(2), "customers", "2026-11-01")
		if err := s.SetStatus(ctx, p3.ID, refill.StatusPending, refill.StatusApproved); err != nil {
			t.Fatal(err)
		}
		p3.Status = refill.StatusApproved

		if got, err := s.PlansByID(ctx, nil); err != nil || got != nil {
			t.Errorf("PlansByID(nil) = %v, %v", got, err)
		}
		got, err := s.PlansByID(ctx, []string{p3.ID, p1.ID, p2.ID, p1.ID})
		if err != nil {
			t.Fatal(err)
		}
		if want := []*refill.Plan{p3, p1, p2, p1}; !reflect.DeepEqual(got, want) {
			t.Errorf("PlansByID = %+v\nwant %+v", got, want)
		}
		_, err = s.PlansByID(ctx, []string{p1.ID, "p-missing"})
		if !errors.Is(err, refill.ErrNotFound) || !strings.Contains(err.Error(), "p-missing") {
			t.Errorf("PlansByID with an unknown ID: %v, want not found naming it", err)
		}
		if _, err := s.DB().ExecContext(ctx, `UPDATE plans SET body = replace(body, '"to":"2026-11-03"', '"to":"2026-12-31"') WHERE id = 'p-2'`); err != nil {
			t.Fatal(err)
		}
		_, err = s.PlansByID(ctx, []string{p1.ID, p2.ID})
		if !errors.Is(err, refill.ErrVerification) || !strings.Contains(err.Error(), "p-2") {
			t.Errorf("PlansByID with an altered plan: %v, want a verification error naming it", err)
		}
	})

	t.Run("PlanCountsByTierAndStatus", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		if got, err := s.PlanCounts(ctx); err != nil || len(got) != 0 {
			t.Fatalf("PlanCounts of an empty store = %v, %v", got, err)
		}
		for i, c := range []struct {
			tier   refill.Tier
			status refill.Status
		}{
			{refill.TierSemiAuto, refill.StatusPending},
			{refill.TierAuto, refill.StatusPending},
			{refill.TierManual, refill.StatusBlocked},
			{refill.TierAuto, refill.StatusPending},
			{refill.TierSemiAuto, refill.StatusApproved},
		} {
			p := newPlan("p-"+string(rune('a'+i)), at(i))
			p.Tier, p.Status = c.tier, c.status
			p.Hash = p.ComputeHash()
			mustSave(t, s, p)
		}
		advance(t, s, "p-a", refill.StatusPending, refill.StatusApplied)
		got, err := s.PlanCounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []store.PlanCount{
			{Tier: refill.TierAuto, Status: refill.StatusPending, Plans: 2},
			{Tier: refill.TierManual, Status: refill.StatusBlocked, Plans: 1},
			{Tier: refill.TierSemiAuto, Status: refill.StatusApplied, Plans: 1},
			{Tier: refill.TierSemiAuto, Status: refill.StatusApproved, Plans: 1},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("PlanCounts = %+v\nwant %+v", got, want)
		}
	})

	t.Run("PlansTouchingNewestFirst", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		planOver(t, s, "p-1", at(0), "orders", "2026-11-01", "2026-11-02")
		planOver(t, s, "p-2", at(1), "orders", "2026-11-03")
		planOver(t, s, "p-3", at(2), "customers", "2026-11-02")
		p4 := planFor("p-4", at(3), "orders", "2026-11-02", "2026-11-05")
		p4.Tier, p4.Request.RequestedBy, p4.Request.From, p4.Request.To = refill.TierManual, "bob", "2026-11-02", "2026-11-05"
		p4.Hash = p4.ComputeHash()
		mustSave(t, s, p4)
		advance(t, s, "p-1", refill.StatusPending, refill.StatusApplied)
		ids := func(dataset, from, to string) []string {
			t.Helper()
			got, err := s.PlansTouching(ctx, dataset, from, to)
			if err != nil {
				t.Fatal(err)
			}
			out := []string{}
			for _, pt := range got {
				out = append(out, pt.PlanID)
			}
			return out
		}
		for _, c := range []struct {
			dataset, from, to string
			want              []string
		}{
			{"orders", "2026-11-02", "2026-11-03", []string{"p-4", "p-2", "p-1"}},
			{"orders", "2026-11-01", "2026-11-30", []string{"p-4", "p-2", "p-1"}},
			// p-4's request spans 11-04 but it rebuilds no such partition.
			{"orders", "2026-11-04", "2026-11-04", []string{}},
			{"orders", "2026-11-05", "2026-11-09", []string{"p-4"}},
			{"customers", "2026-11-01", "2026-11-03", []string{"p-3"}},
			{"missing", "2026-11-01", "2026-11-30", []string{}},
		} {
			if got := ids(c.dataset, c.from, c.to); !slices.Equal(got, c.want) {
				t.Errorf("PlansTouching(%s, %s, %s) = %v, want %v", c.dataset, c.from, c.to, got, c.want)
			}
		}
		got, err := s.PlansTouching(ctx, "orders", "2026-11-01", "2026-11-05")
		if err != nil || len(got) != 3 {
			t.Fatalf("PlansTouching = %+v, %v", got, err)
		}
		wantFirst := store.PlanTouch{PlanID: "p-4", Status: refill.StatusPending, Tier: refill.TierManual, RequestedBy: "bob", From: "2026-11-02", To: "2026-11-05"}
		wantLast := store.PlanTouch{PlanID: "p-1", Status: refill.StatusApplied, Tier: refill.TierSemiAuto, RequestedBy: "ana", From: "2026-11-01", To: "2026-11-03"}
		if got[0] != wantFirst || got[2] != wantLast {
			t.Errorf("PlansTouching = %+v, want %+v first and %+v last", got, wantFirst, wantLast)
		}
	})
}

// detail decodes an audit entry's detail.
func detail(t *testing.T, e refill.Event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Detail, &m); err != nil {
		t.Fatalf("entry %d's detail %s: %v", e.Seq, e.Detail, err)
	}
	return m
}
