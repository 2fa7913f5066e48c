package storetest

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
)

// planOver saves a pending plan over dataset's partitions parts, made at
// created, requested by ana; it returns the plan.
func planOver(t *testing.T, s *store.Store, id string, created time.Time, dataset string, parts ...string) *refill.Plan {
	t.Helper()
	p := planFor(id, created, dataset, parts...)
	mustSave(t, s, p)
	return p
}

// planFor is planOver's plan, not saved.
// advance moves a plan's status from `from` to `to` along the shortest
// path the state machine allows (refill.Status.CanBecome), as runs and
// decisions would, one SetStatus at a time.
func advance(t *testing.T, s *store.Store, id string, from, to refill.Status) {
	t.Helper()
	prev := map[refill.Status]refill.Status{from: from}
	queue := []refill.Status{from}
	for len(queue) > 0 && prev[to] == "" {
		cur := queue[0]
		queue = queue[1:]
		for _, next := range refill.Statuses {
			if _, seen := prev[next]; !seen && cur.CanBecome(next) {
				prev[next] = cur
				queue = append(queue, next)
			}
		}
	}
	if _, ok := prev[to]; !ok {
		t.Fatalf("no way from %s to %s", from, to)
	}
	var path []refill.Status
	for st := to; st != from; st = prev[st] {
		path = append([]refill.Status{st}, path...)
	}
	cur := from
	for _, next := range path {
		if err := s.SetStatus(t.Context(), id, cur, next); err != nil {
			t.Fatal(err)
		}
		cur = next
	}
}

func planFor(id string, created time.Time, dataset string, parts ...string) *refill.Plan {
	p := newPlan(id, created)
	p.Request.Targets = []string{dataset}
	var pps []refill.PartitionPlan
	for _, part := range parts {
		pps = append(pps, refill.PartitionPlan{Partition: part, ExpectedMethod: refill.ExpectedUnknown})
	}
	p.Steps = []refill.Step{{Dataset: dataset, Kind: refill.JobQuery, Table: dataset, Fingerprint: "sha256:cc", Partitions: pps}}
	p.Hash = p.ComputeHash()
	return p
}

