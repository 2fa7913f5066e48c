package notify_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/internal/fixtures"
	"github.com/refill-dev/refill/notify"
)

// vector is one of the signing vectors in shared/fixtures/slack.
type vector struct {
	name, secret, ts, sig string
	body                  []byte
}

func vectors(t *testing.T) []vector {
	dir := fixtures.Dir(t, "slack")
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var out []vector
	for _, name := range []string{"slack_docs_signature_vector.json", "slack_go_signature_vector.json"} {
		var v struct {
			Secret    string `json:"signing_secret"`
			Timestamp string `json:"timestamp"`
			Body      string `json:"raw_body"`
			Expected  string `json:"expected_signature"`
		}
		if err := json.Unmarshal(read(name), &v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, vector{name, v.Secret, v.Timestamp, v.Expected, []byte(v.Body)})
	}
	var b struct {
		Secret  string            `json:"signing_secret"`
		Headers map[string]string `json:"headers"`
		File    string            `json:"raw_body_file"`
	}
	if err := json.Unmarshal(read("bolt_python_block_actions_signed_vector.json"), &b); err != nil {
		t.Fatal(err)
	}
	out = append(out, vector{"bolt_python_block_actions_signed_vector.json", b.Secret, b.Headers["X-Slack-Request-Timestamp"],
		b.Headers["X-Slack-Signature"], read(b.File)})
	return out
}

func header(ts, sig string) http.Header {
	h := http.Header{}
	h.Set("X-Slack-Request-Timestamp", ts)
	h.Set("X-Slack-Signature", sig)
	return h
}

// TestSlackSigningVectors checks VerifySlack against the published vectors
// (at their own time: they are years old), and that a changed body, a
// changed signature or a stale clock fails each.
func TestSlackSigningVectors(t *testing.T) {
	for _, v := range vectors(t) {
		t.Run(v.name, func(t *testing.T) {
			unix, err := strconv.ParseInt(v.ts, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			at := time.Unix(unix, 0)
			if err := notify.VerifySlack(v.secret, header(v.ts, v.sig), v.body, at.Add(90*time.Second)); err != nil {
				t.Fatalf("the vector does not verify: %v", err)
			}
			tampered := bytes.Clone(v.body)
			tampered[len(tampered)/2] ^= 1
			if err := notify.VerifySlack(v.secret, header(v.ts, v.sig), tampered, at); !errors.Is(err, slack.ErrInvalidSignature) {
				t.Errorf("tampered body: %v, want ErrInvalidSignature", err)
			}
			if err := notify.VerifySlack(v.secret+"x", header(v.ts, v.sig), v.body, at); !errors.Is(err, slack.ErrInvalidSignature) {
				t.Errorf("wrong secret: %v, want ErrInvalidSignature", err)
			}
			if err := notify.VerifySlack(v.secret, header(v.ts, v.sig), v.body, at.Add(5*time.Minute+time.Second)); !errors.Is(err, slack.ErrExpiredTimestamp) {
				t.Errorf("six minutes later: %v, want ErrExpiredTimestamp", err)
			}
			if err := notify.VerifySlack(v.secret, header(strconv.FormatInt(unix+1, 10), v.sig), v.body, at); !errors.Is(err, slack.ErrInvalidSignature) {
				t.Errorf("another timestamp: %v, want ErrInvalidSignature", err)
			}
		})
	}
}

// TestVerifySlackAgreesWithSlackGo signs fresh requests and checks that
// VerifySlack and slack-go's own verifier agree on them, good and bad.
func TestVerifySlackAgreesWithSlackGo(t *testing.T) {
	body := []byte("payload=%7B%7D")
	now := time.Now()
	good := signed(signing, now, body)
	stale := signed(signing, now.Add(-6*time.Minute), body)
	forged := signed("another secret", now, body)
	missing := signed(signing, now, body)
	missing.Header.Del("X-Slack-Signature")
	for _, c := range []struct {
		name string
		r    *http.Request
		ok   bool
	}{{"good", good, true}, {"stale", stale, false}, {"forged", forged, false}, {"missing", missing, false}} {
		ours := notify.VerifySlack(signing, c.r.Header, body, now)
		var theirs error
		sv, err := slack.NewSecretsVerifier(c.r.Header, signing)
		if err == nil {
			sv.Write(body)
			err = sv.Ensure()
		}
		theirs = err
		if (ours == nil) != c.ok || (theirs == nil) != c.ok || !errors.Is(ours, theirs) {
			t.Errorf("%s: VerifySlack %v, slack-go %v; want both ok=%v and the same error", c.name, ours, theirs, c.ok)
		}
	}
}

// TestPublishedRequestThroughTheHandler sends bolt-python's signed
// block_actions request through the handler on its own clock: it verifies,
// its action is none of refill's so it is acknowledged and ignored, and
// the same request a second time is a replay.
func TestPublishedRequestThroughTheHandler(t *testing.T) {
	e := setup(t, options{})
	var v vector
	for _, x := range vectors(t) {
		if strings.HasPrefix(x.name, "bolt") {
			v = x
		}
	}
	e.vars["SLACK_SIGNING_SECRET"] = v.secret
	n := e.notifier(t, e.p)
	unix, _ := strconv.ParseInt(v.ts, 10, 64)
	n.Now = func() time.Time { return time.Unix(unix, 0).Add(time.Minute) }
	h := n.Interactions(e.p.Control, nil)

	in, err := notify.ParseInteraction(v.body)
	if err != nil || in != nil {
		t.Fatalf("ParseInteraction(bolt's request) = %+v, %v; want nothing of refill's", in, err)
	}
	req := func() *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/slack/interactions", bytes.NewReader(v.body))
		r.Header = header(v.ts, v.sig)
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return r
	}
	if code, body := serve(t, h, req()); code != http.StatusOK || body["ok"] != true {
		t.Fatalf("bolt's request: %d %v, want 200 ok", code, body)
	}
	if code, body := serve(t, h, req()); code != http.StatusConflict {
		t.Errorf("bolt's request again: %d %v, want 409 (replay)", code, body)
	}
	if n := e.slack.count(); n != 0 {
		t.Errorf("Slack got %d requests for an ignored action, want none", n)
	}
}

