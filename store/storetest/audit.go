package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
)

// exerciseAudit is the part of the suite about the audit log's defences
// against someone who can write the state store but holds neither the audit
// key nor the anchor kept outside it: the real clock, keyed entries, the
// upgrade from an unkeyed log, anchors, and the incremental check run
// before each write. Each attack is played with raw SQL through Store.DB,
// recomputing hashes the way such a person could.
func exerciseAudit(t *testing.T, newDSN func(t *testing.T) string) {
	t.Helper()
	key := []byte("the audit key, from audit.key_env")

	// setup opens a store on a new database with key (nil: none).
	setup := func(t *testing.T, key []byte) (*store.Store, string) {
		t.Helper()
		dsn := newDSN(t)
		s := open(t, dsn)
		s.SetAuditKey(key)
		return s, dsn
	}

	t.Run("AlteredEntriesDecideNothing", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t, key)
		ctx := t.Context()
		p := newPlan("p-alt", at(0))
		other := newPlan("p-oth", at(1))
		other.Request.Reason = "another plan"
		other.Hash = other.ComputeHash()
		for _, pl := range []*refill.Plan{p, other} {
			if err := s.Update(ctx, func(tx *store.Tx) error { return RecordPlanRow(ctx, tx, pl) }); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Update(ctx, func(tx *store.Tx) error {
			return RecordApproval(ctx, tx, refill.Approval{PlanID: other.ID, PlanHash: other.Hash, Actor: "carol", Decision: refill.DecisionApprove, At: at(2)})
		}); err != nil {
			t.Fatal(err)
		}
		// Both the approval's row and its entry moved onto p, in place,
		// by someone without the key.
		exec(t, s, s.Rebind(`UPDATE approvals SET plan_id = 'p-alt', plan_hash = '`+p.Hash+`'`))
		exec(t, s, s.Rebind(`UPDATE audit_log SET plan_id = 'p-alt', detail = replace(detail, '`+other.Hash+`', '`+p.Hash+`') WHERE event = 'approval'`))
		if got, err := s.Approvals(ctx, p.ID); !errors.Is(err, refill.ErrVerification) || !strings.Contains(err.Error(), "was altered") {
			t.Errorf("Approvals over an altered entry = %+v, %v; want a verification failure", got, err)
		}
		if _, err := s.Audit(ctx, store.AuditFilter{PlanID: p.ID}); !errors.Is(err, refill.ErrVerification) {
			t.Errorf("Audit over an altered entry = %v", err)
		}
		if got, err := s.Audit(ctx, store.AuditFilter{PlanID: p.ID, Unchecked: true}); err != nil || len(got) != 2 {
			t.Errorf("Audit unchecked = %d entries, %v; want the plan's and the altered one", len(got), err)
		}
	})

	t.Run("AnchorsOfAStorePutBack", func(t *testing.T) {
		t.Parallel()
		s, dsn := setup(t, key)
		ctx := t.Context()
		appendN := func(n int) {
			for range n {
				if err := s.Update(ctx, func(tx *store.Tx) error {
					return tx.Append(ctx, &refill.Event{Kind: refill.EventApproval, Actor: "carol", PlanID: "p1"})
				}); err != nil {
					t.Fatal(err)
				}
			}
		}
		id, err := s.ID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		anchorNow := func() refill.AuditAnchor {
			h, err := s.AuditHead(ctx)
			if err != nil {
				t.Fatal(err)
			}
			h.Store = id
			return s.SealAnchor(h)
		}
		appendN(3)
		first := anchorNow()
		appendN(2)
		second := anchorNow()
		wh := &anchors{list: []refill.AuditAnchor{first, second}}
		if err := s.CheckAnchors(ctx, wh.list); err != nil {
			t.Fatalf("CheckAnchors of a whole log: %v", err)
		}
		if err := s.CheckLatestAnchor(ctx, wh); err != nil {
			t.Fatalf("CheckLatestAnchor of a whole log: %v", err)
		}
		if err := s.CheckLatestAnchor(ctx, nil); err != nil {
			t.Fatalf("CheckLatestAnchor without a warehouse: %v", err)
		}
		// The log put back to just after the first anchor: the latest
		// anchor names an entry the log no longer holds.
		cut(t, s, dsn, first.Seq)
		if err := s.CheckLatestAnchor(ctx, wh); !errors.Is(err, refill.ErrVerification) || !strings.Contains(err.Error(), "the state store is older than the warehouse") {
			t.Errorf("CheckLatestAnchor after a put-back = %v", err)
		}
		// Grown again past the latest anchor: the latest passes no more
		// than before, and the older ones name entries with other hashes.
		appendN(4)
		if err := s.CheckAnchors(ctx, wh.list); !errors.Is(err, refill.ErrVerification) || !strings.Contains(err.Error(), "is not the entry the warehouse anchored") {
			t.Errorf("CheckAnchors of a log put back and grown = %v", err)
		}
		// A publish names the anchor it wrote; one the warehouse no
		// longer holds is missed. A store whose log records publishes but
		// that has no anchor at all (its id changed, its anchors deleted)
		// is refused.
		if err := s.Update(ctx, func(tx *store.Tx) error {
			return tx.Append(ctx, &refill.Event{Kind: refill.EventPartitionPublished, Actor: "refill", PlanID: "p1", Dataset: "d", Partition: "2026-11-01",
				Detail: refill.Detail(map[string]any{"anchor": second.Seq})})
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.CheckPublishesAnchored(ctx, wh.list); err != nil {
			t.Errorf("CheckPublishesAnchored with the anchor there = %v", err)
		}
		if err := s.CheckPublishesAnchored(ctx, wh.list[:1]); !errors.Is(err, refill.ErrVerification) || !strings.Contains(err.Error(), "which the warehouse no longer holds") {
			t.Errorf("CheckPublishesAnchored with it deleted = %v", err)
		}
		if err := s.CheckLatestAnchor(ctx, &anchors{}); !errors.Is(err, refill.ErrVerification) || !strings.Contains(err.Error(), "holds no audit anchor of this state store") {
			t.Errorf("CheckLatestAnchor with none and publishes logged = %v", err)
		}
		forged := first
		forged.MAC = "hmac-sha256:00"
		if err := s.CheckAnchors(ctx, []refill.AuditAnchor{forged}); !errors.Is(err, refill.ErrVerification) || !strings.Contains(err.Error(), "MAC") {
			t.Errorf("CheckAnchors of an altered anchor = %v", err)
		}
	})

	t.Run("AnchorLandingWhileChecked", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t, key)
		ctx := t.Context()
		id, err := s.ID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Another partition publishes while this check runs: its anchor
		// lands in the warehouse after the warehouse was read, and its
		// entry here before the log is counted. That is no deletion.
		h, err := s.AuditHead(ctx)
		if err != nil {
			t.Fatal(err)
		}
		h.Store = id
		landing := &landingAnchors{anchor: s.SealAnchor(h)}
		if err := s.Update(ctx, func(tx *store.Tx) error {
			return tx.Append(ctx, &refill.Event{Kind: refill.EventPartitionPublished, Actor: "refill", PlanID: "p1", Dataset: "d", Partition: "2026-11-01",
				Detail: refill.Detail(map[string]any{"anchor": h.Seq})})
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.CheckLatestAnchor(ctx, landing); err != nil {
			t.Errorf("CheckLatestAnchor while an anchor lands = %v", err)
		}
		if landing.reads != 2 {
			t.Errorf("the warehouse was read %d times, want twice (again after the count)", landing.reads)
		}
	})

	t.Run("AuditRealClock", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t, nil)
		ctx := t.Context()
		asOf := time.Now().Add(-72 * time.Hour).Truncate(time.Microsecond).UTC() // REFILL_NOW, three days back
		cases := []struct {
			name   string
			at     time.Time
			wantAs time.Time
		}{
			{"a moved clock is kept as as_of", asOf.Add(789 * time.Nanosecond), asOf},
			{"the real clock is not repeated", time.Now(), time.Time{}},
			{"no clock", time.Time{}, time.Time{}},
			{"a clock in the future", time.Now().Add(48 * time.Hour).Truncate(time.Microsecond), time.Now().Add(48 * time.Hour).Truncate(time.Microsecond)},
		}
		var written []refill.Event
		for _, c := range cases {
			before := time.Now().Truncate(time.Microsecond)
			e := &refill.Event{Kind: refill.EventApproval, Actor: "carol", PlanID: "p1", At: c.at}
			if err := s.Update(ctx, func(tx *store.Tx) error { return tx.Append(ctx, e) }); err != nil {
				t.Fatalf("%s: Append: %v", c.name, err)
			}
			after := time.Now()
			if e.At.Before(before) || e.At.After(after) {
				t.Errorf("%s: at = %s, want the real clock, between %s and %s", c.name, e.At, before, after)
			}
			// The future case's wanted time was taken a moment after c.at.
			if c.wantAs.IsZero() != e.AsOf.IsZero() || (!c.wantAs.IsZero() && e.AsOf.Sub(c.wantAs).Abs() > time.Second) {
				t.Errorf("%s: as_of = %s, want %s", c.name, e.AsOf, c.wantAs)
			}
			written = append(written, *e)
		}
		if !written[0].AsOf.Equal(asOf) {
			t.Errorf("as_of = %s, want the caller's clock cut to microseconds, %s", written[0].AsOf, asOf)
		}
		got, err := s.Audit(ctx, store.AuditFilter{})
		if err != nil || len(got) != len(written) {
			t.Fatalf("Audit = %d entries, %v", len(got), err)
		}
		for i, e := range got {
			if !e.At.Equal(written[i].At) || !e.AsOf.Equal(written[i].AsOf) || e.Hash != written[i].Hash || e.ComputeHash() != e.Hash {
				t.Errorf("entry %d read back as at %s as_of %s hash %s; written at %s as_of %s hash %s",
					e.Seq, e.At, e.AsOf, e.Hash, written[i].At, written[i].AsOf, written[i].Hash)
			}
		}
		// An entry without as_of hashes exactly as entries did before as_of
		// existed, so logs written then still verify.
		if legacy := legacyHash(got[1]); got[1].Hash != legacy {
			t.Errorf("an entry without as_of hashes to %s, the hash before as_of existed is %s", got[1].Hash, legacy)
		}
		if b, _ := json.Marshal(got[1]); strings.Contains(string(b), "as_of") {
			t.Errorf("an entry without as_of shows one: %s", b)
		}
		if rep, err := s.VerifyAudit(ctx); err != nil || !rep.OK {
			t.Fatalf("VerifyAudit: %+v, %v", rep, err)
		}
		// as_of is covered by the hash: moving it is an alteration.
		exec(t, s, `UPDATE audit_log SET as_of = NULL WHERE seq = 1`)
		rep, err := s.VerifyAudit(ctx)
		wantBroken(t, "VerifyAudit", rep, err, 1, "was altered")
	})

	t.Run("AuditKeyedChain", func(t *testing.T) {
		t.Parallel()
		s, dsn := setup(t, key)
		ctx := t.Context()
		appendEntries(t, s, 5)
		got, err := s.Audit(ctx, store.AuditFilter{})
		if err != nil || len(got) != 5 {
			t.Fatalf("Audit = %v, %v", got, err)
		}
		for _, e := range got {
			if !e.Keyed() || e.Hash != e.ComputeKeyedHash(key) {
				t.Errorf("entry %d is hashed %s, want HMAC-SHA256 under the key", e.Seq, e.Hash)
			}
		}
		for _, v := range verifiers(ctx, s) {
			rep, err := v.verify(store.VerifyOptions{})
			if err != nil || !rep.OK || !rep.Keyed || rep.KeyedFrom != 1 || rep.Entries != 5 || rep.Head != got[4].Hash || rep.Warning != "" {
				t.Errorf("%s of a keyed log: %+v, %v; want ok, keyed from 1, 5 entries, no warning", v.name, rep, err)
			}
		}
		head, err := s.AuditHead(ctx)
		if err != nil || head != (refill.AuditAnchor{Seq: 5, Hash: got[4].Hash, Keyed: true}) {
			t.Errorf("AuditHead = %+v, %v; want entry 5, keyed", head, err)
		}
		// The same log under another key does not verify, and says the key
		// may be the reason.
		other := open(t, dsn)
		other.SetAuditKey([]byte("some other key"))
		rep, err := other.VerifyAudit(ctx)
		wantBroken(t, "VerifyAudit", rep, err, 1, "not the one the log was keyed with")
	})

	t.Run("AuditHead", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t, key)
		ctx := t.Context()
		if h, err := s.AuditHead(ctx); err != nil || h != (refill.AuditAnchor{Seq: 0, Hash: refill.GenesisHash}) {
			t.Fatalf("AuditHead of an empty log = %+v, %v; want entry 0 and the genesis hash", h, err)
		}
		appendEntries(t, s, 2)
		e := &refill.Event{Kind: refill.EventPartitionPublished, Actor: "refill", PlanID: "p"}
		var inTx refill.AuditAnchor
		err := s.Update(t.Context(), func(tx *store.Tx) error {
			if err := tx.Append(ctx, e); err != nil {
				return err
			}
			var err error
			inTx, err = tx.AuditHead(ctx)
			return err
		})
		if err != nil || inTx != (refill.AuditAnchor{Seq: 3, Hash: e.Hash, Keyed: true}) {
			t.Fatalf("Tx.AuditHead after an append = %+v, %v; want entry 3, %s, keyed", inTx, err, e.Hash)
		}
		if h, err := s.AuditHead(ctx); err != nil || h != inTx {
			t.Fatalf("AuditHead = %+v, %v; want %+v", h, err, inTx)
		}
	})

	// Someone without the key rewrites entry 3 and hashes it again, and
	// perhaps every entry after it and the head too.
	t.Run("AuditRewrittenAndRehashed", func(t *testing.T) {
		t.Parallel()
		mallory := func(e *refill.Event) { e.Actor = "mallory" }
		plain := func(e *refill.Event) string { return e.ComputeHash() }
		ownKey := func(e *refill.Event) string { return e.ComputeKeyedHash([]byte("mallory's own key")) }
		for _, tc := range []struct {
			name    string
			to      int64 // last entry re-hashed; 0: every one, and the head
			hash    func(*refill.Event) string
			extra   string
			seq     int64
			problem string
		}{
			{"one entry, plain hash", 3, plain, "", 3, "is not keyed, but the log is keyed from entry 1"},
			{"to the end, plain hash", 0, plain, "", 3, "is not keyed, but the log is keyed from entry 1"},
			{"to the end, another key", 0, ownKey, "", 3, "no longer matches its keyed hash"},
			{"to the end, keyed_from moved past it", 0, plain, "UPDATE audit_head SET keyed_from = 4", 1, "is keyed, but the log is keyed only from entry 4"},
			{"to the end, keyed_from removed", 0, plain, "UPDATE audit_head SET keyed_from = NULL", 1, "no record of where keying began"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				ctx := t.Context()
				s, _ := setup(t, key)
				appendEntries(t, s, 5)
				rewrite(t, s, 3, tc.to, mallory, tc.hash)
				if tc.extra != "" {
					exec(t, s, tc.extra)
				}
				for _, v := range verifiers(ctx, s) {
					rep, err := v.verify(store.VerifyOptions{})
					wantBroken(t, v.name, rep, err, tc.seq, tc.problem)
				}
			})
		}
	})

	t.Run("AuditAnchor", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name   string
			key    []byte
			tamper func(t *testing.T, s *store.Store)
			seq    int64
			// clean: the tampering cannot be seen without the anchor.
			clean   bool
			problem string
		}{
			{"truncated", nil, func(t *testing.T, s *store.Store) {
				head := entries(t, s)[2]
				exec(t, s, `DELETE FROM audit_log WHERE seq > 3`)
				exec(t, s, fmt.Sprintf(`UPDATE audit_head SET seq = 3, hash = %s`, quote(head.Hash)))
				exec(t, s, `DELETE FROM audit_checkpoint`)
			}, 4, true, "the anchor outside the state store says the log held entry 4"},
			{"truncated, keyed", key, func(t *testing.T, s *store.Store) {
				head := entries(t, s)[2]
				exec(t, s, `DELETE FROM audit_log WHERE seq > 3`)
				exec(t, s, fmt.Sprintf(`UPDATE audit_head SET seq = 3, hash = %s`, quote(head.Hash)))
				exec(t, s, `DELETE FROM audit_checkpoint`)
			}, 4, false, "the anchor outside the state store says the log held entry 4"},
			{"rewritten and re-hashed past the anchor", nil, func(t *testing.T, s *store.Store) {
				rewrite(t, s, 2, 0, func(e *refill.Event) { e.Actor = "mallory" }, (*refill.Event).ComputeHash)
				exec(t, s, `DELETE FROM audit_checkpoint`)
			}, 4, true, "does not match the anchor"},
			// The whole keyed log rewritten as an unkeyed one, with its
			// mark removed: it looks like a log from before keys.
			{"keyed log rewritten as unkeyed", key, func(t *testing.T, s *store.Store) {
				rewrite(t, s, 1, 0, func(e *refill.Event) { e.Actor = "mallory" }, (*refill.Event).ComputeHash)
				exec(t, s, `UPDATE audit_head SET keyed_from = NULL`)
				exec(t, s, `DELETE FROM audit_checkpoint`)
			}, 4, true, "anchored in the warehouse while the log was keyed, but the log is not keyed: it was downgraded"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				s, _ := setup(t, tc.key)
				ctx := t.Context()
				appendEntries(t, s, 4)
				anchor, err := s.AuditHead(ctx)
				if err != nil || anchor.Seq != 4 {
					t.Fatalf("AuditHead = %+v, %v", anchor, err)
				}
				appendEntries(t, s, 2)
				opts := store.VerifyOptions{Anchor: &anchor}
				for _, v := range verifiers(ctx, s) {
					rep, err := v.verify(opts)
					if err != nil || !rep.OK || rep.Anchor == nil || *rep.Anchor != anchor {
						t.Fatalf("%s against the anchor before tampering: %+v, %v", v.name, rep, err)
					}
				}
				tc.tamper(t, s)
				if tc.clean {
					if rep, err := s.VerifyAudit(ctx); err != nil || !rep.OK {
						t.Fatalf("the tampering was meant to be invisible without the anchor, but VerifyAudit says %+v, %v", rep.Broken, err)
					}
				}
				for _, v := range verifiers(ctx, s) {
					rep, err := v.verify(opts)
					wantBroken(t, v.name, rep, err, tc.seq, tc.problem)
				}
			})
		}
	})

	// Entries written after the last anchor are cut from the end of a
	// keyed log, the head moved back and the checkpoint (which would show
	// the cut) deleted: the missing checkpoint gives it away, with no
	// anchor at all.
	t.Run("AuditKeyedTailCut", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t, key)
		ctx := t.Context()
		appendEntries(t, s, 3)
		if _, err := s.VerifyAuditFrom(ctx); err != nil { // a write moves the checkpoint on
			t.Fatal(err)
		}
		appendEntries(t, s, 3)
		if rep, err := s.VerifyAudit(ctx); err != nil || !rep.OK {
			t.Fatalf("VerifyAudit before tampering: %+v, %v", rep, err)
		}
		head := entries(t, s)[3]
		exec(t, s, `DELETE FROM audit_log WHERE seq > 4`)
		exec(t, s, fmt.Sprintf(`UPDATE audit_head SET seq = 4, hash = %s`, quote(head.Hash)))
		exec(t, s, `DELETE FROM audit_checkpoint`)
		rep, err := s.VerifyAudit(ctx)
		wantBroken(t, "VerifyAudit", rep, err, 4, "verification checkpoint is missing, though the log is keyed from entry 1")
	})

	// The warehouse finds a store's anchors by its id, which someone who
	// can write the state store can change: anchors of other ids and none
	// of this one fail, unless a MAC shows they are another key's.
	t.Run("AuditAnchorsElsewhere", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t, key)
		other, _ := setup(t, []byte("another store's key"))
		ctx := t.Context()
		appendEntries(t, s, 4)
		appendEntries(t, other, 2)
		head, err := s.AuditHead(ctx)
		if err != nil || !head.Keyed {
			t.Fatalf("AuditHead of a keyed log = %+v, %v; want it keyed", head, err)
		}
		head.Store = "old-id"
		ours := s.SealAnchor(head)
		if !strings.HasPrefix(ours.MAC, refill.HashKeyed) {
			t.Fatalf("SealAnchor with a key = %+v; want a keyed MAC", ours)
		}
		theirs, err := other.AuditHead(ctx)
		if err != nil {
			t.Fatal(err)
		}
		theirs.Store = "their-id"
		theirs = other.SealAnchor(theirs)
		legacy := refill.AuditAnchor{Store: "legacy-id", Seq: 9, Hash: "sha256:legacy"}
		moved := ours
		moved.Store = "new-id"
		for _, c := range []struct {
			name    string
			opts    store.VerifyOptions
			seq     int64
			problem string // "": the log verifies
		}{
			{"this store's anchors under its old id", store.VerifyOptions{Elsewhere: []refill.AuditAnchor{theirs, ours}}, 0,
				"the warehouse holds audit anchors of another state store (ids old-id) but none of this one: the store id may have been changed"},
			{"anchors without a MAC could be this store's", store.VerifyOptions{Elsewhere: []refill.AuditAnchor{legacy}}, 0, "(ids legacy-id)"},
			{"only anchors of a store with another key", store.VerifyOptions{Elsewhere: []refill.AuditAnchor{theirs}}, 0, ""},
			{"an anchor moved to this store's new id", store.VerifyOptions{Anchor: &moved}, 4, "does not match store id new-id"},
			{"this store's own anchor", store.VerifyOptions{Anchor: &ours}, 0, ""},
		} {
			for _, v := range verifiers(ctx, s) {
				rep, err := v.verify(c.opts)
				switch {
				case c.problem == "":
					if err != nil || !rep.OK {
						t.Errorf("%s, %s: %+v, %v; want it to verify", c.name, v.name, rep.Broken, err)
					}
				case c.seq == 0:
					if !errors.Is(err, refill.ErrVerification) || rep.OK || rep.Broken == nil || !strings.Contains(err.Error(), c.problem) {
						t.Errorf("%s, %s: %+v, %v; want it to fail with %q", c.name, v.name, rep.Broken, err, c.problem)
					}
				default:
					wantBroken(t, c.name+", "+v.name, rep, err, c.seq, c.problem)
				}
			}
		}
	})

	t.Run("AuditKeyedLogWithoutKey", func(t *testing.T) {
		t.Parallel()
		s, dsn := setup(t, key)
		ctx := t.Context()
		appendEntries(t, s, 3)
		keyless := open(t, dsn)
		wantKeyError := func(what string, err error) {
			t.Helper()
			var kerr *store.AuditKeyError
			if !errors.As(err, &kerr) || kerr.KeyedFrom != 1 || !errors.Is(err, refill.ErrBadInput) {
				t.Errorf("%s without the key: %v; want an AuditKeyError (bad input) keyed from 1", what, err)
				return
			}
			if msg := err.Error(); !strings.Contains(msg, "keyed from entry 1") || !strings.Contains(msg, "audit.key_env") {
				t.Errorf("%s without the key: %q does not say the log is keyed and where the key comes from", what, msg)
			}
		}
		err := keyless.Update(ctx, func(tx *store.Tx) error {
			return tx.Append(ctx, &refill.Event{Kind: refill.EventApproval, Actor: "carol"})
		})
		wantKeyError("Append", err)
		_, err = keyless.VerifyAudit(ctx)
		wantKeyError("VerifyAudit", err)
		_, err = keyless.VerifyAuditFrom(ctx)
		wantKeyError("VerifyAuditFrom", err)
		if got := entries(t, s); len(got) != 3 {
			t.Fatalf("a refused append wrote: %d entries", len(got))
		}

		// An unkeyed entry added after keyed ones by hand, chained and with
		// the head moved, is what someone without the key could write.
		last := entries(t, s)[2]
		forged := refill.Event{Seq: 4, At: last.At, Actor: "mallory", Kind: refill.EventApproval, PlanID: "p-forged", Detail: []byte("{}"), PrevHash: last.Hash}
		forged.Hash = forged.ComputeHash()
		exec(t, s, fmt.Sprintf(`INSERT INTO audit_log (seq, at, actor, event, plan_id, detail, prev_hash, hash)
			SELECT 4, at, 'mallory', %s, 'p-forged', '{}', %s, %s FROM audit_log WHERE seq = 3`,
			quote(string(forged.Kind)), quote(forged.PrevHash), quote(forged.Hash)))
		exec(t, s, fmt.Sprintf(`UPDATE audit_head SET seq = 4, hash = %s`, quote(forged.Hash)))
		for _, v := range verifiers(ctx, s) {
			rep, err := v.verify(store.VerifyOptions{})
			wantBroken(t, v.name, rep, err, 4, "is not keyed, but the log is keyed from entry 1")
		}
	})

	// An install from before keys: its unkeyed chain is verified unkeyed up
	// to keyed_from, which the first keyed entry marks, and keyed after.
	t.Run("AuditLegacyThenKeyed", func(t *testing.T) {
		t.Parallel()
		s, dsn := setup(t, nil)
		ctx := t.Context()
		// Entries as refill wrote them before keys and as_of: no caller's
		// clock, plain hashes.
		err := s.Update(ctx, func(tx *store.Tx) error {
			for i := range 3 {
				if err := tx.Append(ctx, &refill.Event{Kind: refill.EventPlanCreated, Actor: "ana", PlanID: fmt.Sprintf("p%d", i)}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries(t, s) {
			if e.Keyed() || !e.AsOf.IsZero() || e.Hash != legacyHash(e) {
				t.Fatalf("entry %d is not as entries were before keys: %+v", e.Seq, e)
			}
		}
		rep, err := s.VerifyAuditFrom(ctx)
		if err != nil || !rep.OK || rep.Keyed || !strings.Contains(rep.Warning, "anyone who can write the state store can rewrite it: set audit.key_env") {
			t.Fatalf("VerifyAuditFrom of an unkeyed log: %+v, %v; want ok and a warning", rep, err)
		}

		// The key is set (audit.key_env): nothing is keyed until the next
		// entry, which marks keyed_from.
		s.SetAuditKey(key)
		rep, err = s.VerifyAudit(ctx)
		if err != nil || !rep.OK || rep.Keyed || !strings.Contains(rep.Warning, "not keyed yet") {
			t.Fatalf("VerifyAudit with a key before any keyed entry: %+v, %v", rep, err)
		}
		appendEntries(t, s, 3)
		for _, e := range entries(t, s) {
			if e.Keyed() != (e.Seq >= 4) {
				t.Errorf("entry %d keyed = %v", e.Seq, e.Keyed())
			}
		}
		// The incremental check starts from the unkeyed checkpoint at 3,
		// which is before keyed_from and so still trusted: it reads that
		// entry and the three keyed ones, and leaves a keyed checkpoint.
		rep, err = s.VerifyAuditFrom(ctx)
		if err != nil || !rep.OK || !rep.Keyed || rep.KeyedFrom != 4 || rep.From != 3 || rep.Read != 4 || rep.Warning != "" {
			t.Errorf("VerifyAuditFrom after the upgrade: %+v, %v; want ok, keyed from 4, from 3, 4 read, no warning", rep, err)
		}
		if got := checkpointSeq(t, s); got != 6 {
			t.Fatalf("checkpoint at %d, want 6", got)
		}
		rep, err = s.VerifyAudit(ctx)
		if err != nil || !rep.OK || !rep.Keyed || rep.KeyedFrom != 4 || rep.Entries != 6 || rep.Warning != "" {
			t.Errorf("VerifyAudit after the upgrade: %+v, %v; want ok, keyed from 4, no warning", rep, err)
		}

		// The unkeyed part is sealed by the keyed entry after it: rewriting
		// and re-hashing entry 2 (and 3) breaks entry 4's link.
		again := open(t, dsn)
		again.SetAuditKey(key)
		rewrite(t, again, 2, 3, func(e *refill.Event) { e.Actor = "mallory" }, (*refill.Event).ComputeHash)
		rep, err = again.VerifyAudit(ctx)
		wantBroken(t, "VerifyAudit", rep, err, 4, "does not follow entry 3")
	})

	t.Run("AuditIncremental", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name string
			key  []byte
		}{{"unkeyed", nil}, {"keyed", key}} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				ctx := t.Context()
				// fresh is a log of n entries verified up to its head.
				fresh := func(t *testing.T, n int) *store.Store {
					t.Helper()
					s, _ := setup(t, tc.key)
					appendEntries(t, s, n)
					rep, err := s.VerifyAuditFrom(ctx)
					if err != nil || !rep.OK || rep.From != 0 || rep.Read != n {
						t.Fatalf("first VerifyAuditFrom: %+v, %v; want every entry read", rep, err)
					}
					if got := checkpointSeq(t, s); got != int64(n) {
						t.Fatalf("checkpoint at %d after verifying %d entries", got, n)
					}
					return s
				}

				t.Run("reads only what was written since", func(t *testing.T) {
					t.Parallel()
					for _, n := range []int{10, 200} {
						s := fresh(t, n)
						rep, err := s.VerifyAuditFrom(ctx)
						if err != nil || rep.From != int64(n) || rep.Read != 1 {
							t.Errorf("%d entries, nothing new: %+v, %v; want only the checkpoint's entry read", n, rep, err)
						}
						appendEntries(t, s, 3)
						rep, err = s.VerifyAuditFrom(ctx)
						if err != nil || !rep.OK || rep.From != int64(n) || rep.Read != 4 || rep.Entries != n+3 {
							t.Errorf("%d entries, 3 new: %+v, %v; want the checkpoint's entry and the 3 new ones read", n, rep, err)
						}
						if got := checkpointSeq(t, s); got != int64(n+3) {
							t.Errorf("checkpoint at %d, want %d", got, n+3)
						}
						// What it does not read, it does not see: an entry
						// before the checkpoint altered escapes it, and the
						// full walk catches it.
						exec(t, s, `UPDATE audit_log SET actor = 'mallory' WHERE seq = 5`)
						if rep, err := s.VerifyAuditFrom(ctx); err != nil || rep.Read != 1 {
							t.Errorf("VerifyAuditFrom read entry 5, before its checkpoint: %+v, %v", rep, err)
						}
						rep, err = s.VerifyAudit(ctx)
						wantBroken(t, "VerifyAudit", rep, err, 5, "was altered")
					}
				})

				tampers := []struct {
					name    string
					tamper  func(t *testing.T, s *store.Store)
					seq     int64
					problem string
					keyed   bool // only a keyed log can tell
				}{
					{"altered after the checkpoint", func(t *testing.T, s *store.Store) {
						exec(t, s, `UPDATE audit_log SET actor = 'mallory' WHERE seq = 12`)
					}, 12, "altered", false},
					{"checkpoint's entry replaced and the rest re-hashed", func(t *testing.T, s *store.Store) {
						rewrite(t, s, 10, 0, func(e *refill.Event) { e.Actor = "mallory" }, (*refill.Event).ComputeHash)
					}, 10, "was replaced", false},
					{"truncated below the checkpoint", func(t *testing.T, s *store.Store) {
						if _, err := s.VerifyAuditFrom(t.Context()); err != nil {
							t.Fatal(err)
						}
						head := entries(t, s)[8]
						exec(t, s, `DELETE FROM audit_log WHERE seq > 9`)
						exec(t, s, fmt.Sprintf(`UPDATE audit_head SET seq = 9, hash = %s`, quote(head.Hash)))
					}, 10, "verified up to entry 13", false},
					{"checkpoint moved past an altered entry, plain", func(t *testing.T, s *store.Store) {
						exec(t, s, `UPDATE audit_log SET actor = 'mallory' WHERE seq = 12`)
						exec(t, s, fmt.Sprintf(`UPDATE audit_checkpoint SET seq = 13, hash = %s, mac = 'sha256:0123'`, quote(entries(t, s)[12].Hash)))
					}, 13, "checkpoint at this entry is not keyed", true},
					{"checkpoint moved past an altered entry, forged MAC", func(t *testing.T, s *store.Store) {
						exec(t, s, `UPDATE audit_log SET actor = 'mallory' WHERE seq = 12`)
						exec(t, s, fmt.Sprintf(`UPDATE audit_checkpoint SET seq = 13, hash = %s, mac = 'hmac-sha256:0123'`, quote(entries(t, s)[12].Hash)))
					}, 13, "checkpoint at this entry was altered", true},
				}
				for _, tp := range tampers {
					if tp.keyed && tc.key == nil {
						continue
					}
					t.Run(tp.name, func(t *testing.T) {
						t.Parallel()
						s := fresh(t, 10)
						appendEntries(t, s, 3)
						tp.tamper(t, s)
						rep, err := s.VerifyAuditFrom(ctx)
						wantBroken(t, "VerifyAuditFrom", rep, err, tp.seq, tp.problem)
						if tp.keyed {
							// The full walk checks the checkpoint too.
							rep, err = s.VerifyAudit(ctx)
							if err == nil || rep.OK {
								t.Errorf("VerifyAudit missed a forged checkpoint: %+v", rep)
							}
						} else if got := checkpointSeq(t, s); got > 13 {
							t.Errorf("a failed check moved the checkpoint to %d", got)
						}
					})
				}
			})
		}
	})
}

