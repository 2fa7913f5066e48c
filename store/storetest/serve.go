package storetest

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
)

// exerciseServe covers what `refill serve` keeps for every replica on one
// store: API tokens, the web UI's signing secret, and the signed requests
// already seen.
func exerciseServe(t *testing.T, setup func(t *testing.T) (*store.Store, string)) {
	t.Run("TokensFoundByHashAndRevoked", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t)
		ctx := t.Context()
		create := func(tok refill.Token, hash string) error {
			return s.Update(ctx, func(tx *store.Tx) error { return RecordToken(ctx, tx, tok, hash) })
		}
		revoke := func(id string, at time.Time) (tok refill.Token, err error) {
			err = s.Update(ctx, func(tx *store.Tx) (err error) { tok, err = RecordTokenRevoked(ctx, tx, id, "alice", at); return err })
			return tok, err
		}
		same := func(a, b refill.Token) bool {
			return a.ID == b.ID && a.User == b.User && a.CreatedBy == b.CreatedBy &&
				a.CreatedAt.Equal(b.CreatedAt) && a.ExpiresAt.Equal(b.ExpiresAt) && a.RevokedAt.Equal(b.RevokedAt)
		}

		if got, err := s.Tokens(ctx); err != nil || len(got) != 0 {
			t.Fatalf("Tokens of a new store = %+v, %v", got, err)
		}
		alice := refill.Token{ID: "tok-a", User: "alice", CreatedBy: "admin", CreatedAt: at(1)}
		bob := refill.Token{ID: "tok-b", User: "bob", CreatedBy: "alice", CreatedAt: at(2), ExpiresAt: at(3600)}
		if err := create(alice, "sha256:aa"); err != nil {
			t.Fatal(err)
		}
		if err := create(bob, "sha256:bb"); err != nil {
			t.Fatal(err)
		}
		// Neither an ID nor a secret's hash is used twice.
		if err := create(refill.Token{ID: "tok-a", User: "mallory", CreatedBy: "mallory", CreatedAt: at(3)}, "sha256:cc"); err == nil {
			t.Error("a second token under an existing ID was created")
		}
		if err := create(refill.Token{ID: "tok-c", User: "mallory", CreatedBy: "mallory", CreatedAt: at(3)}, "sha256:aa"); err == nil {
			t.Error("a second token with an existing secret was created")
		}
		got, err := s.Tokens(ctx)
		if err != nil || len(got) != 2 || !same(got[0], bob) || !same(got[1], alice) {
			t.Fatalf("Tokens = %+v, %v; want bob's then alice's, newest first", got, err)
		}
		if !got[1].ExpiresAt.IsZero() {
			t.Errorf("a token without an expiry came back expiring at %s", got[1].ExpiresAt)
		}
		if tok, err := s.TokenByHash(ctx, "sha256:bb"); err != nil || !same(tok, bob) {
			t.Errorf("TokenByHash(bob's) = %+v, %v", tok, err)
		}
		if _, err := s.TokenByHash(ctx, "sha256:unknown"); !errors.Is(err, refill.ErrNotFound) {
			t.Errorf("TokenByHash of an unknown secret: %v, want not found", err)
		}

		tok, err := revoke(alice.ID, at(10))
		if err != nil || tok.User != "alice" || !tok.RevokedAt.Equal(at(10)) {
			t.Fatalf("RevokeToken = %+v, %v", tok, err)
		}
		if tok, _ := s.TokenByHash(ctx, "sha256:aa"); !tok.RevokedAt.Equal(at(10)) || tok.Live(at(11)) {
			t.Errorf("alice's token after revoking: %+v", tok)
		}
		if tok, _ := s.TokenByHash(ctx, "sha256:bb"); !tok.RevokedAt.IsZero() || !tok.Live(at(11)) {
			t.Errorf("revoking alice's token touched bob's: %+v", tok)
		}
		if _, err := revoke(alice.ID, at(11)); !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), "revoked already") {
			t.Errorf("revoking twice: %v, want bad input saying so", err)
		}
		if tok, _ := s.TokenByHash(ctx, "sha256:aa"); !tok.RevokedAt.Equal(at(10)) {
			t.Errorf("a second revocation moved the first: %s", tok.RevokedAt)
		}
		if _, err := revoke("tok-missing", at(11)); !errors.Is(err, refill.ErrNotFound) {
			t.Errorf("revoking an unknown token: %v, want not found", err)
		}
	})

	t.Run("WebSecretMadeOnceShared", func(t *testing.T) {
		t.Parallel()
		s, dsn := setup(t)
		ctx := t.Context()
		first, err := s.WebSecret(ctx)
		if err != nil || len(first) != 32 {
			t.Fatalf("WebSecret = %x, %v; want 32 bytes", first, err)
		}
		if again, err := s.WebSecret(ctx); err != nil || !bytes.Equal(again, first) {
			t.Errorf("WebSecret asked again = %x, %v; want %x", again, err, first)
		}
		if replica, err := open(t, dsn).WebSecret(ctx); err != nil || !bytes.Equal(replica, first) {
			t.Errorf("another process on the store got %x, %v; want %x", replica, err, first)
		}
		other, _ := setup(t)
		if theirs, err := other.WebSecret(ctx); err != nil || bytes.Equal(theirs, first) {
			t.Errorf("two stores share a web secret: %x, %v", theirs, err)
		}
	})

	t.Run("SealKeySharedAndFollowsTheAuditKey", func(t *testing.T) {
		t.Parallel()
		s, dsn := setup(t)
		ctx := t.Context()
		plain, err := s.SealKey(ctx)
		if err != nil || len(plain) != 32 {
			t.Fatalf("SealKey = %x, %v; want 32 bytes", plain, err)
		}
		if secret, _ := s.WebSecret(ctx); bytes.Equal(plain, secret) {
			t.Errorf("the seal key is the web secret itself: it must be derived")
		}
		replica := open(t, dsn)
		if theirs, err := replica.SealKey(ctx); err != nil || !bytes.Equal(theirs, plain) {
			t.Errorf("another process on the store got %x, %v; want %x", theirs, err, plain)
		}
		// With an audit key, the key comes from it (outside the store),
		// the same in every process that holds it.
		s.SetAuditKey([]byte("k1"))
		replica.SetAuditKey([]byte("k1"))
		keyed, _ := s.SealKey(ctx)
		if again, _ := replica.SealKey(ctx); bytes.Equal(keyed, plain) || !bytes.Equal(again, keyed) {
			t.Errorf("with the audit key: %x and %x, want one key other than %x", keyed, again, plain)
		}
	})

	t.Run("FirstSightOnceUntilExpiry", func(t *testing.T) {
		t.Parallel()
		s, dsn := setup(t)
		ctx := t.Context()
		now := at(0)
		sight := func(s *store.Store, key string, now, expires time.Time) bool {
			t.Helper()
			first, err := s.FirstSight(ctx, key, now, expires)
			if err != nil {
				t.Fatalf("FirstSight(%s): %v", key, err)
			}
			return first
		}
		if !sight(s, "slack:aa", now, now.Add(5*time.Minute)) {
			t.Fatal("the first sight of a key is a replay")
		}
		if sight(s, "slack:aa", now.Add(time.Minute), now.Add(6*time.Minute)) {
			t.Error("a second sight of a key is not a replay")
		}
		if sight(open(t, dsn), "slack:aa", now.Add(time.Minute), now.Add(6*time.Minute)) {
			t.Error("another process on the store took a replay for a first sight")
		}
		if !sight(s, "slack:bb", now.Add(time.Minute), now.Add(6*time.Minute)) {
			t.Error("another key counted as seen")
		}
		// Once its window has passed, a key is forgotten.
		if !sight(s, "slack:aa", now.Add(10*time.Minute), now.Add(15*time.Minute)) {
			t.Error("an expired key is still remembered")
		}

		const n = 8
		firsts := make([]bool, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { firsts[i], errs[i] = s.FirstSight(ctx, "slack:race", now, now.Add(time.Minute)) })
		}
		wg.Wait()
		won := 0
		for i := range n {
			if errs[i] != nil {
				t.Errorf("concurrent FirstSight: %v", errs[i])
			}
			if firsts[i] {
				won++
			}
		}
		if won != 1 {
			t.Errorf("%d of %d concurrent sights of one key were first, want exactly 1", won, n)
		}
	})
}