// TestRefusedRequestsChangeNothing sends presses refill must refuse and
// checks each changes nothing: the plan stays pending and no audit entry
// is added.
func TestRefusedRequestsChangeNothing(t *testing.T) {
	for _, pg := range []bool{false, true} {
		t.Run(map[bool]string{false: "sqlite", true: "postgres"}[pg], func(t *testing.T) {
			t.Parallel()
			e := setup(t, options{postgres: pg, bot: true})
			plan := e.plan(t)
			if plan.Status != refill.StatusPending {
				t.Fatalf("plan is %s (%s), want pending", plan.Status, plan.Tier)
			}
			h := e.n.Interactions(e.p.Control, slog.New(slog.DiscardHandler))
			before := auditLen(t, e.p.Store, plan.ID)
			now := time.Now()
			approveByBob := e.press(notify.ActionApprove, plan.ID, slackBob)

			unsigned := signed(signing, now, approveByBob)
			unsigned.Header.Del("X-Slack-Signature")
			tampered := signed(signing, now, approveByBob)
			tampered.Body = http.NoBody
			for _, c := range []struct {
				name string
				r    *http.Request
				code int
			}{
				{"wrong signature", signed("not the secret", now, approveByBob), http.StatusUnauthorized},
				{"stale timestamp", signed(signing, now.Add(-6*time.Minute), approveByBob), http.StatusUnauthorized},
				{"future timestamp", signed(signing, now.Add(6*time.Minute), approveByBob), http.StatusUnauthorized},
				{"no signature", unsigned, http.StatusUnauthorized},
				{"body not the one signed", tampered, http.StatusUnauthorized},
				{"GET", httptest.NewRequest(http.MethodGet, "/slack/interactions", nil), http.StatusMethodNotAllowed},
			} {
				if code, body := serve(t, h, c.r); code != c.code || body["error"] == nil {
					t.Errorf("%s: %d %v, want %d with an error", c.name, code, body, c.code)
				}
			}
			if n := e.slack.count(); n != 0 {
				t.Errorf("unverified requests made %d requests to Slack, want none", n)
			}

			for _, c := range []struct {
				name, user, action, want string
			}{
				{"unmapped user", slackNobody, notify.ActionApprove, "not mapped"},
				{"self-approval", slackAlice, notify.ActionApprove, "own request"},
				{"cancel of a plan not running, by someone who may not", slackBob, notify.ActionCancel, "may cancel"},
			} {
				before := len(e.slack.requests("/respond"))
				code, body := serve(t, h, signed(signing, time.Now(), e.press(c.action, plan.ID, c.user)))
				if code != http.StatusOK || body["ok"] != false || !strings.Contains(body["error"].(string), c.want) {
					t.Errorf("%s: %d %v, want 200, ok false and %q", c.name, code, body, c.want)
				}
				got := e.slack.wait(t, "/respond", before+1)[before].JSON(t)
				if got["response_type"] != "ephemeral" || got["replace_original"] != false || !strings.Contains(got["text"].(string), c.want) {
					t.Errorf("%s: response_url got %v, want an ephemeral reason", c.name, got)
				}
			}
			if s := status(t, e.p.Store, plan.ID); s != refill.StatusPending {
				t.Errorf("plan is %s after refused requests, want pending", s)
			}
			if after := auditLen(t, e.p.Store, plan.ID); after != before {
				t.Errorf("audit entries of the plan: %d before, %d after refused requests", before, after)
			}
			if n := len(e.slack.requests("/api/chat.update")); n != 0 {
				t.Errorf("chat.update called %d times for refused requests", n)
			}
		})
	}
}

