// Package storetest is the conformance suite of refill's state store: one set
// of tests that every engine the store runs on must pass, after river's
// riverdrivertest. An engine is done when Exercise passes against it.
//
// Exercise calls every exported operation of store.Store and store.Tx, each
// area (plans, control, runs, audit, serve, notify, watch, accept, lineage)
// in its own file; the store package's TestSuiteCoversEveryOperation fails,
// naming it, when an operation is added that the suite does not call.
package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
)

// Exercise runs the suite. newDSN returns the DSN of a new, empty database
// each time it is called (a file in t.TempDir(), a fresh PostgreSQL schema)
// and arranges for its removal. The suite opens it with store.Open itself,
// since several tests open one database more than once, and it edits tables
// through Store.DB to play someone tampering with the state store, so its raw
// SQL uses no placeholders and only syntax both engines share.
func Exercise(t *testing.T, newDSN func(t *testing.T) string) {
	t.Helper()

	// setup opens a store on a new database and returns it with its DSN, so
	// a test can open the same database again.
	setup := func(t *testing.T) (*store.Store, string) {
		t.Helper()
		dsn := newDSN(t)
		return open(t, dsn), dsn
	}

	t.Run("ProofsNewestFirst", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		if got, err := s.Proofs(ctx, "agg"); err != nil || len(got) != 0 {
			t.Fatalf("Proofs of an unproven dataset = %v, %v", got, err)
		}
		mk := func(part string, passed bool, fp string) *refill.Proof {
			return &refill.Proof{Dataset: "agg", Partition: part, Kind: refill.JobSQL, Fingerprint: fp, Passed: passed,
				Builds:  []refill.ProofBuild{{Build: "over existing rows", Digest: refill.Digest{Rows: 3, Checksum: "00000000000000ff"}}},
				Message: part, Warehouse: "warehouse", ProvenAt: at(1), ProvenBy: "alice"}
		}
		for _, p := range []*refill.Proof{mk("2026-11-01", false, "sha256:a"), mk("2026-11-02", true, "sha256:b")} {
			if err := s.SaveProof(ctx, p); err != nil {
				t.Fatalf("SaveProof: %v", err)
			}
		}
		if err := s.SaveProof(ctx, &refill.Proof{Dataset: "agg"}); err == nil {
			t.Error("a proof without a fingerprint was saved")
		}
		got, err := s.Proofs(ctx, "agg")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].Partition != "2026-11-02" || !got[0].Passed || got[1].Passed {
			t.Fatalf("Proofs = %+v, want the passing 11-02 first", got)
		}
		if !reflect.DeepEqual(&got[0], mk("2026-11-02", true, "sha256:b")) {
			t.Errorf("proof did not round-trip: %+v", got[0])
		}
	})

	t.Run("GateFlags", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		err := s.Update(ctx, func(tx *store.Tx) error {
			return RecordFlags(ctx, tx, []refill.Flag{
				{Dataset: "src", Partition: "2026-11-01", Check: "volume", PlanID: "p1"},
				{Dataset: "src", Partition: "2026-11-01", Check: "not_null", PlanID: "p1"},
				{Dataset: "other", Partition: "2026-11-02", Check: "volume"},
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Flagged(ctx, "src")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, map[string]bool{"2026-11-01": true}) {
			t.Errorf("Flagged(src) = %v", got)
		}
	})

	t.Run("AuditChain", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		// appendN writes n entries, each in its own transaction.
		appendN := func(t *testing.T, s *store.Store, n int) {
			t.Helper()
			for i := 0; i < n; i++ {
				err := s.Update(ctx, func(tx *store.Tx) error {
					return tx.Append(ctx, &refill.Event{Kind: refill.EventApproval, Actor: "carol", PlanID: fmt.Sprintf("p%d", i),
						Dataset: "agg", Partition: "2026-11-02", At: at(i).Add(123456789), Detail: refill.Detail(map[string]any{"note": "ok", "n": i})})
				})
				if err != nil {
					t.Fatalf("append: %v", err)
				}
			}
		}
		verify := func(t *testing.T, s *store.Store) (store.AuditReport, error) {
			t.Helper()
			return s.VerifyAudit(ctx)
		}
		tampers := []struct {
			name    string
			sql     string
			seq     int64
			problem string
		}{
			{"altered", "UPDATE audit_log SET actor = 'mallory' WHERE seq = 3", 3, "was altered"},
			{"removed", "DELETE FROM audit_log WHERE seq = 2", 2, "is missing"},
			{"removed at the end", "DELETE FROM audit_log WHERE seq = 5", 5, "removed from the end"},
			{"swapped", "UPDATE audit_log SET seq = 1000 WHERE seq = 2; UPDATE audit_log SET seq = 2 WHERE seq = 3; UPDATE audit_log SET seq = 3 WHERE seq = 1000", 2, "does not follow entry 1"},
		}
		for _, tc := range tampers {
			t.Run(tc.name, func(t *testing.T) {
				s, _ := setup(t)
				appendN(t, s, 5)
				rep, err := verify(t, s)
				if err != nil || !rep.OK || rep.Entries != 5 {
					t.Fatalf("untouched chain: %+v, %v", rep, err)
				}
				if _, err := s.DB().ExecContext(ctx, tc.sql); err != nil {
					t.Fatal(err)
				}
				rep, err = verify(t, s)
				if !errors.Is(err, refill.ErrVerification) || rep.OK || rep.Broken == nil || rep.Broken.Seq != tc.seq || !strings.Contains(rep.Broken.Problem, tc.problem) {
					t.Errorf("after %s: report %+v, err %v; want entry %d %q", tc.sql, rep.Broken, err, tc.seq, tc.problem)
				}
			})
		}
		t.Run("entries round-trip", func(t *testing.T) {
			s, _ := setup(t)
			appendN(t, s, 2)
			got, err := s.Audit(ctx, store.AuditFilter{PlanID: "p1"})
			if err != nil || len(got) != 1 {
				t.Fatalf("Audit(p1) = %v, %v", got, err)
			}
			e := got[0]
			if e.Seq != 2 || e.Actor != "carol" || e.Partition != "2026-11-02" || string(e.Detail) != `{"n":1,"note":"ok"}` || e.ComputeHash() != e.Hash {
				t.Errorf("entry = %+v", e)
			}
		})
		t.Run("a failed change leaves no entry", func(t *testing.T) {
			s, _ := setup(t)
			p := newPlan("p-audit", at(1))
			mustSave(t, s, p)
			boom := errors.New("crash after the audit entry")
			err := s.Update(ctx, func(tx *store.Tx) error {
				if err := tx.SetStatus(ctx, p.ID, refill.StatusPending, refill.StatusApproved); err != nil {
					return err
				}
				if err := tx.Append(ctx, &refill.Event{Kind: refill.EventApproval, Actor: "carol", PlanID: p.ID}); err != nil {
					return err
				}
				return boom
			})
			if !errors.Is(err, boom) {
				t.Fatalf("Update = %v", err)
			}
			if got, _ := s.Audit(ctx, store.AuditFilter{PlanID: p.ID}); len(got) != 1 || got[0].Kind != refill.EventPlanCreated {
				t.Errorf("entries after a failed change: %+v, want the plan's own alone", got)
			}
			if got, _ := s.Plan(ctx, p.ID); got.Status != refill.StatusPending {
				t.Errorf("status after a failed change: %s", got.Status)
			}
		})
	})

	t.Run("SaveLoadRoundTrip", func(t *testing.T) {
		t.Parallel()
		s, dsn := setup(t)
		ctx := t.Context()
		want := newPlan("p-round-trip", at(1))
		mustSave(t, s, want)

		got, err := s.Plan(ctx, want.ID)
		if err != nil {
			t.Fatalf("Plan: %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("loaded plan differs from saved plan\n got: %+v\nwant: %+v", got, want)
		}
		if got.Hash != got.ComputeHash() {
			t.Fatalf("loaded hash %s, recomputed %s", got.Hash, got.ComputeHash())
		}
		if got == want || &got.Steps[0] == &want.Steps[0] {
			t.Fatal("Plan returned the caller's plan, not a loaded copy")
		}

		// A reopened store sees the same plan with the same hash.
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		again, err := open(t, dsn).Plan(ctx, want.ID)
		if err != nil {
			t.Fatalf("Plan after reopening: %v", err)
		}
		if !reflect.DeepEqual(again, want) {
			t.Fatalf("plan after reopening differs\n got: %+v\nwant: %+v", again, want)
		}
	})

	t.Run("SaveKeepsCallersPlan", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		p := newPlan("p-caller", at(1))
		before := newPlan("p-caller", at(1))
		mustSave(t, s, p)
		if !reflect.DeepEqual(p, before) {
			t.Fatalf("SavePlan modified the caller's plan\n got: %+v\nwant: %+v", p, before)
		}
	})

	t.Run("SaveDuplicateID", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		first := newPlan("p-dup", at(1))
		mustSave(t, s, first)

		// The same plan again, and a different plan under the same ID.
		other := newPlan("p-dup", at(2))
		other.Request.Reason = "a different reason"
		other.Hash = other.ComputeHash()
		for _, p := range []*refill.Plan{first, other} {
			err := s.SavePlan(ctx, p)
			if !errors.Is(err, refill.ErrNotPermitted) {
				t.Fatalf("saving plan %s twice: got %v, want an error wrapping ErrNotPermitted", p.ID, err)
			}
			if !strings.Contains(err.Error(), "p-dup") {
				t.Errorf("error %q does not name the plan", err)
			}
		}
		got, err := s.Plan(ctx, "p-dup")
		if err != nil {
			t.Fatalf("Plan: %v", err)
		}
		if !reflect.DeepEqual(got, first) {
			t.Fatalf("a refused save changed the stored plan\n got: %+v\nwant: %+v", got, first)
		}
	})

	t.Run("SaveRefusesWrongHash", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		p := newPlan("p-bad-hash", at(1))
		p.Request.Reason = "edited after hashing"
		err := s.SavePlan(ctx, p)
		if !errors.Is(err, refill.ErrVerification) {
			t.Fatalf("SavePlan with a stale hash: got %v, want an error wrapping ErrVerification", err)
		}
		if _, err := s.Plan(ctx, p.ID); !errors.Is(err, refill.ErrNotFound) {
			t.Fatalf("a refused plan was stored: Plan returned %v", err)
		}
	})

	t.Run("UnknownPlan", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		mustSave(t, s, newPlan("p-known", at(1)))
		_, err := s.Plan(ctx, "p-unknown")
		if !errors.Is(err, refill.ErrNotFound) {
			t.Fatalf("Plan of an unknown ID: got %v, want an error wrapping ErrNotFound", err)
		}
		if !strings.Contains(err.Error(), "p-unknown") {
			t.Errorf("error %q does not name the plan", err)
		}
		if refill.ExitCode(err) != refill.ExitBadInput {
			t.Errorf("exit code %d, want %d", refill.ExitCode(err), refill.ExitBadInput)
		}
	})

	t.Run("ListNewestFirst", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		if got, err := s.Plans(ctx, refill.PlanFilter{}); err != nil || len(got) != 0 {
			t.Fatalf("Plans of an empty store: %v, %v; want none", got, err)
		}
		// Saved out of order; p-c and p-d share an instant, so ID decides.
		// at(1) and at(1)+500ms differ only in the fraction, which a text
		// timestamp that trims zeros would sort the wrong way round.
		plans := []struct {
			id      string
			created time.Time
			status  refill.Status
		}{
			{"p-b", at(2), refill.StatusReady},
			{"p-a", at(1), refill.StatusPending},
			{"p-e", at(1).Add(500 * time.Millisecond), refill.StatusPending},
			// Saved in the same instant: the one saved later lists first,
			// whatever its ID (a fixed REFILL_NOW makes this common).
			{"p-d", at(3), refill.StatusPending},
			{"p-c", at(3), refill.StatusBlocked},
		}
		for _, pl := range plans {
			p := newPlan(pl.id, pl.created)
			p.Status = pl.status
			mustSave(t, s, p)
		}
		ids := func(f refill.PlanFilter) []string {
			t.Helper()
			got, err := s.Plans(ctx, f)
			if err != nil {
				t.Fatalf("Plans(%+v): %v", f, err)
			}
			out := make([]string, len(got))
			for i, ps := range got {
				out[i] = ps.ID
			}
			return out
		}
		for _, c := range []struct {
			f    refill.PlanFilter
			want []string
		}{
			{refill.PlanFilter{}, []string{"p-c", "p-d", "p-b", "p-e", "p-a"}},
			{refill.PlanFilter{Limit: 2}, []string{"p-c", "p-d"}},
			{refill.PlanFilter{Status: refill.StatusPending}, []string{"p-d", "p-e", "p-a"}},
			{refill.PlanFilter{Status: refill.StatusPending, Limit: 1}, []string{"p-d"}},
			{refill.PlanFilter{Status: refill.StatusApplied}, []string{}},
			// Pages: the plans older than the last of the page before,
			// ties in created_at broken as the order breaks them.
			{refill.PlanFilter{Before: "p-c"}, []string{"p-d", "p-b", "p-e", "p-a"}},
			{refill.PlanFilter{Before: "p-d", Limit: 2}, []string{"p-b", "p-e"}},
			{refill.PlanFilter{Before: "p-e", Limit: 2}, []string{"p-a"}},
			{refill.PlanFilter{Status: refill.StatusPending, Before: "p-d"}, []string{"p-e", "p-a"}},
			{refill.PlanFilter{Before: "p-a"}, []string{}},
		} {
			if got := ids(c.f); !reflect.DeepEqual(got, c.want) {
				t.Errorf("Plans(%+v) = %v, want %v", c.f, got, c.want)
			}
		}
		if _, err := s.Plans(ctx, refill.PlanFilter{Before: "p-nope"}); !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), `before "p-nope": no such plan`) {
			t.Errorf("Plans before an unknown plan: %v, want bad input naming it", err)
		}
	})

	t.Run("ListSummary", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		p := newPlan("p-summary", at(1).Add(123456*time.Microsecond))
		mustSave(t, s, p)
		got, err := s.Plans(ctx, refill.PlanFilter{})
		if err != nil {
			t.Fatalf("Plans: %v", err)
		}
		want := []refill.PlanSummary{{
			ID:          "p-summary",
			Hash:        p.Hash,
			Status:      refill.StatusPending,
			Tier:        refill.TierSemiAuto,
			Targets:     []string{"orders_daily", "revenue_daily"},
			From:        "2026-11-01",
			To:          "2026-11-03",
			RequestedBy: "ana",
			Reason:      "late orders from the EU shard",
			CreatedAt:   "2026-11-05T09:00:01.123456Z",
			Datasets:    2,
			Partitions:  5,
		}}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Plans\n got: %+v\nwant: %+v", got, want)
		}

		// A reason stored before texts were bounded is clipped in the
		// list, counted in characters on both engines; the plan keeps it
		// whole.
		for _, c := range []struct{ id, reason, want string }{
			{"p-long", strings.Repeat("é", 900<<10), strings.Repeat("é", refill.MaxText-1) + "…"},
			{"p-limit", strings.Repeat("日", refill.MaxText), strings.Repeat("日", refill.MaxText)},
		} {
			p := newPlan(c.id, at(2))
			p.Request.Reason = c.reason
			p.Hash = p.ComputeHash()
			mustSave(t, s, p)
			list, err := s.Plans(ctx, refill.PlanFilter{Limit: 1})
			if err != nil || len(list) != 1 || list[0].ID != c.id {
				t.Fatalf("Plans: %v, %v", list, err)
			}
			if list[0].Reason != c.want {
				t.Errorf("%s: listed reason of %d characters, want %d", c.id, len([]rune(list[0].Reason)), len([]rune(c.want)))
			}
			if got, err := s.Plan(ctx, c.id); err != nil || got.Request.Reason != c.reason {
				t.Errorf("%s: the plan's own reason changed (%v)", c.id, err)
			}
		}
	})

	t.Run("SetStatus", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		p := newPlan("p-status", at(1))
		mustSave(t, s, p)

		if err := s.SetStatus(ctx, p.ID, refill.StatusPending, refill.StatusApproved); err != nil {
			t.Fatalf("SetStatus pending->approved: %v", err)
		}
		got, err := s.Plan(ctx, p.ID)
		if err != nil {
			t.Fatalf("Plan after SetStatus (status must not be part of the hash): %v", err)
		}
		if got.Status != refill.StatusApproved || got.Hash != p.Hash {
			t.Fatalf("after SetStatus: status %s hash %s, want approved and %s", got.Status, got.Hash, p.Hash)
		}
		list, err := s.Plans(ctx, refill.PlanFilter{Status: refill.StatusApproved})
		if err != nil || len(list) != 1 || list[0].Status != refill.StatusApproved {
			t.Fatalf("Plans(approved) = %+v, %v; want the plan", list, err)
		}

		// The plan is no longer pending: the same move again must fail and
		// say what the plan is now.
		err = s.SetStatus(ctx, p.ID, refill.StatusPending, refill.StatusRejected)
		if !errors.Is(err, refill.ErrNotPermitted) {
			t.Fatalf("SetStatus from the wrong status: got %v, want an error wrapping ErrNotPermitted", err)
		}
		if !strings.Contains(err.Error(), string(refill.StatusApproved)) {
			t.Errorf("error %q does not name the current status", err)
		}
		if got, _ := s.Plan(ctx, p.ID); got == nil || got.Status != refill.StatusApproved {
			t.Fatalf("a failed SetStatus changed the status to %v", got)
		}

		err = s.SetStatus(ctx, "p-missing", refill.StatusPending, refill.StatusApproved)
		if !errors.Is(err, refill.ErrNotFound) {
			t.Fatalf("SetStatus of an unknown plan: got %v, want an error wrapping ErrNotFound", err)
		}
	})

	t.Run("SetStatusRace", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		p := newPlan("p-race", at(1))
		mustSave(t, s, p)

		// Eight approvers at once: exactly one may win.
		const n = 8
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				errs[i] = s.SetStatus(ctx, p.ID, refill.StatusPending, refill.StatusApproved)
			})
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, refill.ErrNotPermitted):
				t.Errorf("a losing SetStatus: got %v, want an error wrapping ErrNotPermitted", err)
			}
		}
		if won != 1 {
			t.Fatalf("%d of %d concurrent SetStatus calls won, want exactly 1", won, n)
		}
	})

	t.Run("Tampering", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		for _, id := range []string{"p-body", "p-hash", "p-swap", "p-source", "p-garbage", "p-status"} {
			mustSave(t, s, newPlan(id, at(1)))
		}
		other := newPlan("p-other", at(2))
		other.Request.Reason = "someone else's backfill"
		other.Hash = other.ComputeHash()
		mustSave(t, s, other)

		// Each statement plays someone editing the state store by hand.
		for _, q := range []string{
			// Widening the range in the body.
			`UPDATE plans SET body = replace(body, '"to":"2026-11-03"', '"to":"2026-12-31"') WHERE id = 'p-body'`,
			// Rewriting the hash so an approval bound to another hash matches.
			`UPDATE plans SET hash = (SELECT hash FROM plans WHERE id = 'p-other') WHERE id = 'p-hash'`,
			// Putting another plan's content, hash and all, under this ID.
			`UPDATE plans SET body = (SELECT body FROM plans WHERE id = 'p-other'), hash = (SELECT hash FROM plans WHERE id = 'p-other') WHERE id = 'p-swap'`,
			// Renaming the ID inside the body to the row's ID after a swap.
			`UPDATE plans SET body = replace((SELECT body FROM plans WHERE id = 'p-other'), '"id":"p-other"', '"id":"p-source"') WHERE id = 'p-source'`,
			// Something that is not a plan at all.
			`UPDATE plans SET body = 'not json' WHERE id = 'p-garbage'`,
		} {
			res, err := s.DB().ExecContext(ctx, q)
			if err != nil {
				t.Fatalf("tampering: %s: %v", q, err)
			}
			if n, _ := res.RowsAffected(); n != 1 {
				t.Fatalf("tampering: %s changed %d rows, want 1", q, n)
			}
		}
		for _, id := range []string{"p-body", "p-hash", "p-swap", "p-source", "p-garbage"} {
			_, err := s.Plan(ctx, id)
			if !errors.Is(err, refill.ErrVerification) {
				t.Errorf("Plan(%s) after tampering: got %v, want an error wrapping ErrVerification", id, err)
				continue
			}
			if !strings.Contains(err.Error(), id) {
				t.Errorf("error %q does not name the plan", err)
			}
		}
		// The body of p-body has the stored and the computed hash in its error.
		if _, err := s.Plan(ctx, "p-body"); err != nil && !strings.Contains(err.Error(), "sha256:") {
			t.Errorf("error %q does not show the hashes", err)
		}

		// Status is outside the hash, by design: it is the part that moves.
		if _, err := s.DB().ExecContext(ctx, `UPDATE plans SET status = 'applied' WHERE id = 'p-status'`); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Plan(ctx, "p-status"); err != nil || got.Status != refill.StatusApplied {
			t.Fatalf("Plan after a status change: %v, %v", got, err)
		}
		// Untouched plans still load, and listing still works.
		if _, err := s.Plan(ctx, "p-other"); err != nil {
			t.Fatalf("Plan of an untouched plan: %v", err)
		}
		if list, err := s.Plans(ctx, refill.PlanFilter{}); err != nil || len(list) != 7 {
			t.Fatalf("Plans after tampering: %d plans, %v; want 7", len(list), err)
		}
	})

	t.Run("SchemaSnapshots", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		if _, ok, err := s.LatestSchema(ctx, "orders"); err != nil || ok {
			t.Fatalf("LatestSchema with nothing recorded: ok=%v err=%v, want ok=false", ok, err)
		}
		if err := s.SaveSchemas(ctx, nil); err != nil {
			t.Fatalf("SaveSchemas(nil): %v", err)
		}
		v1 := []refill.Column{{Name: "id", Type: "integer"}, {Name: "amount", Type: "numeric"}}
		v2 := []refill.Column{{Name: "id", Type: "integer"}, {Name: "amount", Type: "text"}}
		cust := []refill.Column{{Name: "id", Type: "integer"}}
		if err := s.SaveSchemas(ctx, []refill.SchemaSnapshot{
			{Dataset: "orders", PlanID: "p-1", Columns: v1},
			{Dataset: "customers", PlanID: "p-1", Columns: cust},
		}); err != nil {
			t.Fatalf("SaveSchemas: %v", err)
		}
		// Later snapshots win, even with the same plan and clock tick.
		for _, snap := range []refill.SchemaSnapshot{
			{Dataset: "orders", PlanID: "p-2", Columns: v2},
			{Dataset: "orders", PlanID: "p-2", Columns: v1},
			{Dataset: "orders", PlanID: "p-3", Columns: v2},
		} {
			if err := s.SaveSchemas(ctx, []refill.SchemaSnapshot{snap}); err != nil {
				t.Fatalf("SaveSchemas: %v", err)
			}
		}
		for _, want := range []refill.SchemaSnapshot{
			{Dataset: "orders", PlanID: "p-3", Columns: v2},
			{Dataset: "customers", PlanID: "p-1", Columns: cust},
		} {
			got, ok, err := s.LatestSchema(ctx, want.Dataset)
			if err != nil || !ok {
				t.Fatalf("LatestSchema(%s): ok=%v err=%v", want.Dataset, ok, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("LatestSchema(%s)\n got: %+v\nwant: %+v", want.Dataset, got, want)
			}
		}
		if err := s.SaveSchemas(ctx, []refill.SchemaSnapshot{
			{Dataset: "orders", PlanID: "p-4", Columns: v1},
			{Dataset: "", PlanID: "p-4", Columns: v1},
		}); err == nil {
			t.Fatal("SaveSchemas with a snapshot without a dataset succeeded")
		}
		if got, _, _ := s.LatestSchema(ctx, "orders"); got.PlanID != "p-3" {
			t.Fatalf("a failed SaveSchemas recorded part of its snapshots: latest is from %s", got.PlanID)
		}
	})

	t.Run("MigrationsIdempotent", func(t *testing.T) {
		t.Parallel()
		s, dsn := setup(t)
		ctx := t.Context()
		mustSave(t, s, newPlan("p-kept", at(1)))
		before := migrationRows(t, s)
		if len(before) == 0 {
			t.Fatal("refill_migrations is empty after Open")
		}
		for range 2 {
			again := open(t, dsn)
			if got := migrationRows(t, again); !reflect.DeepEqual(got, before) {
				t.Fatalf("reopening changed refill_migrations: %v, was %v", got, before)
			}
			if _, err := again.Plan(ctx, "p-kept"); err != nil {
				t.Fatalf("Plan after reopening: %v", err)
			}
		}
	})

	t.Run("ConcurrentOpen", func(t *testing.T) {
		t.Parallel()
		dsn := newDSN(t)
		const n = 8
		stores := make([]*store.Store, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { stores[i], errs[i] = store.Open(t.Context(), dsn, t.TempDir()) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("concurrent Open %d: %v", i, err)
			}
			t.Cleanup(func() { stores[i].Close() })
		}
		rows := migrationRows(t, stores[0])
		seen := map[string]bool{}
		for _, r := range rows {
			if seen[r] {
				t.Fatalf("migration %s was applied twice: %v", r, rows)
			}
			seen[r] = true
		}
		mustSave(t, stores[1], newPlan("p-concurrent", at(1)))
		if _, err := stores[n-1].Plan(t.Context(), "p-concurrent"); err != nil {
			t.Fatalf("a plan saved through one store is not visible through another: %v", err)
		}
	})

	t.Run("EngineHandles", func(t *testing.T) {
		t.Parallel()
		s, dsn := setup(t)
		ctx := t.Context()
		if err := s.DB().PingContext(ctx); err != nil {
			t.Fatalf("DB().Ping: %v", err)
		}
		switch file, sqlite := strings.CutPrefix(dsn, "sqlite:"); {
		case sqlite:
			if s.Driver() != "sqlite" || s.Pool() != nil || s.SQLitePath() != file {
				t.Errorf("on %s: Driver %q, Pool %v, SQLitePath %q; want sqlite, no pool, the file", dsn, s.Driver(), s.Pool(), s.SQLitePath())
			}
		default:
			if s.Driver() != "postgres" || s.Pool() == nil || s.SQLitePath() != "" {
				t.Fatalf("on PostgreSQL: Driver %q, Pool %v, SQLitePath %q; want postgres, a pool, no file", s.Driver(), s.Pool(), s.SQLitePath())
			}
			if err := s.Pool().Ping(ctx); err != nil {
				t.Errorf("Pool().Ping: %v", err)
			}
		}
	})

	exerciseAudit(t, newDSN)
	exercisePlans(t, setup)
	exerciseControl(t, setup)
	exerciseRuns(t, setup)
	exerciseServe(t, setup)
	exerciseNotify(t, setup)
	exerciseWatch(t, setup)
	exerciseAccept(t, setup)
	exerciseLineage(t, setup)
	exerciseLedger(t, setup)
	exerciseAttempts(t, setup)
	exerciseSlots(t, setup)
	t.Run("NewerSchemaRefused", func(t *testing.T) {
		t.Parallel()
		s, dsn := setup(t)
		if _, err := s.DB().ExecContext(t.Context(), `INSERT INTO refill_migrations (version, name) VALUES (999999, 'from_the_future')`); err != nil {
			t.Fatal(err)
		}
		again, err := store.Open(t.Context(), dsn, t.TempDir())
		if err == nil {
			again.Close()
			t.Fatal("Open of a database migrated by a newer refill succeeded")
		}
		if !strings.Contains(err.Error(), "999999") || !strings.Contains(err.Error(), "upgrade refill") {
			t.Fatalf("error %q does not say the schema is newer and what to do", err)
		}
	})
}