// verifier is one of the two ways of verifying the log, full and
// incremental, for tests that expect both to find the same.
type verifier struct {
	name   string
	verify func(store.VerifyOptions) (store.AuditReport, error)
}

func verifiers(ctx context.Context, s *store.Store) []verifier {
	return []verifier{
		{"VerifyAudit", func(o store.VerifyOptions) (store.AuditReport, error) { return s.VerifyAudit(ctx, o) }},
		{"VerifyAuditFrom", func(o store.VerifyOptions) (store.AuditReport, error) { return s.VerifyAuditFrom(ctx, o) }},
	}
}

// appendEntries appends n entries, all in one transaction, with the
// caller's clock fixed in the past as REFILL_NOW would have it.
func appendEntries(t *testing.T, s *store.Store, n int) {
	t.Helper()
	ctx := t.Context()
	err := s.Update(ctx, func(tx *store.Tx) error {
		for i := range n {
			err := tx.Append(ctx, &refill.Event{Kind: refill.EventApproval, Actor: "carol", PlanID: fmt.Sprintf("p%d", i),
				Dataset: "agg", Partition: "2026-11-02", At: at(i), Detail: refill.Detail(map[string]any{"n": i})})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("append %d entries: %v", n, err)
	}
}

func entries(t *testing.T, s *store.Store) []refill.Event {
	t.Helper()
	got, err := s.Audit(t.Context(), store.AuditFilter{Unchecked: true})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// rewrite plays someone who can write the state store: it changes entry
// from with change, then hashes entries from..to (0: to the end, and the
// head with them) again with hash, each chained to the one before.
func rewrite(t *testing.T, s *store.Store, from, to int64, change func(*refill.Event), hash func(*refill.Event) string) {
	t.Helper()
	all := entries(t, s)
	prev := ""
	var last refill.Event
	for _, e := range all {
		if e.Seq < from || (to > 0 && e.Seq > to) {
			prev = e.Hash
			continue
		}
		if e.Seq == from {
			change(&e)
		}
		e.PrevHash = prev
		if e.Seq == 1 {
			e.PrevHash = refill.GenesisHash
		}
		e.Hash = hash(&e)
		exec(t, s, fmt.Sprintf(`UPDATE audit_log SET actor = %s, prev_hash = %s, hash = %s WHERE seq = %d`,
			quote(e.Actor), quote(e.PrevHash), quote(e.Hash), e.Seq))
		prev, last = e.Hash, e
	}
	if to == 0 {
		exec(t, s, fmt.Sprintf(`UPDATE audit_head SET seq = %d, hash = %s`, last.Seq, quote(last.Hash)))
	}
}

// legacyHash is an entry's hash as refill computed it before entries had
// as_of or keys.
func legacyHash(e refill.Event) string {
	b, _ := json.Marshal(struct {
		Seq       int64  `json:"seq"`
		At        string `json:"at"`
		Actor     string `json:"actor"`
		Kind      string `json:"event"`
		PlanID    string `json:"plan_id"`
		Dataset   string `json:"dataset"`
		Partition string `json:"partition"`
		Detail    string `json:"detail"`
		PrevHash  string `json:"prev_hash"`
	}{e.Seq, e.At.UTC().Format(time.RFC3339Nano), e.Actor, string(e.Kind), e.PlanID, e.Dataset, e.Partition, string(e.Detail), e.PrevHash})
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func checkpointSeq(t *testing.T, s *store.Store) int64 {
	t.Helper()
	var seq int64
	if err := s.DB().QueryRowContext(t.Context(), `SELECT seq FROM audit_checkpoint WHERE id = 1`).Scan(&seq); err != nil {
		t.Fatalf("read the checkpoint: %v", err)
	}
	return seq
}

func wantBroken(t *testing.T, what string, rep store.AuditReport, err error, seq int64, problem string) {
	t.Helper()
	if !errors.Is(err, refill.ErrVerification) || rep.OK || rep.Broken == nil || rep.Broken.Seq != seq || !strings.Contains(rep.Broken.Problem, problem) {
		t.Errorf("%s: got report %+v, err %v; want entry %d %q", what, rep.Broken, err, seq, problem)
		return
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("entry %d", seq)) {
		t.Errorf("%s: error %q does not name entry %d", what, err, seq)
	}
}

func exec(t *testing.T, s *store.Store, q string) {
	t.Helper()
	if _, err := s.DB().ExecContext(t.Context(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// anchors is a warehouse's audit anchors of one store, oldest first.
type anchors struct{ list []refill.AuditAnchor }

func (a *anchors) LatestAnchor(context.Context, string) (refill.AuditAnchor, bool, error) {
	if len(a.list) == 0 {
		return refill.AuditAnchor{}, false, nil
	}
	return a.list[len(a.list)-1], true, nil
}
func (a *anchors) LatestAnchors(ctx context.Context) ([]refill.AuditAnchor, error) {
	l, ok, err := a.LatestAnchor(ctx, "")
	if !ok {
		return nil, err
	}
	return []refill.AuditAnchor{l}, err
}
func (a *anchors) Anchors(context.Context, string) ([]refill.AuditAnchor, error) { return a.list, nil }

// landingAnchors holds no anchor at its first read and one from then on,
// as a warehouse does while another partition's publish commits.
type landingAnchors struct {
	anchor refill.AuditAnchor
	reads  int
}

func (a *landingAnchors) LatestAnchor(context.Context, string) (refill.AuditAnchor, bool, error) {
	a.reads++
	if a.reads == 1 {
		return refill.AuditAnchor{}, false, nil
	}
	return a.anchor, true, nil
}
func (a *landingAnchors) LatestAnchors(ctx context.Context) ([]refill.AuditAnchor, error) {
	l, ok, err := a.LatestAnchor(ctx, "")
	if !ok {
		return nil, err
	}
	return []refill.AuditAnchor{l}, err
}
func (a *landingAnchors) Anchors(context.Context, string) ([]refill.AuditAnchor, error) {
	return []refill.AuditAnchor{a.anchor}, nil
}

// cut deletes the log's entries after seq and moves its head and
// checkpoint back, as putting back an older copy of the store would.
func cut(t *testing.T, s *store.Store, _ string, seq int64) {
	t.Helper()
	ctx := t.Context()
	db := s.DB()
	var hash string
	if err := db.QueryRowContext(ctx, s.Rebind(`SELECT hash FROM audit_log WHERE seq = ?`), seq).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DELETE FROM audit_log WHERE seq > ?`, `UPDATE audit_head SET seq = ?, hash = ?`, `DELETE FROM audit_checkpoint`} {
		args := []any{seq}
		if strings.HasPrefix(q, "UPDATE") {
			args = []any{seq, hash}
		} else if strings.HasPrefix(q, "DELETE FROM audit_checkpoint") {
			args = nil
		}
		if _, err := db.ExecContext(ctx, s.Rebind(q), args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