// exerciseControl covers the people in the loop and what holds partitions:
// approvals, the checklist, snapshots, locks (holders), supersession,
// history's look-up (touching), the freeze, cancel requests, schema
// baselines, leases, pending operations and housekeeping's queries.
func exerciseControl(t *testing.T, setup func(t *testing.T) (*store.Store, string)) {
	t.Run("ApprovalsInOrder", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		p := planOver(t, s, "p-ap", at(0), "orders", "2026-11-01")
		want := []refill.Approval{
			{PlanID: p.ID, PlanHash: p.Hash, Actor: "bob", Decision: refill.DecisionApprove, Note: "ok", At: at(1)},
			{PlanID: p.ID, PlanHash: p.Hash, Actor: "carol", Decision: refill.DecisionReject, Note: "no", At: at(2)},
		}
		for _, a := range want {
			if err := s.Update(ctx, func(tx *store.Tx) error { return RecordApproval(ctx, tx, a) }); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.Approvals(ctx, p.ID)
		if err != nil || len(got) != 2 {
			t.Fatalf("Approvals = %+v, %v", got, err)
		}
		for i := range want {
			if got[i].Actor != want[i].Actor || got[i].Decision != want[i].Decision || got[i].Note != want[i].Note || !got[i].At.Equal(want[i].At) || got[i].PlanHash != p.Hash {
				t.Errorf("approval %d = %+v, want %+v", i, got[i], want[i])
			}
		}
		if none, err := s.Approvals(ctx, "p-none"); err != nil || len(none) != 0 {
			t.Errorf("approvals of another plan: %+v, %v", none, err)
		}

		// Several plans at once: each plan's in the order made, however
		// they interleave, and no entry for a plan without any.
		q := planOver(t, s, "p-ap2", at(0), "customers", "2026-11-01")
		dave := refill.Approval{PlanID: q.ID, PlanHash: q.Hash, Actor: "dave", Decision: refill.DecisionApprove, At: at(3)}
		erin := refill.Approval{PlanID: p.ID, PlanHash: p.Hash, Actor: "erin", Decision: refill.DecisionApprove, At: at(4)}
		for _, a := range []refill.Approval{dave, erin} {
			if err := s.Update(ctx, func(tx *store.Tx) error { return RecordApproval(ctx, tx, a) }); err != nil {
				t.Fatal(err)
			}
		}
		of, err := s.ApprovalsOf(ctx, []string{q.ID, "p-none", p.ID})
		if err != nil {
			t.Fatal(err)
		}
		actors := map[string][]string{}
		for id, as := range of {
			for _, a := range as {
				if a.PlanID != id {
					t.Errorf("an approval of %s listed under %s", a.PlanID, id)
				}
				actors[id] = append(actors[id], a.Actor)
			}
		}
		if want := map[string][]string{p.ID: {"bob", "carol", "erin"}, q.ID: {"dave"}}; !reflect.DeepEqual(actors, want) {
			t.Errorf("ApprovalsOf = %v, want %v", actors, want)
		}
		if got := of[q.ID]; len(got) != 1 || got[0].PlanHash != q.Hash || got[0].Decision != refill.DecisionApprove || !got[0].At.Equal(at(3)) {
			t.Errorf("ApprovalsOf(%s) = %+v", q.ID, got)
		}
		if none, err := s.ApprovalsOf(ctx, nil); err != nil || none == nil || len(none) != 0 {
			t.Errorf("ApprovalsOf(nil) = %v, %v; want an empty map", none, err)
		}
	})

	t.Run("FreezeOneAtATime", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		set := func(f *refill.Freeze) (was refill.Freeze, frozen bool) {
			t.Helper()
			err := s.Update(ctx, func(tx *store.Tx) (err error) { was, frozen, err = RecordFreeze(ctx, tx, f, "carol"); return err })
			if err != nil {
				t.Fatal(err)
			}
			return was, frozen
		}
		current := func() refill.Freeze {
			t.Helper()
			f, ok, err := s.Freeze(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				return refill.Freeze{}
			}
			return f
		}
		same := func(a, b refill.Freeze) bool { return a.By == b.By && a.Reason == b.Reason && a.At.Equal(b.At) }

		if f, ok, err := s.Freeze(ctx); err != nil || ok {
			t.Fatalf("Freeze of a new store = %+v, %v, %v", f, ok, err)
		}
		alice := refill.Freeze{By: "alice", Reason: "quarter close", At: at(1)}
		bob := refill.Freeze{By: "bob", Reason: "incident 7", At: at(2)}
		if _, frozen := set(&alice); frozen {
			t.Error("SetFreeze reported a freeze before the first")
		}
		if got := current(); !same(got, alice) {
			t.Errorf("Freeze = %+v, want %+v", got, alice)
		}
		if was, frozen := set(&bob); !frozen || !same(was, alice) {
			t.Errorf("SetFreeze over alice's returned %+v, %v", was, frozen)
		}
		if got := current(); !same(got, bob) {
			t.Errorf("Freeze = %+v, want %+v (one freeze at a time)", got, bob)
		}
		boom := errors.New("the caller failed")
		if err := s.Update(ctx, func(tx *store.Tx) error {
			if _, _, err := RecordFreeze(ctx, tx, nil, "carol"); err != nil {
				return err
			}
			return boom
		}); !errors.Is(err, boom) {
			t.Fatalf("Update = %v", err)
		}
		if got := current(); !same(got, bob) {
			t.Errorf("a failed lift lifted the freeze: %+v", got)
		}
		if was, frozen := set(nil); !frozen || !same(was, bob) {
			t.Errorf("lifting returned %+v, %v; want bob's", was, frozen)
		}
		if _, ok, _ := s.Freeze(ctx); ok {
			t.Error("a lifted freeze is still in force")
		}
		if _, frozen := set(nil); frozen {
			t.Error("lifting twice found a freeze")
		}
	})

	t.Run("CancelKeepsTheFirstRequest", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		p := planOver(t, s, "p-cancel", at(0), "orders", "2026-11-01")
		if c, ok, err := s.CancelRequested(ctx, p.ID); err != nil || ok || c.PlanID != p.ID {
			t.Fatalf("CancelRequested before any = %+v, %v, %v", c, ok, err)
		}
		for _, c := range []refill.CancelRequest{
			{PlanID: p.ID, Actor: "ana", Reason: "wrong range", At: at(1)},
			{PlanID: p.ID, Actor: "bob", Reason: "me too", At: at(2)},
		} {
			if err := s.Update(ctx, func(tx *store.Tx) error { return RecordCancel(ctx, tx, c) }); err != nil {
				t.Fatalf("RequestCancel by %s: %v", c.Actor, err)
			}
		}
		c, ok, err := s.CancelRequested(ctx, p.ID)
		if err != nil || !ok || c.PlanID != p.ID || c.Actor != "ana" || c.Reason != "wrong range" || !c.At.Equal(at(1)) {
			t.Errorf("CancelRequested = %+v, %v, %v; want ana's, the first", c, ok, err)
		}
		if _, ok, _ := s.CancelRequested(ctx, "p-other"); ok {
			t.Error("a request to cancel one plan cancels another")
		}
	})

	t.Run("ChecklistOncePerStep", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		p := planOver(t, s, "p-cl", at(0), "orders", "2026-11-01")
		add := func(step refill.ChecklistItem, actor string) error {
			return s.Update(ctx, func(tx *store.Tx) error {
				return RecordStep(ctx, tx, refill.ChecklistStep{PlanID: p.ID, Step: step, Actor: actor, Note: "n", At: at(1), Detail: refill.Detail(map[string]int{"partitions": 3})})
			})
		}
		if err := add(refill.ChecklistSnapshot, "ana"); err != nil {
			t.Fatal(err)
		}
		if err := add(refill.ChecklistScope, "ana"); err != nil {
			t.Fatal(err)
		}
		if err := add(refill.ChecklistSnapshot, "bob"); !errors.Is(err, refill.ErrNotPermitted) {
			t.Errorf("a second snapshot step: %v, want not permitted", err)
		}
		got, err := s.Checklist(ctx, p.ID)
		if err != nil || len(got) != 2 || got[0].Step != refill.ChecklistSnapshot || got[1].Step != refill.ChecklistScope || got[0].Actor != "ana" || string(got[0].Detail) != `{"partitions":3}` {
			t.Errorf("Checklist = %+v, %v", got, err)
		}
	})

	t.Run("UnauditedStepsAreDropped", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		p := planOver(t, s, "p-forged", at(0), "orders", "2026-11-01")
		// ana's snapshot step has its audit entry; mallory's scope row
		// was written behind refill's back.
		if err := s.Update(ctx, func(tx *store.Tx) error {
			if err := tx.AddStep(ctx, refill.ChecklistStep{PlanID: p.ID, Step: refill.ChecklistSnapshot, Actor: "ana", At: at(1)}); err != nil {
				return err
			}
			if err := tx.Append(ctx, &refill.Event{Kind: refill.EventSnapshot, Actor: "ana", PlanID: p.ID, At: at(1)}); err != nil {
				return err
			}
			return tx.AddStep(ctx, refill.ChecklistStep{PlanID: p.ID, Step: refill.ChecklistScope, Actor: "mallory", At: at(1)})
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.Update(ctx, func(tx *store.Tx) error {
			for _, step := range []refill.ChecklistItem{refill.ChecklistSnapshot, refill.ChecklistScope} {
				if err := tx.DropUnauditedStep(ctx, p.ID, step); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Checklist(ctx, p.ID)
		if err != nil || len(got) != 1 || got[0].Step != refill.ChecklistSnapshot || got[0].Actor != "ana" {
			t.Fatalf("Checklist after dropping unaudited steps = %+v, %v; want ana's audited snapshot alone", got, err)
		}
		// The real scope step may now be recorded.
		if err := s.Update(ctx, func(tx *store.Tx) error {
			return tx.AddStep(ctx, refill.ChecklistStep{PlanID: p.ID, Step: refill.ChecklistScope, Actor: "ana", At: at(2)})
		}); err != nil {
			t.Errorf("the real scope step after the forged one was dropped: %v", err)
		}
	})

	t.Run("SnapshotsKeptAndDropped", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		p := planOver(t, s, "p-sn", at(0), "orders", "2026-11-01", "2026-11-02")
		parts := []refill.SnapshotPart{
			{PlanID: p.ID, Dataset: "orders", Table: "orders", Partition: "2026-11-01", SnapshotTable: "refill_snap_p_orders_1", Digest: refill.Digest{Rows: 3, Checksum: "00000000000000aa"}},
			{PlanID: p.ID, Dataset: "orders", Table: "orders", Partition: "2026-11-02", SnapshotTable: "refill_snap_p_orders_1", Digest: refill.Digest{Rows: 0, Checksum: "0000000000000000"}},
			{PlanID: p.ID, Dataset: "raw", Table: "raw", Partition: "2026-11-01", SnapshotTable: "refill_snap_p_raw_2", Digest: refill.Digest{Rows: 9, Checksum: "00000000000000bb"}, Source: true},
		}
		if err := s.Update(ctx, func(tx *store.Tx) error { return tx.SaveSnapshot(ctx, parts) }); err != nil {
			t.Fatal(err)
		}
		got, err := s.Snapshot(ctx, p.ID)
		if err != nil || len(got) != 3 || got[0] != parts[0] || got[2] != parts[2] {
			t.Fatalf("Snapshot = %+v, %v", got, err)
		}
		kept, err := s.KeptSnapshots(ctx)
		if err != nil || len(kept) != 1 || kept[0].PlanID != p.ID || !slices.Equal(kept[0].Tables, []string{"refill_snap_p_orders_1", "refill_snap_p_raw_2"}) {
			t.Fatalf("KeptSnapshots = %+v, %v", kept, err)
		}
		if ok, err := s.SnapshotKept(ctx, p.ID); err != nil || !ok {
			t.Errorf("SnapshotKept before the drop = %v, %v", ok, err)
		}
		if err := s.Update(ctx, func(tx *store.Tx) error { return tx.SnapshotDropped(ctx, p.ID, at(5)) }); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.SnapshotKept(ctx, p.ID); err != nil || ok {
			t.Errorf("SnapshotKept after the drop = %v, %v", ok, err)
		}
		if kept, _ := s.KeptSnapshots(ctx); len(kept) != 0 {
			t.Errorf("a dropped snapshot is still kept: %+v", kept)
		}
		if got, _ := s.Snapshot(ctx, p.ID); len(got) != 3 {
			t.Errorf("the evidence of a dropped snapshot went too: %+v", got)
		}
	})

	t.Run("HoldersAreOlderLivePlans", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		older := planOver(t, s, "p-old", at(0), "orders", "2026-11-01", "2026-11-02")
		other := planOver(t, s, "p-other", at(1), "customers", "2026-11-01")
		newer := planOver(t, s, "p-new", at(2), "orders", "2026-11-02", "2026-11-03")
		h, err := s.Holders(ctx, newer.ID)
		if err != nil || len(h) != 1 || h[0] != (store.Holder{PlanID: older.ID, Status: refill.StatusPending, Dataset: "orders", Partitions: 1}) {
			t.Fatalf("Holders(newer) = %+v, %v", h, err)
		}
		if h, _ := s.Holders(ctx, older.ID); len(h) != 0 {
			t.Errorf("a newer plan holds an older one: %+v", h)
		}
		if h, _ := s.Holders(ctx, other.ID); len(h) != 0 {
			t.Errorf("another dataset holds: %+v", h)
		}
		if err := s.SetStatus(ctx, older.ID, refill.StatusPending, refill.StatusRejected); err != nil {
			t.Fatal(err)
		}
		err = s.Update(ctx, func(tx *store.Tx) error {
			held, err := tx.Holders(ctx, newer.ID)
			if len(held) != 0 {
				t.Errorf("a rejected plan still holds (in a transaction): %+v", held)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	})

	t.Run("SupersedeOnlyDifferentLiveContent", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		a := planOver(t, s, "p-a", at(0), "orders", "2026-11-01")
		running := planOver(t, s, "p-run", at(1), "orders", "2026-11-01")
		advance(t, s, running.ID, refill.StatusPending, refill.StatusRunning)
		b := newPlan("p-b", at(2))
		b.Request.Targets = a.Request.Targets
		b.Request.Reason = "other content, same request"
		b.Hash = b.ComputeHash()
		mustSave(t, s, b)
		var ids []string
		err := s.Update(ctx, func(tx *store.Tx) (err error) { ids, err = tx.Supersede(ctx, b); return err })
		if err != nil || !slices.Equal(ids, []string{a.ID}) {
			t.Fatalf("Supersede = %v, %v; want [%s] (not the running one)", ids, err, a.ID)
		}
		if got, _ := s.Plan(ctx, a.ID); got.Status != refill.StatusSuperseded {
			t.Errorf("the superseded plan is %s", got.Status)
		}
		if got, _ := s.Plan(ctx, running.ID); got.Status != refill.StatusRunning {
			t.Errorf("a running plan was superseded: %s", got.Status)
		}
	})

	t.Run("TouchingOldestFirst", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		planOver(t, s, "p-1", at(0), "orders", "2026-11-01", "2026-11-02")
		planOver(t, s, "p-2", at(1), "orders", "2026-11-02")
		planOver(t, s, "p-3", at(2), "customers", "2026-11-02")
		got, err := s.Touching(ctx, "orders", "2026-11-02")
		if err != nil || !slices.Equal(got, []string{"p-1", "p-2"}) {
			t.Errorf("Touching = %v, %v", got, err)
		}
	})

	t.Run("SchemaBaselineIsAcceptedElseFirst", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		if _, ok, err := s.SchemaBaseline(ctx, "orders"); ok || err != nil {
			t.Fatalf("a baseline with nothing recorded: %v, %v", ok, err)
		}
		cols := func(names ...string) []refill.Column {
			var out []refill.Column
			for _, n := range names {
				out = append(out, refill.Column{Name: n, Type: "text"})
			}
			return out
		}
		seen := func(plan string, c ...string) {
			if err := s.Update(ctx, func(tx *store.Tx) error {
				return RecordSeen(ctx, tx, plan, []refill.SchemaSnapshot{{Dataset: "orders", PlanID: plan, Columns: cols(c...)}})
			}); err != nil {
				t.Fatal(err)
			}
		}
		seen("p-1", "a")
		seen("p-2", "a", "b") // a plan merely saw b: not the baseline
		if got, _, _ := s.SchemaBaseline(ctx, "orders"); got.PlanID != "p-1" || len(got.Columns) != 1 {
			t.Errorf("baseline = %+v, want the first recorded", got)
		}
		err := s.Update(ctx, func(tx *store.Tx) error {
			return RecordSchemaAccept(ctx, tx, refill.SchemaSnapshot{Dataset: "orders", Columns: cols("a", "b"), AcceptedBy: "carol", Reason: "b is new upstream"})
		})
		if err != nil {
			t.Fatal(err)
		}
		seen("p-3", "a", "b", "c")
		got, _, _ := s.SchemaBaseline(ctx, "orders")
		if got.AcceptedBy != "carol" || got.Reason != "b is new upstream" || len(got.Columns) != 2 {
			t.Errorf("baseline = %+v, want carol's accepted schema", got)
		}
		if err := s.Update(ctx, func(tx *store.Tx) error {
			return tx.AcceptSchema(ctx, refill.SchemaSnapshot{Dataset: "orders", Columns: cols("x")})
		}); err == nil {
			t.Error("a schema accepted by no one was recorded")
		}
	})

	t.Run("LeasesOneLiveHolder", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		p := planOver(t, s, "p-lease", at(0), "orders", "2026-11-01")
		alive := func(store.Lease) bool { return true }
		take := func(holder string, until time.Time, alive func(store.Lease) bool) error {
			return s.Update(ctx, func(tx *store.Tx) error { return tx.TakeLease(ctx, p.ID, holder, until, alive) })
		}
		if err := take("host:1", time.Now().Add(time.Minute), alive); err != nil {
			t.Fatal(err)
		}
		if err := take("host:2", time.Now().Add(time.Minute), alive); !errors.Is(err, refill.ErrLocked) {
			t.Errorf("a second holder while the first lives: %v", err)
		}
		if err := take("host:2", time.Now().Add(time.Minute), func(store.Lease) bool { return false }); err != nil {
			t.Errorf("taking over from a dead holder: %v", err)
		}
		if err := s.RenewLease(ctx, p.ID, "host:1", time.Now().Add(time.Minute)); !errors.Is(err, refill.ErrNotPermitted) {
			t.Errorf("the old holder renewed a lease it lost: %v", err)
		}
		if err := s.RenewLease(ctx, p.ID, "host:2", time.Now().Add(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if l, ok, err := s.Lease(ctx, p.ID); err != nil || !ok || l.Holder != "host:2" {
			t.Errorf("Lease = %+v, %v, %v", l, ok, err)
		}
		if err := s.Update(ctx, func(tx *store.Tx) error { return tx.ReleaseLease(ctx, p.ID, "host:2") }); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := s.Lease(ctx, p.ID); ok {
			t.Error("a released lease is still held")
		}
		if err := take("host:3", time.Now().Add(-time.Second), alive); err != nil {
			t.Fatal(err)
		}
		if err := take("host:4", time.Now().Add(time.Minute), alive); err != nil {
			t.Errorf("taking over an expired lease: %v", err)
		}
	})

	t.Run("PendingOpsBeginOnce", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		op := store.PendingOp{PlanID: "p-op", Op: "snapshot", Actor: "ana", Detail: refill.Detail(map[string]string{"force": ""})}
		if _, again, err := s.BeginOp(ctx, op); err != nil || again {
			t.Fatalf("BeginOp = again %v, %v", again, err)
		}
		got, again, err := s.BeginOp(ctx, store.PendingOp{PlanID: "p-op", Op: "snapshot", Actor: "bob"})
		if err != nil || !again || got.Actor != "ana" {
			t.Fatalf("BeginOp again = %+v, %v, %v; want ana's unfinished one", got, again, err)
		}
		if got, ok, err := s.Pending(ctx, "p-op", "snapshot"); err != nil || !ok || got.Actor != "ana" || string(got.Detail) != `{"force":""}` || got.Started.IsZero() {
			t.Errorf("Pending of a begun op = %+v, %v, %v; want ana's", got, ok, err)
		}
		if err := s.Update(ctx, func(tx *store.Tx) error { return tx.EndOp(ctx, "p-op", "snapshot") }); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := s.Pending(ctx, "p-op", "snapshot"); err != nil || ok {
			t.Errorf("Pending of a finished op = %v, %v", ok, err)
		}
		if _, again, _ := s.BeginOp(ctx, op); again {
			t.Error("a finished op was found again")
		}
		if err := s.DropOp(ctx, "p-op", "snapshot"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("WaitingByTheRealClock", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		// Their "as of" times are years ago; their plan_created entries
		// (written as they are saved) are dated now.
		planOver(t, s, "p-w1", at(0), "orders", "2026-11-01")
		done := planOver(t, s, "p-w2", at(1), "orders", "2026-11-02")
		if err := s.SetStatus(ctx, done.ID, refill.StatusPending, refill.StatusRejected); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Waiting(ctx, time.Now().Add(-time.Hour)); err != nil || len(got) != 0 {
			t.Errorf("Waiting an hour ago = %+v, %v: a plan made just now counts as old by its as-of time", got, err)
		}
		got, err := s.Waiting(ctx, time.Now().Add(time.Hour))
		if err != nil || len(got) != 1 || got[0].ID != "p-w1" || got[0].Status != refill.StatusPending {
			t.Errorf("Waiting = %+v, %v", got, err)
		}
	})

	t.Run("IdentityIsStable", func(t *testing.T) {
		t.Parallel()
		s, dsn := setup(t)
		id, err := s.ID(t.Context())
		if err != nil || len(id) < 16 {
			t.Fatalf("ID = %q, %v", id, err)
		}
		if again, _ := open(t, dsn).ID(t.Context()); again != id {
			t.Errorf("the store's identity changed on reopening: %s, %s", id, again)
		}
		other, _ := setup(t)
		if oid, _ := other.ID(t.Context()); oid == id {
			t.Error("two stores share an identity")
		}
	})
}
