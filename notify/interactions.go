package notify

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/internal/strictjson"
)

// maxInteraction bounds an interaction request's body. Slack's payloads
// carry the whole message the button was on, so they run to tens of
// kilobytes, never near this.
const maxInteraction = 1 << 20

// slackWindow is how far a request's timestamp may be from now.
const slackWindow = 5 * time.Minute

// followUpTimeout bounds the message update after a decision; the decision
// is recorded, and acknowledged, before it starts.
const followUpTimeout = 5 * time.Second

// Slack's signature headers.
const (
	headerSlackSignature = "X-Slack-Signature"
	headerSlackTimestamp = "X-Slack-Request-Timestamp"
)

// VerifySlack checks that a request comes from Slack (docs/design.md §10): its
// X-Slack-Request-Timestamp is within five minutes of now, and its
// X-Slack-Signature is "v0=" + hex(HMAC-SHA256(secret, "v0:" + timestamp +
// ":" + body)) over the raw body, compared in constant time. Errors are
// slack-go's (slack.ErrMissingHeaders, ErrExpiredTimestamp,
// ErrInvalidSignature, ErrInvalidConfiguration), so it is a drop-in for
// slack.NewSecretsVerifier — which reads the wall clock itself, and so can
// neither be checked against Slack's published vectors nor share the clock
// that dates the replay cache. Like slack-go's, it keeps no replay cache:
// Interactions adds one.
func VerifySlack(secret string, h http.Header, body []byte, now time.Time) error {
	if secret == "" {
		return slack.ErrInvalidConfiguration
	}
	sig, ts := h.Get(headerSlackSignature), h.Get(headerSlackTimestamp)
	if sig == "" || ts == "" {
		return slack.ErrMissingHeaders
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: timestamp %q is not Unix seconds", slack.ErrInvalidSignature, clip(ts, 32))
	}
	if d := now.Sub(time.Unix(unix, 0)); d > slackWindow || d < -slackWindow {
		return slack.ErrExpiredTimestamp
	}
	hexSig, ok := strings.CutPrefix(sig, "v0=")
	if !ok {
		return slack.ErrInvalidSignature
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil || len(got) != sha256.Size {
		return slack.ErrInvalidSignature
	}
	m := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(m, "v0:%s:", ts)
	m.Write(body)
	if !hmac.Equal(got, m.Sum(nil)) {
		return slack.ErrInvalidSignature
	}
	return nil
}

// Interaction is a press of one of refill's buttons, as Slack reported it.
type Interaction struct {
	// Action is ActionApprove, ActionReject or ActionCancel.
	Action string
	// PlanID is the button's value.
	PlanID string
	// SlackUser is who pressed it (Slack's user ID).
	SlackUser string
	// ResponseURL answers the press: replace the message, or tell the
	// presser alone why nothing happened.
	ResponseURL string
	// Channel and MessageTS name the message the button was on.
	Channel, MessageTS string
	// Team is the workspace the press came from (team.id), and UserTeam
	// the presser's own (user.team_id): either may be "" where Slack
	// leaves it out.
	Team, UserTeam string
}

// payload is what refill reads of an interaction's payload. Every object
// is open — the payload is Slack's, and carries the whole message the
// button was on — but strictjson refuses a key given twice anywhere in
// it, and any of these spelled in another case.
type payload struct {
	Type string `json:"type"`
	User struct {
		ID     string         `json:"id"`
		TeamID string         `json:"team_id"`
		Other  map[string]any `json:",inline"`
	} `json:"user"`
	Team *struct {
		ID    string         `json:"id"`
		Other map[string]any `json:",inline"`
	} `json:"team"`
	ResponseURL string `json:"response_url"`
	Container   struct {
		ChannelID string         `json:"channel_id"`
		MessageTS string         `json:"message_ts"`
		Other     map[string]any `json:",inline"`
	} `json:"container"`
	Channel *struct {
		ID    string         `json:"id"`
		Other map[string]any `json:",inline"`
	} `json:"channel"`
	Message *struct {
		TS    string         `json:"ts"`
		Other map[string]any `json:",inline"`
	} `json:"message"`
	Actions []*struct {
		ActionID string         `json:"action_id"`
		Value    string         `json:"value"`
		Other    map[string]any `json:",inline"`
	} `json:"actions"`
	Other map[string]any `json:",inline"`
}

// ParseInteraction reads the body of an interaction request: form-encoded,
// with the JSON payload in its payload field. It returns nil and no error
// for an interaction that is none of refill's (another app's action, a
// link button, a modal), which should be acknowledged and ignored.
func ParseInteraction(body []byte) (*Interaction, error) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("slack interaction: the body is not form-encoded: %w", err)
	}
	raw := form.Get("payload")
	if raw == "" {
		return nil, errors.New("slack interaction: the body has no payload field")
	}
	var cb payload
	if err := strictjson.Unmarshal([]byte(raw), &cb); err != nil {
		return nil, fmt.Errorf("slack interaction: the payload is not Slack's JSON: %w", err)
	}
	if cb.Type != string(slack.InteractionTypeBlockActions) {
		return nil, nil
	}
	for _, a := range cb.Actions {
		if a == nil {
			continue
		}
		switch a.ActionID {
		case ActionApprove, ActionReject, ActionCancel:
		default:
			continue
		}
		if !validPlanID(a.Value) {
			return nil, fmt.Errorf("slack interaction: action %s names no plan (value %q)", a.ActionID, clip(a.Value, 80))
		}
		if cb.User.ID == "" {
			return nil, fmt.Errorf("slack interaction: action %s on plan %s names no user", a.ActionID, a.Value)
		}
		in := &Interaction{Action: a.ActionID, PlanID: a.Value, SlackUser: cb.User.ID, ResponseURL: cb.ResponseURL,
			Channel: cb.Container.ChannelID, MessageTS: cb.Container.MessageTS, UserTeam: cb.User.TeamID}
		if in.Channel == "" && cb.Channel != nil {
			in.Channel = cb.Channel.ID
		}
		if in.MessageTS == "" && cb.Message != nil {
			in.MessageTS = cb.Message.TS
		}
		if cb.Team != nil {
			in.Team = cb.Team.ID
		}
		return in, nil
	}
	return nil, nil
}

