package store

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/refill-dev/refill"
)

// SQL returns the transaction's database/sql handle, for components that
// must write in the same transaction as refill's state: River inserts a
// notification job in the transaction that records its event (an outbox).
func (t *Tx) SQL() *sql.Tx { return t.tx }

// Outbox hears every audit entry inside the transaction that appends it.
// A notifier enqueues its message there, so a change is notified exactly
// when it commits, whichever door made it.
type Outbox func(ctx context.Context, tx *Tx, e *refill.Event) error

// SetOutbox installs the store's outbox (nil removes it).
func (s *Store) SetOutbox(o Outbox) { s.outbox = o }

// CreateToken stores a new API token under the hash of its secret. The
// caller appends the audit entry in the same transaction.
func (t *Tx) CreateToken(ctx context.Context, tok refill.Token, hash string) error {
	var expires any
	if !tok.ExpiresAt.IsZero() {
		expires = t.d.timestamp(tok.ExpiresAt)
	}
	_, err := t.tx.ExecContext(ctx, t.d.rebind(`INSERT INTO api_tokens (id, hash, user_name, created_by, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`),
		tok.ID, hash, tok.User, tok.CreatedBy, t.d.timestamp(tok.CreatedAt), expires)
	if err != nil {
		return fmt.Errorf("create token: %w", err)
	}
	return nil
}

// RevokeToken ends a token at once. It is an error to revoke a token that
// does not exist (or that no audit entry made) or is revoked already.
func (t *Tx) RevokeToken(ctx context.Context, id string, at time.Time) (refill.Token, error) {
	tok, err := token(ctx, t.tx, t.d, t.key, `id = ?`, id)
	if err != nil {
		return refill.Token{}, err
	}
	if !tok.RevokedAt.IsZero() {
		return refill.Token{}, refill.BadInputf("token %s was revoked already, at %s", id, tok.RevokedAt.Format(time.RFC3339))
	}
	if _, err := t.tx.ExecContext(ctx, t.d.rebind(`UPDATE api_tokens SET revoked_at = ? WHERE id = ?`), t.d.timestamp(at), id); err != nil {
		return refill.Token{}, fmt.Errorf("revoke token %s: %w", id, err)
	}
	tok.RevokedAt = at
	return tok, nil
}

// TokenByHash finds the token whose secret hashes to hash. A token that is
// not there, or that no audit entry made with that hash, is
// refill.ErrNotFound; whether it was revoked is the log's word.
func (s *Store) TokenByHash(ctx context.Context, hash string) (refill.Token, error) {
	return token(ctx, s.db, s.d, s.auditKey(), `hash = ?`, hash)
}

