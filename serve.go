package refill

import "time"

// Events of the server and of stopping things.
const (
	EventTokenCreated    EventKind = "token_created"
	EventTokenRevoked    EventKind = "token_revoked"
	EventCancelRequested EventKind = "cancel_requested"
	EventRunCancelled    EventKind = "run_cancelled"
	EventFreeze          EventKind = "freeze"
	EventUnfreeze        EventKind = "unfreeze"
)

// Token is an API token of `refill serve`, as stored: never its secret.
type Token struct {
	ID        string    `json:"id"`
	User      string    `json:"user"`
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt is zero for a token that does not expire.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
}

// Live reports whether the token may still be used at now.
func (t Token) Live(now time.Time) bool {
	return t.RevokedAt.IsZero() && (t.ExpiresAt.IsZero() || now.Before(t.ExpiresAt))
}

// Freeze is in force while it exists: no automatic apply runs.
type Freeze struct {
	By     string    `json:"by"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// CancelRequest asks a plan's run to stop.
type CancelRequest struct {
	PlanID string    `json:"plan_id"`
	Actor  string    `json:"actor"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// Notice is a message posted about a plan, kept so that later outcomes
// update it (Slack's channel and message ts).
type Notice struct {
	PlanID  string `json:"plan_id"`
	Target  string `json:"target"`
	Channel string `json:"channel"`
	TS      string `json:"ts"`
}
