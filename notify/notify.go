// Package notify tells people what refill is doing and lets them answer:
// a Slack message for every new plan, with Approve and Reject buttons while
// it waits and a Cancel button while it runs; alerts when a run is blocked,
// fails or lands off its expectation, and when refill is frozen; and a
// signed JSON POST to any generic webhook (notify: in refill.yaml, docs/design.md
// §6).
//
// Notices leave through an outbox. Install hooks the state store so that
// every audit entry worth telling is turned, inside the transaction that
// records it, into one River job: a change is notified exactly when it
// commits, whichever door made it (the command line, the server, a worker),
// and a change that rolls back notifies nobody. Run works those jobs; each
// target hears each entry once, even when River runs a job twice, because
// the store remembers what was sent (store.MarkSent).
//
// Interactions is the other direction: Slack's POST /slack/interactions,
// verified (HMAC-SHA256 over "v0:ts:body", five-minute window, constant-time
// compare, docs/design.md §10), refused when replayed, and applied through
// control with the same rules as every other door.
package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/internal/secret"
	"github.com/refill-dev/refill/queue"
	"github.com/refill-dev/refill/store"
)

// Notifier delivers refill's notices and hears Slack's answers for one
// project.
type Notifier struct {
	cfg *refill.Config
	st  *store.Store
	// Secrets and addresses read once, by New.
	slack    *slackTarget
	webhooks []webhookTarget
	ol       *openLineageTarget
	secret   string // Slack's signing secret; "" leaves Interactions off

	// HTTPClient sends to Slack and to webhooks. New sets one with a
	// ten-second timeout; a notice that times out is retried by River.
	HTTPClient *http.Client
	// Now is the real clock, which judges Slack's request timestamps, dates
	// the replay cache and stamps webhook signatures. Nil is time.Now; tests
	// set it to check the published signing vectors, which are years old.
	Now func() time.Time
}

// New reads the notify: section of cfg and the secrets it names, with
// read (nil: secret.Reader over cfg's directory, as refill holds them). It
// does nothing else: Install turns notices on. A secret's file that cannot
// be read is an error.
func New(cfg *refill.Config, st *store.Store, read func(refill.Secret) (string, error)) (*Notifier, error) {
	if read == nil {
		read = secret.Reader{Dir: cfg.Dir}.Read
	}
	n := &Notifier{cfg: cfg, st: st, HTTPClient: &http.Client{Timeout: 10 * time.Second}}
	var err error
	get := func(s refill.Secret) string {
		v, e := read(s)
		if err == nil {
			err = e
		}
		return strings.TrimSpace(v)
	}
	if s := cfg.Notify.Slack; s != nil {
		n.secret = get(s.SigningSecret())
		t := &slackTarget{token: get(s.BotToken()), channel: s.Channel, webhookURL: get(s.WebhookURL()), apiURL: s.APIURL}
		if t.apiURL == "" {
			t.apiURL = "https://slack.com/api/"
		} else if !strings.HasSuffix(t.apiURL, "/") {
			// slack-go appends the method name to the base as it is.
			t.apiURL += "/"
		}
		if t.token == "" || t.channel == "" {
			t.token = ""
		}
		if t.token != "" || t.webhookURL != "" {
			n.slack = t
		}
	}
	for i, w := range cfg.Notify.Webhooks {
		n.webhooks = append(n.webhooks, webhookTarget{index: i, url: w.URL, secret: get(w.Secret(i))})
	}
	if o := cfg.OpenLineage; o != nil {
		n.ol = newOpenLineageTarget(o, get(o.APIKey()))
	}
	if err != nil {
		return nil, err
	}
	return n, nil
}

// Enabled reports whether refill.yaml configures Slack, a webhook or an
// OpenLineage receiver. A
// project without either gets no outbox and queues nothing.
func (n *Notifier) Enabled() bool {
	return n.cfg.Notify.Slack != nil || len(n.cfg.Notify.Webhooks) > 0 || n.cfg.OpenLineage != nil
}

func (n *Notifier) now() time.Time {
	if n.Now != nil {
		return n.Now()
	}
	return time.Now()
}

// Targets names where notices go, as store.MarkSent records them: "slack"
// when a bot token (with notify.slack.channel) or an incoming webhook URL is
// in the environment, and "webhook:N" for the Nth of notify.webhooks.
func (n *Notifier) Targets() []string {
	var out []string
	if n.slack != nil {
		out = append(out, slackTargetName)
	}
	for _, w := range n.webhooks {
		out = append(out, w.name())
	}
	if n.ol != nil {
		out = append(out, openLineageTargetName)
	}
	return out
}

// Install turns notices on when Enabled: it brings River's schema up to
// date on the state store (safe when several processes start at once) and
// installs the store's outbox, which queues one job for every audit entry
// worth telling, in the transaction that appends it. Call it once the
// store is open and before anything changes state; a process that installs
// nothing queues nothing, so every process that changes state (the command
// line, the server, workers) should install it. The outbox is a field of
// the store, so install before the store is shared between goroutines.
func (n *Notifier) Install(ctx context.Context) error {
	if !n.Enabled() {
		return nil
	}
	if err := queue.Migrate(ctx, n.st); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	q, err := queue.NewOutbox(n.st)
	if err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	n.st.SetOutbox(func(ctx context.Context, tx *store.Tx, e *refill.Event) error {
		if !relevant(e) {
			return nil
		}
		args := queue.NotifyArgs{Seq: e.Seq, Event: e.Kind, PlanID: e.PlanID}
		if err := q.InsertTx(ctx, tx.SQL(), args); err != nil {
			return fmt.Errorf("notify: queueing the notice of audit entry %d (%s): %w", e.Seq, e.Kind, err)
		}
		return nil
	})
	return nil
}

// relevant reports whether an audit entry is worth telling people about:
// a new plan; a decision on it; its run starting, being asked to stop,
// stopping, failing, being blocked when it began, or finishing (the worker
// alerts on a finished run only when its report is out of tolerance); and
// freezes. Partition-level entries are not, but for what needs a person
// (a partition that needs review, and its resolution) and a wait for the
// warehouse past a minute: a run's failure is told once, for the plan.
func relevant(e *refill.Event) bool {
	switch e.Kind {
	case refill.EventPlanCreated, refill.EventApproval, refill.EventRejection,
		refill.EventRunStarted, refill.EventCancelRequested, refill.EventRunCancelled,
		refill.EventRunFinished, refill.EventFreeze, refill.EventUnfreeze,
		refill.EventRunWaiting, refill.EventNeedsReview, refill.EventResolved, refill.EventRunPaused:
		return true
	case refill.EventRunFailed:
		return e.Partition == ""
	case refill.EventGateResult:
		return e.Partition == "" && blockedAtApply(e)
	}
	return false
}

// blockedAtApply reports whether a gate result is the re-check that
// stopped a run as it began (the planning-time verdict is in the plan
// message already).
func blockedAtApply(e *refill.Event) bool {
	var d struct {
		At     string `json:"at"`
		Passed *bool  `json:"passed"`
	}
	if json.Unmarshal(e.Detail, &d) != nil {
		return false
	}
	return d.At == "apply" && d.Passed != nil && !*d.Passed
}
