package control

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/store"
)

// TokenPrefix starts every API token, so a leaked one is recognisable.
const TokenPrefix = "rfl_"

// HashToken is how a token's secret is stored: its SHA-256, never itself.
func HashToken(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// ParseExpiry reads a token lifetime: whole days ("90d") or a Go duration
// ("36h"). "" and "0" mean the token does not expire.
func ParseExpiry(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" {
		return 0, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 || n > 3660 {
			return 0, refill.BadInputf("--expires %q: want whole days between 1d and 3660d, or a duration such as 36h", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, refill.BadInputf("--expires %q: want whole days such as 90d, or a duration such as 36h", s)
	}
	return d, nil
}

// CreateToken makes an API token for user, who asks for it. The secret is
// returned once and only its hash is kept.
func (c *Control) CreateToken(ctx context.Context, user string, expires time.Duration) (string, refill.Token, error) {
	if err := c.BeforeWrite(ctx); err != nil {
		return "", refill.Token{}, err
	}
	if refill.Reserved(user) {
		return "", refill.Token{}, refill.NotPermittedf("%q is refill's own identity: nobody may act as it, with a token or otherwise", user)
	}
	if len(c.Config.Users) > 0 {
		if _, ok := c.Config.Users[user]; !ok {
			return "", refill.Token{}, refill.NotPermittedf("%s is not in users: of %s", user, c.Config.Name())
		}
	}
	var id [4]byte
	var secret [32]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", refill.Token{}, err
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return "", refill.Token{}, err
	}
	tok := refill.Token{ID: hex.EncodeToString(id[:]), User: user, CreatedBy: user, CreatedAt: c.stamp()}
	if expires > 0 {
		tok.ExpiresAt = tok.CreatedAt.Add(expires)
	}
	plain := TokenPrefix + tok.ID + "_" + base64.RawURLEncoding.EncodeToString(secret[:])
	err := c.Store.Update(ctx, func(tx *store.Tx) error {
		if err := tx.CreateToken(ctx, tok, HashToken(plain)); err != nil {
			return err
		}
		// The entry binds the secret's hash: a token row is honoured only
		// with the entry that made it (store.TokenByHash), so a row
		// written behind refill's back, or given another hash, opens
		// nothing.
		return tx.Append(ctx, &refill.Event{Kind: refill.EventTokenCreated, Actor: user, At: c.Now.Now(),
			Detail: refill.Detail(map[string]any{"token": tok.ID, "user": user, "expires_at": tok.ExpiresAt, "hash": HashToken(plain)})})
	})
	if err != nil {
		return "", refill.Token{}, err
	}
	return plain, tok, nil
}

// RevokeToken ends token id at once, as actor: its owner or a lead.
func (c *Control) RevokeToken(ctx context.Context, id, actor string) (refill.Token, error) {
	if err := c.BeforeWrite(ctx); err != nil {
		return refill.Token{}, err
	}
	var tok refill.Token
	err := c.Store.Update(ctx, func(tx *store.Tx) error {
		var err error
		if tok, err = tx.RevokeToken(ctx, id, c.stamp()); err != nil {
			if errors.Is(err, refill.ErrNotFound) {
				return refill.NotFoundf("no token %s (refill token list shows them)", id)
			}
			return err
		}
		if err := c.require(ctx, ActTokenRevoke, Subject{Token: &tok}, actor); err != nil {
			return err
		}
		return tx.Append(ctx, &refill.Event{Kind: refill.EventTokenRevoked, Actor: actor, At: c.Now.Now(),
			Detail: refill.Detail(map[string]any{"token": id, "user": tok.User})})
	})
	return tok, err
}

// Authenticate returns the user a bearer token acts for. An unknown,
// expired or revoked token, or one whose user is no longer configured,
// authenticates nobody (ErrNotPermitted).
func (c *Control) Authenticate(ctx context.Context, secret string) (string, error) {
	if !strings.HasPrefix(secret, TokenPrefix) {
		return "", refill.NotPermittedf("not a refill token")
	}
	tok, err := c.Store.TokenByHash(ctx, HashToken(secret))
	if errors.Is(err, refill.ErrNotFound) {
		return "", refill.NotPermittedf("unknown token")
	}
	if err != nil {
		return "", err
	}
	if !tok.Live(c.Clock.Now()) {
		return "", refill.NotPermittedf("token %s has expired or was revoked", tok.ID)
	}
	if len(c.Config.Users) > 0 {
		if _, ok := c.Config.Users[tok.User]; !ok {
			return "", refill.NotPermittedf("token %s is for %s, who is no longer in users:", tok.ID, tok.User)
		}
	}
	return tok.User, nil
}

// SlackUser maps a Slack user ID to the refill user configured with it.
func (c *Control) SlackUser(slackID string) (string, error) {
	if slackID == "" {
		return "", refill.NotPermittedf("the Slack request names no user")
	}
	var found []string
	for name, u := range c.Config.Users {
		if u.Slack == slackID {
			found = append(found, name)
		}
	}
	switch len(found) {
	case 0:
		return "", refill.NotPermittedf("Slack user %s is not mapped to a refill user (users.NAME.slack in refill.yaml)", slackID)
	case 1:
		return found[0], nil
	}
	return "", refill.NotPermittedf("Slack user %s is mapped to several refill users (%s): refusing to guess", slackID, strings.Join(found, ", "))
}

// Cancel stops plan id, as actor, for reason. A plan that has not started
// ends cancelled at once. A running one is asked to stop: no new partition
// starts, partitions in flight finish and are published (or roll back),
// and the run then ends the plan cancelled. The returned state says which.
func (c *Control) Cancel(ctx context.Context, id, actor, reason string) (*State, error) {
	if err := refill.CheckText("--reason", reason); err != nil {
		return nil, err
	}
	if err := c.BeforeWrite(ctx); err != nil {
		return nil, err
	}
	if strings.TrimSpace(reason) == "" {
		return nil, refill.BadInputf("--reason is required: say why the plan is cancelled")
	}
	s, err := c.Load(ctx, id)
	if err != nil {
		return nil, err
	}
	p := s.Plan
	if p.Status == refill.StatusRunning && s.Cancel != nil && s.Run != nil && !s.Run.Orphaned {
		return s, nil // asked already: the run is stopping
	}
	if err := c.require(ctx, ActCancel, Subject{State: s}, actor); err != nil {
		return nil, err
	}
	req := refill.CancelRequest{PlanID: id, Actor: actor, Reason: reason, At: c.stamp()}
	// A run whose holder died (its lease lapsed, or its process is gone)
	// has nobody to hear the request: it ends now, as a plan that is not
	// running does.
	live := s.Run != nil && !s.Run.Orphaned
	switch {
	case p.Status == refill.StatusPending, p.Status == refill.StatusReady, p.Status == refill.StatusApproved,
		p.Status == refill.StatusFailed, p.Status == refill.StatusNeedsReview, p.Status == refill.StatusRunning && !live:
		err = c.Store.Update(ctx, func(tx *store.Tx) error {
			if err := tx.RequestCancel(ctx, req); err != nil {
				return err
			}
			if err := tx.SetStatus(ctx, id, p.Status, refill.StatusCancelled); err != nil {
				return err
			}
			return tx.Append(ctx, &refill.Event{Kind: refill.EventRunCancelled, Actor: actor, PlanID: id, At: c.Now.Now(),
				Detail: refill.Detail(map[string]any{"reason": reason, "was": p.Status})})
		})
	case p.Status == refill.StatusRunning:
		err = c.Store.Update(ctx, func(tx *store.Tx) error {
			if err := tx.RequestCancel(ctx, req); err != nil {
				return err
			}
			return tx.Append(ctx, &refill.Event{Kind: refill.EventCancelRequested, Actor: actor, PlanID: id, At: c.Now.Now(),
				Detail: refill.Detail(map[string]any{"reason": reason})})
		})
	default:
		return nil, refill.NotPermittedf("plan %s is %s: there is nothing to cancel", id, p.Status)
	}
	if err != nil {
		return nil, err
	}
	return c.Load(ctx, id)
}

// Freeze stops every automatic apply (auto plans, the watcher) across all
// processes sharing the state store, until Unfreeze. Leads only.
func (c *Control) Freeze(ctx context.Context, actor, reason string) (refill.Freeze, error) {
	if err := refill.CheckText("--reason", reason); err != nil {
		return refill.Freeze{}, err
	}
	if err := c.BeforeWrite(ctx); err != nil {
		return refill.Freeze{}, err
	}
	if strings.TrimSpace(reason) == "" {
		return refill.Freeze{}, refill.BadInputf("--reason is required: say why automatic applies stop")
	}
	cur, err := c.Frozen(ctx)
	if err != nil {
		return refill.Freeze{}, err
	}
	if err := c.require(ctx, ActFreeze, Subject{Freeze: cur}, actor); err != nil {
		return refill.Freeze{}, err
	}
	f := refill.Freeze{By: actor, Reason: reason, At: c.stamp()}
	err = c.Store.Update(ctx, func(tx *store.Tx) error {
		was, frozen, err := tx.SetFreeze(ctx, &f)
		if err != nil {
			return err
		}
		if frozen {
			return refill.NotPermittedf("refill is frozen already, by %s since %s: %s", was.By, was.At.Format(time.RFC3339), refill.OneLine(was.Reason))
		}
		return tx.Append(ctx, &refill.Event{Kind: refill.EventFreeze, Actor: actor, At: c.Now.Now(),
			Detail: refill.Detail(map[string]any{"reason": reason})})
	})
	return f, err
}

// Unfreeze lifts the freeze. Leads only.
func (c *Control) Unfreeze(ctx context.Context, actor, reason string) (refill.Freeze, error) {
	if err := refill.CheckText("--reason", reason); err != nil {
		return refill.Freeze{}, err
	}
	if err := c.BeforeWrite(ctx); err != nil {
		return refill.Freeze{}, err
	}
	cur, err := c.Frozen(ctx)
	if err != nil {
		return refill.Freeze{}, err
	}
	if err := c.require(ctx, ActUnfreeze, Subject{Freeze: cur}, actor); err != nil {
		return refill.Freeze{}, err
	}
	var was refill.Freeze
	err = c.Store.Update(ctx, func(tx *store.Tx) error {
		var frozen bool
		var err error
		if was, frozen, err = tx.SetFreeze(ctx, nil); err != nil {
			return err
		}
		if !frozen {
			return refill.NotPermittedf("refill is not frozen")
		}
		return tx.Append(ctx, &refill.Event{Kind: refill.EventUnfreeze, Actor: actor, At: c.Now.Now(),
			Detail: refill.Detail(map[string]any{"reason": reason, "frozen_by": was.By, "frozen_since": was.At})})
	})
	return was, err
}

// Frozen returns the freeze in force, if any.
func (c *Control) Frozen(ctx context.Context) (*refill.Freeze, error) {
	f, frozen, err := c.Store.Freeze(ctx)
	if err != nil || !frozen {
		return nil, err
	}
	return &f, nil
}