// open opens the store at dsn and closes it when the test ends.
func open(t *testing.T, dsn string) *store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), dsn, t.TempDir())
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustSave(t *testing.T, s *store.Store, p *refill.Plan) {
	t.Helper()
	if err := s.Update(t.Context(), func(tx *store.Tx) error { return RecordPlanRow(t.Context(), tx, p) }); err != nil {
		t.Fatalf("SavePlan(%s): %v", p.ID, err)
	}
}

// migrationRows lists refill_migrations as "version name" strings.
func migrationRows(t *testing.T, s *store.Store) []string {
	t.Helper()
	rows, err := s.DB().QueryContext(t.Context(), `SELECT version, name FROM refill_migrations ORDER BY version`)
	if err != nil {
		t.Fatalf("read refill_migrations: %v", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v int
		var name string
		if err := rows.Scan(&v, &name); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%d %s", v, name))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// at returns a fixed instant plus n seconds, in UTC, so that times survive a
// JSON round trip unchanged for reflect.DeepEqual.
func at(n int) time.Time {
	return time.Date(2026, 11, 5, 9, 0, n, 0, time.UTC)
}

// newPlan builds a pending plan that uses every part of a plan's structure
// (nil and set counts, findings, rules), hashed as the planner would.
// Fields tagged omitempty are either set or nil, never empty, because JSON
// cannot tell an empty slice it left out from a nil one.
func newPlan(id string, created time.Time) *refill.Plan {
	n := func(v int64) *int64 { return &v }
	p := &refill.Plan{
		ID:      id,
		Status:  refill.StatusPending,
		Tier:    refill.TierSemiAuto,
		Reasons: []string{"range is 3 days, over auto_max_days 2", "revenue_daily is tagged aggregate"},
		Request: refill.Request{
			Targets:     []string{"orders_daily", "revenue_daily"},
			From:        "2026-11-01",
			To:          "2026-11-03",
			Reason:      "late orders from the EU shard",
			RequestedBy: "ana",
			Days:        3,
		},
		Steps: []refill.Step{
			{
				Dataset:     "orders_daily",
				Order:       0,
				Kind:        refill.JobQuery,
				Table:       "orders_daily",
				Upstream:    []string{"orders"},
				Fingerprint: "sha256:aa",
				Partitions: []refill.PartitionPlan{
					{Partition: "2026-11-01", CurrentRows: n(1200), ExpectedRows: n(1250), ExpectedMethod: refill.ExpectedQuery},
					{Partition: "2026-11-02", CurrentRows: n(0), ExpectedRows: n(1300), ExpectedMethod: refill.ExpectedQuery},
					{Partition: "2026-11-03", ExpectedMethod: refill.ExpectedUnknown},
				},
			},
			{
				Dataset:     "revenue_daily",
				Order:       1,
				Kind:        refill.JobCommand,
				Tags:        []string{"aggregate"},
				Upstream:    []string{"orders_daily"},
				Fingerprint: "sha256:bb",
				Partitions: []refill.PartitionPlan{
					{Partition: "2026-11-01", CurrentRows: n(1), ExpectedRows: n(1), ExpectedMethod: refill.ExpectedHistory},
					{Partition: "2026-11-02", ExpectedMethod: refill.ExpectedRehearsal},
				},
			},
		},
		Sources: []string{"orders"},
		Gate: refill.GateVerdict{
			Passed:  true,
			Checked: []string{"orders"},
			Findings: []refill.Finding{
				{Dataset: "orders", Partition: "2026-11-01", Check: "not_null", Column: "amount", Observed: 0.001, Limit: 0.01, Passed: true},
				{Dataset: "orders", Check: "volume", Observed: 2, Limit: 4, Passed: true, Warning: true, Message: "insufficient history"},
			},
		},
		Policy:    refill.DefaultPolicy(),
		CreatedAt: created,
	}
	p.Policy.Rules = []refill.Rule{{Name: "eu", When: "'orders' in sources", Tier: refill.TierSemiAuto, Reason: "EU data"}}
	p.Hash = p.ComputeHash()
	return p
}