// validPlanID accepts what refill's plan IDs look like: a few letters,
// digits, dashes or underscores.
func validPlanID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// Interactions handles Slack's POST /slack/interactions: a press of
// Approve, Reject or Cancel on one of refill's messages.
//
// In order: the body is read (at most 1 MiB); the request is verified
// (VerifySlack) with the secret named by notify.slack.signing_secret_env —
// without one the endpoint answers 503 — and a bad signature or stale
// timestamp is 401; a request seen before (by any process sharing the state
// store) is a replay and is refused with 409; a press from another
// workspace than notify.slack.team_id (when set) is refused with 401; the
// Slack user is mapped to a refill user (users.NAME.slack); and the
// decision goes through control, as
// that user, with the same rules as every door (nobody approves their own
// request, manual plans need a lead). The answer is 200 with a JSON body
// once the request was Slack's: a refusal (an unmapped user, a
// self-approval, a wrong role, a plan that cannot take the decision)
// changes nothing and is told to the presser alone through the
// interaction's response_url; a decision taken replaces the buttons —
// chat.update with a bot token, the response_url otherwise.
func (n *Notifier) Interactions(c *control.Control, log *slog.Logger) http.Handler {
	return n.InteractionsWith(func(context.Context) (*control.Control, error) { return c, nil }, log)
}

// InteractionsWith is Interactions deciding through whatever control
// current returns at each request: refill serve's, which follows changes
// to refill.yaml (a user removed there can no longer decide from Slack).
func (n *Notifier) InteractionsWith(current func(context.Context) (*control.Control, error), log *slog.Logger) http.Handler {
	if log == nil {
		log = quiet
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.interact(w, r, current, log)
	})
}