// Tokens lists every token the audit log made, newest first, revoked as
// the log says.
func (s *Store) Tokens(ctx context.Context) ([]refill.Token, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, user_name, created_by, created_at, expires_at, revoked_at, hash FROM api_tokens ORDER BY created_at DESC, id`)
	if err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	type row struct {
		tok  refill.Token
		hash string
	}
	var all []row
	for rows.Next() {
		var r row
		if r.tok, r.hash, err = scanToken(rows); err != nil {
			rows.Close()
			return nil, err
		}
		all = append(all, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []refill.Token
	for _, r := range all {
		tok, err := countedToken(ctx, s.db, s.d, s.auditKey(), r.tok, r.hash)
		if err != nil {
			return nil, err
		}
		if tok != nil {
			out = append(out, *tok)
		}
	}
	return out, nil
}

type scanner interface{ Scan(...any) error }

func scanToken(r scanner) (refill.Token, string, error) {
	var tok refill.Token
	var created timestamp
	var expires, revoked nullTime
	var hash string
	if err := r.Scan(&tok.ID, &tok.User, &tok.CreatedBy, &created, &expires, &revoked, &hash); err != nil {
		return tok, "", err
	}
	tok.CreatedAt, tok.ExpiresAt, tok.RevokedAt = created.Time, expires.Time, revoked.Time
	return tok, hash, nil
}

// token reads one token and applies the audit log to it (countedToken).
func token(ctx context.Context, q querier, d dialect, akey []byte, where string, arg any) (refill.Token, error) {
	row := q.QueryRowContext(ctx, d.rebind(`SELECT id, user_name, created_by, created_at, expires_at, revoked_at, hash FROM api_tokens WHERE `+where), arg)
	tok, hash, err := scanToken(row)
	if errors.Is(err, sql.ErrNoRows) {
		return tok, fmt.Errorf("token: %w", refill.ErrNotFound)
	}
	if err != nil {
		return tok, fmt.Errorf("token: %w", err)
	}
	counted, err := countedToken(ctx, q, d, akey, tok, hash)
	if err != nil {
		return tok, err
	}
	if counted == nil {
		return tok, fmt.Errorf("token %s has no audit entry that made it with this secret: %w", tok.ID, refill.ErrNotFound)
	}
	return *counted, nil
}

// nullTime reads a nullable timestamp column; NULL is the zero time.
type nullTime struct{ time.Time }

// Scan implements sql.Scanner.
func (n *nullTime) Scan(v any) error {
	if v == nil {
		n.Time = time.Time{}
		return nil
	}
	var ts timestamp
	if err := ts.Scan(v); err != nil {
		return err
	}
	n.Time = ts.Time
	return nil
}

// FirstSight records key as seen until expires and reports whether this
// is the first time: a second sight, by this process or any other sharing
// the store, is a replay. Expired keys are forgotten as it goes.
func (s *Store) FirstSight(ctx context.Context, key string, now, expires time.Time) (bool, error) {
	if _, err := s.db.ExecContext(ctx, s.d.rebind(`DELETE FROM replay_cache WHERE expires_at < ?`), s.d.timestamp(now)); err != nil {
		return false, fmt.Errorf("replay cache: %w", err)
	}
	res, err := s.db.ExecContext(ctx, s.d.rebind(`INSERT INTO replay_cache (key, expires_at) VALUES (?, ?) ON CONFLICT (key) DO NOTHING`),
		key, s.d.timestamp(expires))
	if err != nil {
		return false, fmt.Errorf("replay cache: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("replay cache: %w", err)
	}
	return n == 1, nil
}

// SetFreeze puts f in force, or lifts the freeze when f is nil. It returns
// the freeze that was in force before, if any.
func (t *Tx) SetFreeze(ctx context.Context, f *refill.Freeze) (refill.Freeze, bool, error) {
	was, frozen, err := freeze(ctx, t.tx, t.d, t.key)
	if err != nil {
		return was, frozen, err
	}
	if _, err := t.tx.ExecContext(ctx, `DELETE FROM freezes`); err != nil {
		return was, frozen, fmt.Errorf("freeze: %w", err)
	}
	if f != nil {
		if _, err := t.tx.ExecContext(ctx, t.d.rebind(`INSERT INTO freezes (id, frozen_by, reason, frozen_at) VALUES (1, ?, ?, ?)`),
			f.By, f.Reason, t.d.timestamp(f.At)); err != nil {
			return was, frozen, fmt.Errorf("freeze: %w", err)
		}
	}
	return was, frozen, nil
}

// RequestCancel records a request to stop plan's run. A second request
// for the same plan keeps the first.
func (t *Tx) RequestCancel(ctx context.Context, c refill.CancelRequest) error {
	_, err := t.tx.ExecContext(ctx, t.d.rebind(`INSERT INTO cancel_requests (plan_id, actor, reason, requested_at) VALUES (?, ?, ?, ?) ON CONFLICT (plan_id) DO NOTHING`),
		c.PlanID, c.Actor, c.Reason, t.d.timestamp(c.At))
	if err != nil {
		return fmt.Errorf("plan %s: cancel: %w", c.PlanID, err)
	}
	return nil
}

// SaveNotice records the message posted about a plan to target.
func (s *Store) SaveNotice(ctx context.Context, n refill.Notice) error {
	_, err := s.db.ExecContext(ctx, s.d.rebind(`INSERT INTO notices (plan_id, target, channel, ts, sent_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (plan_id, target) DO UPDATE SET channel = excluded.channel, ts = excluded.ts`),
		n.PlanID, n.Target, n.Channel, n.TS, s.d.timestamp(s.clock()))
	if err != nil {
		return fmt.Errorf("plan %s: notice: %w", n.PlanID, err)
	}
	return nil
}

// Notice returns the message posted about a plan to target, if any.
func (s *Store) Notice(ctx context.Context, planID, target string) (refill.Notice, bool, error) {
	n := refill.Notice{PlanID: planID, Target: target}
	err := s.db.QueryRowContext(ctx, s.d.rebind(`SELECT channel, ts FROM notices WHERE plan_id = ? AND target = ?`), planID, target).Scan(&n.Channel, &n.TS)
	if errors.Is(err, sql.ErrNoRows) {
		return n, false, nil
	}
	if err != nil {
		return n, false, fmt.Errorf("plan %s: notice: %w", planID, err)
	}
	return n, true, nil
}

// MarkSent records that the notice of audit entry seq went to target, and
// reports whether it had not been recorded before: a notice is sent once
// even when its job runs twice.
func (s *Store) MarkSent(ctx context.Context, seq int64, target string) (bool, error) {
	res, err := s.db.ExecContext(ctx, s.d.rebind(`INSERT INTO notices_sent (event_seq, target, sent_at) VALUES (?, ?, ?) ON CONFLICT (event_seq, target) DO NOTHING`),
		seq, target, s.d.timestamp(s.clock()))
	if err != nil {
		return false, fmt.Errorf("notice %d: %w", seq, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// Sent reports whether the notice of audit entry seq went to target.
func (s *Store) Sent(ctx context.Context, seq int64, target string) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, s.d.rebind(`SELECT count(*) FROM notices_sent WHERE event_seq = ? AND target = ?`), seq, target).Scan(&n)
	return n > 0, err
}

// PlanCount is how many plans share a tier and status.
type PlanCount struct {
	Tier   refill.Tier
	Status refill.Status
	Plans  int
}

// PlanCounts counts stored plans by tier and status.
func (s *Store) PlanCounts(ctx context.Context) ([]PlanCount, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT tier, status, count(*) FROM plans GROUP BY tier, status ORDER BY tier, status`)
	if err != nil {
		return nil, fmt.Errorf("plan counts: %w", err)
	}
	defer rows.Close()
	var out []PlanCount
	for rows.Next() {
		var c PlanCount
		if err := rows.Scan(&c.Tier, &c.Status, &c.Plans); err != nil {
			return nil, fmt.Errorf("plan counts: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// WebSecret returns the web UI's signing secret, made the first time it is
// asked for and shared from then on by every process on this store.
func (s *Store) WebSecret(ctx context.Context) ([]byte, error) {
	var fresh [32]byte
	if _, err := rand.Read(fresh[:]); err != nil {
		return nil, err
	}
	if _, err := s.db.ExecContext(ctx, s.d.rebind(`INSERT INTO web_secret (id, secret) VALUES (1, ?) ON CONFLICT (id) DO NOTHING`),
		hex.EncodeToString(fresh[:])); err != nil {
		return nil, fmt.Errorf("web secret: %w", err)
	}
	var h string
	if err := s.db.QueryRowContext(ctx, `SELECT secret FROM web_secret WHERE id = 1`).Scan(&h); err != nil {
		return nil, fmt.Errorf("web secret: %w", err)
	}
	return hex.DecodeString(h)
}

// SealKey is the key a plan's keyed digests of values are made with (the
// values of the variables a command job passes through from refill's
// environment, which a plan seals without storing them): derived from
// the audit key when there is one, which lives outside the state store,
// else from the store's own secret, shared by every process on it.
func (s *Store) SealKey(ctx context.Context) ([]byte, error) {
	base := s.auditKey()
	if base == nil {
		var err error
		if base, err = s.WebSecret(ctx); err != nil {
			return nil, fmt.Errorf("seal key: %w", err)
		}
	}
	m := hmac.New(sha256.New, base)
	m.Write([]byte("refill: the key of sealed values"))
	return m.Sum(nil), nil
}