// TestApproveViaSlack presses Approve as bob: the plan is approved, with
// "via Slack" in its audit entry, and the pressed message is replaced —
// chat.update with a bot token, the response_url with only a webhook.
func TestApproveViaSlack(t *testing.T) {
	for _, c := range []struct {
		name     string
		pg, bot  bool
		wantPath string
	}{
		{"sqlite/bot", false, true, "/api/chat.update"},
		{"sqlite/webhook", false, false, "/respond"},
		{"postgres/bot", true, true, "/api/chat.update"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, options{postgres: c.pg, bot: c.bot})
			plan := e.plan(t)
			h := e.n.Interactions(e.p.Control, nil)
			code, body := serve(t, h, signed(signing, time.Now(), e.press(notify.ActionApprove, plan.ID, slackBob)))
			if code != http.StatusOK || body["ok"] != true || body["status"] != string(refill.StatusApproved) {
				t.Fatalf("approve: %d %v", code, body)
			}
			if s := status(t, e.p.Store, plan.ID); s != refill.StatusApproved {
				t.Fatalf("plan is %s, want approved", s)
			}
			apps, err := e.p.Store.Approvals(t.Context(), plan.ID)
			if err != nil || len(apps) != 1 || apps[0].Actor != "bob" || !strings.Contains(apps[0].Note, "via Slack") {
				t.Errorf("approvals = %+v, %v; want bob's, via Slack", apps, err)
			}
			got := e.slack.wait(t, c.wantPath, 1)[0]
			var blocks string
			if c.bot {
				if got.Form.Get("channel") != channel || got.Form.Get("ts") != "1700000000.000001" {
					t.Errorf("chat.update of %s/%s, want the pressed message", got.Form.Get("channel"), got.Form.Get("ts"))
				}
				blocks = got.Form.Get("blocks")
			} else {
				m := got.JSON(t)
				if m["replace_original"] != true {
					t.Errorf("response_url got %v, want replace_original", m)
				}
				b, _ := json.Marshal(m["blocks"])
				blocks = string(b)
			}
			if !strings.Contains(blocks, "Approved by *bob*") || strings.Contains(blocks, notify.ActionApprove) {
				t.Errorf("the updated message should say who approved and have no Approve button: %s", blocks)
			}
		})
	}
}

// TestReplayAcrossReplicas sends one press to two servers sharing a
// PostgreSQL store: the first acts on it, the second refuses it as a
// replay and changes nothing.
func TestReplayAcrossReplicas(t *testing.T) {
	e := setup(t, options{postgres: true, bot: true})
	plan := e.plan(t)
	p2, n2 := e.open(t)
	first := e.n.Interactions(e.p.Control, nil)
	second := n2.Interactions(p2.Control, nil)

	body := e.press(notify.ActionReject, plan.ID, slackBob)
	ts := time.Now()
	if code, got := serve(t, first, signed(signing, ts, body)); code != http.StatusOK || got["ok"] != true {
		t.Fatalf("first sight: %d %v", code, got)
	}
	entries, calls := auditLen(t, e.p.Store, plan.ID), e.slack.count()
	if code, got := serve(t, second, signed(signing, ts, body)); code != http.StatusConflict {
		t.Errorf("replay on the other replica: %d %v, want 409", code, got)
	}
	if code, got := serve(t, first, signed(signing, ts, body)); code != http.StatusConflict {
		t.Errorf("replay on the same replica: %d %v, want 409", code, got)
	}
	if s := status(t, p2.Store, plan.ID); s != refill.StatusRejected {
		t.Errorf("plan is %s, want rejected once", s)
	}
	if n := auditLen(t, e.p.Store, plan.ID); n != entries {
		t.Errorf("audit entries: %d after the first press, %d after its replays", entries, n)
	}
	if n := e.slack.count(); n != calls {
		t.Errorf("replays made %d more requests to Slack", n-calls)
	}
}

// TestInteractionsOff answers 503 when no signing secret is configured:
// nothing could verify the request.
func TestInteractionsOff(t *testing.T) {
	e := setup(t, options{noSecret: true})
	plan := e.plan(t)
	h := e.n.Interactions(e.p.Control, nil)
	code, body := serve(t, h, signed(signing, time.Now(), e.press(notify.ActionApprove, plan.ID, slackBob)))
	if code != http.StatusServiceUnavailable || !strings.Contains(body["error"].(string), "signing_secret_env") {
		t.Errorf("%d %v, want 503 naming signing_secret_env", code, body)
	}
	if s := status(t, e.p.Store, plan.ID); s != refill.StatusPending {
		t.Errorf("plan is %s, want pending", s)
	}
}

// TestResponseURLMustBeSlacks refuses to post a refusal to a response_url
// that is neither Slack's nor the configured API's host.
func TestResponseURLMustBeSlacks(t *testing.T) {
	e := setup(t, options{})
	plan := e.plan(t)
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("refill posted to a response_url that is not Slack's: %s", r.URL)
	}))
	defer elsewhere.Close()
	body := pressTo(notify.ActionApprove, plan.ID, slackNobody, elsewhere.URL+"/respond")
	if code, got := serve(t, e.n.Interactions(e.p.Control, nil), signed(signing, time.Now(), body)); code != http.StatusOK || got["ok"] != false {
		t.Errorf("%d %v, want a refusal", code, got)
	}
}