func (n *Notifier) interact(w http.ResponseWriter, r *http.Request, current func(context.Context) (*control.Control, error), log *slog.Logger) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "POST only")
		return
	}
	if n.secret == "" {
		writeError(w, http.StatusServiceUnavailable, "Slack interactions are off: set notify.slack.signing_secret_env in refill.yaml and put the app's signing secret in that environment variable")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxInteraction))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "the request body is larger than 1 MiB")
			return
		}
		writeError(w, http.StatusBadRequest, "reading the request body: "+err.Error())
		return
	}
	now := n.now()
	if err := VerifySlack(n.secret, r.Header, body, now); err != nil {
		log.Warn("slack: interaction refused", slog.String("error", err.Error()), slog.String("remote", r.RemoteAddr))
		writeError(w, http.StatusUnauthorized, "not a verified Slack request: "+err.Error())
		return
	}
	// Slack's verifier keeps no memory: a captured request would pass again
	// within its five minutes. The store remembers each signature until
	// its timestamp expires, across every process sharing it.
	// The key is what was signed, not the signature's spelling: hex in
	// either case verifies, and must not make a second request of one.
	ts, _ := strconv.ParseInt(r.Header.Get(headerSlackTimestamp), 10, 64) // VerifySlack parsed it
	signedSum := sha256.Sum256([]byte(strconv.FormatInt(ts, 10) + ":" + string(body)))
	first, err := n.st.FirstSight(r.Context(), "slack:"+hex.EncodeToString(signedSum[:]), now, time.Unix(ts, 0).Add(slackWindow))
	if err != nil {
		log.Error("slack: replay cache", slog.String("error", err.Error()))
		writeError(w, http.StatusInternalServerError, "the state store could not check the request for a replay; nothing was changed")
		return
	}
	if !first {
		log.Warn("slack: replayed interaction refused", slog.String("remote", r.RemoteAddr))
		writeError(w, http.StatusConflict, "this request was received already: a replay changes nothing")
		return
	}
	in, err := ParseInteraction(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if in == nil {
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "text": "nothing for refill to do"})
		return
	}
	c, err := current(r.Context())
	if err != nil {
		log.Error("slack: no control to decide with", slog.String("error", err.Error()))
		writeError(w, http.StatusServiceUnavailable, "refill cannot decide now: "+err.Error())
		return
	}
	if why := otherWorkspace(c.Config, in); why != "" {
		log.Warn("slack: interaction from another workspace refused", slog.String("plan", in.PlanID), slog.String("team", in.Team),
			slog.String("user_team", in.UserTeam), slog.String("slack_user", in.SlackUser), slog.String("remote", r.RemoteAddr))
		writeError(w, http.StatusUnauthorized, why+": nothing was changed")
		return
	}
	user, err := c.SlackUser(in.SlackUser)
	if err != nil {
		n.refuse(w, r, in, err, log)
		return
	}
	st, verb, err := decide(r.Context(), c, in, user)
	switch {
	case err != nil && refusal(err):
		n.refuse(w, r, in, err, log)
		return
	case err != nil:
		log.Error("slack: decision failed", slog.String("plan", in.PlanID), slog.String("user", user), slog.String("error", err.Error()))
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("refill could not record %s's decision on plan %s: %v", user, in.PlanID, err))
		return
	}
	text := fmt.Sprintf("Plan %s %s by %s", in.PlanID, verb, user)
	log.Info("slack: "+text, slog.String("plan", in.PlanID), slog.String("user", user), slog.String("slack_user", in.SlackUser))
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "text": text, "status": st.Plan.Status})
	// Slack wants its answer within three seconds; the message is updated
	// after the answer has gone.
	_ = http.NewResponseController(w).Flush()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), followUpTimeout)
	defer cancel()
	if err := n.replace(ctx, in, escape(text), Message(st, n.cfg.Server.PublicURL)); err != nil {
		log.Warn("slack: the decision is recorded but its message was not updated", slog.String("plan", in.PlanID), slog.String("error", err.Error()))
	}
}

// otherWorkspace says why a press is not from the workspace
// notify.slack.team_id names — its team, or its presser's, is another, or
// it names none — or "" when it is, or when no workspace is configured.
// The signature proves the request is Slack's for this app; an app
// installed in several workspaces, or whose signing secret went with it,
// would otherwise take a press from any of them.
func otherWorkspace(cfg *refill.Config, in *Interaction) string {
	s := cfg.Notify.Slack
	if s == nil || s.TeamID == "" {
		return ""
	}
	switch {
	case in.Team == "" && in.UserTeam == "":
		return fmt.Sprintf("the request names no Slack workspace, and refill takes presses from %s alone (notify.slack.team_id)", s.TeamID)
	case in.Team != "" && in.Team != s.TeamID:
		return fmt.Sprintf("the request comes from Slack workspace %s, and refill takes presses from %s alone (notify.slack.team_id)", clip(in.Team, 32), s.TeamID)
	case in.UserTeam != "" && in.UserTeam != s.TeamID:
		return fmt.Sprintf("the presser belongs to Slack workspace %s, and refill takes presses from %s alone (notify.slack.team_id)", clip(in.UserTeam, 32), s.TeamID)
	}
	return ""
}

