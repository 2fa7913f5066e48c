package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
)

// Generic webhooks.
//
// Every notice is POSTed to each of notify.webhooks as JSON (WebhookPayload)
// — every finished run among them, with its report, where Slack hears of
// one only when it is out of tolerance — with the headers
//
//	Content-Type:       application/json
//	X-Refill-Event:     the audit entry's kind, e.g. plan_created
//	X-Refill-Delivery:  the audit entry's seq (the same on a retry)
//	X-Refill-Timestamp: Unix seconds when this attempt was sent
//	X-Refill-Signature: v1=hex(HMAC-SHA256(secret, timestamp + "." + body))
//
// The two last only when the webhook has a secret_env. A receiver checks
// the signature over the raw body before parsing it, refuses a timestamp
// more than five minutes from its clock, and compares in constant time —
// VerifyWebhook does all three. A delivery is retried with backoff until
// the receiver answers 2xx, so receivers should treat X-Refill-Delivery as
// an idempotency key.

// Header names of a webhook delivery.
const (
	HeaderEvent     = "X-Refill-Event"
	HeaderDelivery  = "X-Refill-Delivery"
	HeaderTimestamp = "X-Refill-Timestamp"
	HeaderSignature = "X-Refill-Signature"
)

// webhookWindow is how far a signed timestamp may be from the receiver's
// clock, as with Slack's signatures.
const webhookWindow = 5 * time.Minute

// webhookPrefix starts the target name of a webhook: "webhook:N".
const webhookPrefix = "webhook:"

// WebhookPayload is the JSON body of a webhook delivery.
type WebhookPayload struct {
	// Event is the audit entry's kind, Seq its place in the audit log.
	Event refill.EventKind `json:"event"`
	Seq   int64            `json:"seq"`
	// At is when the entry was written; Actor who made it.
	At    time.Time `json:"at"`
	Actor string    `json:"actor"`
	// Plan is the plan as it is when the notice is sent, with its state
	// (what `refill show -o json` prints); absent for a freeze.
	Plan *control.StateJSON `json:"plan,omitempty"`
	// Detail is the audit entry's detail: a note, a reason, an error.
	Detail json.RawMessage `json:"detail,omitempty"`
	// Report is a finished run's report; OffTolerance says it flags
	// partitions further from their expectation than the tolerance.
	Report       *control.Report `json:"report,omitempty"`
	OffTolerance bool            `json:"off_tolerance,omitempty"`
}

// Errors of VerifyWebhook.
var (
	ErrWebhookSignature = errors.New("webhook signature does not match")
	ErrWebhookExpired   = errors.New("webhook timestamp is more than five minutes from now")
)

// SignWebhook returns the X-Refill-Signature of body sent at timestamp ts
// (Unix seconds, as sent in X-Refill-Timestamp).
func SignWebhook(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// VerifyWebhook checks a delivery as a receiver should: ts (the
// X-Refill-Timestamp header) within five minutes of now, and sig (the
// X-Refill-Signature header) the HMAC-SHA256 under secret of ts, ".", and
// the raw body, compared in constant time.
func VerifyWebhook(secret, ts, sig string, body []byte, now time.Time) error {
	if secret == "" {
		return errors.New("webhook: no secret to verify with")
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook: timestamp %q is not Unix seconds", ts)
	}
	if d := now.Sub(time.Unix(unix, 0)); d > webhookWindow || d < -webhookWindow {
		return ErrWebhookExpired
	}
	hexSig, ok := strings.CutPrefix(sig, "v1=")
	if !ok {
		return ErrWebhookSignature
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return ErrWebhookSignature
	}
	want, _ := hex.DecodeString(strings.TrimPrefix(SignWebhook(secret, ts, body), "v1="))
	if !hmac.Equal(got, want) {
		return ErrWebhookSignature
	}
	return nil
}

// webhookTarget is one of notify.webhooks.
type webhookTarget struct {
	index  int
	url    string
	secret string
}

func (w webhookTarget) name() string { return webhookPrefix + strconv.Itoa(w.index) }

// sendWebhook POSTs one notice to a webhook. Any answer but 2xx is an
// error, and River tries again.
func (n *Notifier) sendWebhook(ctx context.Context, w webhookTarget, nt *notice) error {
	e := nt.event
	p := WebhookPayload{Event: e.Kind, Seq: e.Seq, At: e.At, Actor: e.Actor, Detail: e.Detail,
		Report: nt.report, OffTolerance: nt.offTolerance}
	if nt.state != nil {
		j := nt.state.JSON()
		p.Plan = &j
	}
	body, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("webhook %d: %w", w.index, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook %d (%s): %w", w.index, w.url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "refill")
	req.Header.Set(HeaderEvent, string(e.Kind))
	req.Header.Set(HeaderDelivery, strconv.FormatInt(e.Seq, 10))
	if w.secret != "" {
		ts := strconv.FormatInt(n.now().Unix(), 10)
		req.Header.Set(HeaderTimestamp, ts)
		req.Header.Set(HeaderSignature, SignWebhook(w.secret, ts, body))
	}
	resp, err := n.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("webhook %d (%s): %w", w.index, w.url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return fmt.Errorf("webhook %d (%s) answered %s: %s", w.index, w.url, resp.Status, strings.TrimSpace(string(snippet)))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	return nil
}