// decide applies the pressed decision through control, as user.
func decide(ctx context.Context, c *control.Control, in *Interaction, user string) (*control.State, string, error) {
	switch in.Action {
	case ActionApprove:
		s, err := c.Approve(ctx, in.PlanID, user, "approved via Slack")
		return s, "approved", err
	case ActionReject:
		s, err := c.Reject(ctx, in.PlanID, user, "rejected via Slack")
		return s, "rejected", err
	case ActionCancel:
		s, err := c.Cancel(ctx, in.PlanID, user, "cancelled via Slack")
		if err == nil && s.Plan.Status == refill.StatusRunning {
			return s, "asked to stop", nil
		}
		return s, "cancelled", err
	}
	return nil, "", refill.BadInputf("unknown action %q", in.Action)
}

// refusal reports whether a decision was refused by refill's rules, as
// opposed to failing: the presser is told why, and nothing changed.
func refusal(err error) bool {
	for _, kind := range []error{refill.ErrNotPermitted, refill.ErrBadInput, refill.ErrNotFound, refill.ErrBlocked, refill.ErrLocked} {
		if errors.Is(err, kind) {
			return true
		}
	}
	return false
}

// refuse answers a press refill will not act on: 200 to Slack, and the
// reason to the presser alone.
func (n *Notifier) refuse(w http.ResponseWriter, r *http.Request, in *Interaction, reason error, log *slog.Logger) {
	log.Info("slack: decision refused", slog.String("plan", in.PlanID), slog.String("action", in.Action),
		slog.String("slack_user", in.SlackUser), slog.String("reason", reason.Error()))
	writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": reason.Error(), "code": http.StatusForbidden})
	_ = http.NewResponseController(w).Flush()
	if in.ResponseURL == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), followUpTimeout)
	defer cancel()
	if err := n.respond(ctx, in.ResponseURL, &slack.WebhookMessage{ResponseType: slack.ResponseTypeEphemeral,
		Text: ":no_entry: Nothing was changed: " + mrkdwn(refill.Visible(reason.Error()))}); err != nil {
		log.Warn("slack: could not tell the presser why", slog.String("plan", in.PlanID), slog.String("error", err.Error()))
	}
}

// replace shows the plan's new state on the message that was pressed:
// chat.update with a bot token, else through the response_url.
func (n *Notifier) replace(ctx context.Context, in *Interaction, text string, blocks []slack.Block) error {
	var botErr error
	if n.slack != nil && n.slack.bot() && in.Channel != "" && in.MessageTS != "" {
		if botErr = n.update(ctx, in.Channel, in.MessageTS, text, blocks); botErr == nil {
			return nil
		}
	}
	if in.ResponseURL == "" {
		return botErr
	}
	err := n.respond(ctx, in.ResponseURL, &slack.WebhookMessage{ReplaceOriginal: true, Text: text, Blocks: &slack.Blocks{BlockSet: blocks}})
	return errors.Join(botErr, err)
}

// respond posts to an interaction's response_url, which must be Slack's
// (or the configured API's host, for a private Slack or a test): the URL
// comes from the request, and refill posts nowhere a request tells it to.
func (n *Notifier) respond(ctx context.Context, responseURL string, msg *slack.WebhookMessage) error {
	if !n.responseURLAllowed(responseURL) {
		return fmt.Errorf("response_url %q is not Slack's; not posting to it", clip(responseURL, 120))
	}
	if err := slack.PostWebhookCustomHTTPContext(ctx, responseURL, n.HTTPClient, msg); err != nil {
		return fmt.Errorf("response_url: %w", err)
	}
	return nil
}

func (n *Notifier) responseURLAllowed(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return false
	}
	switch host := strings.ToLower(u.Hostname()); {
	case u.Scheme == "https" && (host == "hooks.slack.com" || host == "hooks.slack-gov.com"):
		return true
	}
	if s := n.cfg.Notify.Slack; s != nil && s.APIURL != "" {
		api, err := url.Parse(s.APIURL)
		return err == nil && api.Scheme == u.Scheme && strings.EqualFold(api.Host, u.Host)
	}
	return false
}

// writeJSON answers with a JSON body of known length, so that Slack has
// the whole answer once it is flushed.
func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"error":"encoding the answer failed","code":500}`)
	}
	b = append(b, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// writeError answers as the API does: {"error": "...", "code": N}.
func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]any{"error": msg, "code": code})
}
