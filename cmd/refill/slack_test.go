package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeSlack answers as Slack's Web API does for chat.postMessage and
// chat.update, and records what it was sent.
type fakeSlack struct {
	mu    sync.Mutex
	posts []url.Values
	edits []url.Values
	hooks []string
	// base is the server's URL; uploads are the files sent to its upload
	// URL, shared records files.completeUploadExternal.
	base    string
	uploads [][]byte
	shared  []url.Values
}

func (f *fakeSlack) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	form, _ := url.ParseQuery(string(body))
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/api/chat.postMessage":
		f.posts = append(f.posts, form)
		fmt.Fprintf(w, `{"ok":true,"channel":"C0REFILL","ts":"1764590000.%06d"}`, len(f.posts))
	case "/api/chat.update":
		f.edits = append(f.edits, form)
		fmt.Fprintf(w, `{"ok":true,"channel":%q,"ts":%q}`, form.Get("channel"), form.Get("ts"))
	case "/api/files.getUploadURLExternal":
		fmt.Fprintf(w, `{"ok":true,"upload_url":%q,"file_id":"F0PIC"}`, f.base+"/upload/F0PIC")
	case "/upload/F0PIC":
		f.uploads = append(f.uploads, body)
		fmt.Fprintf(w, "OK - %d", len(body))
	case "/api/files.completeUploadExternal":
		f.shared = append(f.shared, form)
		fmt.Fprint(w, `{"ok":true,"files":[{"id":"F0PIC","title":"lineage"}]}`)
	case "/response":
		f.hooks = append(f.hooks, string(body))
		fmt.Fprint(w, `ok`)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeSlack) counts() (int, int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.posts), len(f.edits), len(f.hooks)
}

// signed is a Slack interaction request signed with secret at ts.
func signed(t *testing.T, base, secret string, ts int64, payload map[string]any) *http.Request {
	t.Helper()
	b, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	body := "payload=" + url.QueryEscape(string(b))
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%d:%s", ts, body)
	req, err := http.NewRequest("POST", base+"/slack/interactions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	return req
}

// TestSlackThroughTheBinary: a plan made at the command line is posted to
// Slack by the server, once; a signed Approve from a mapped Slack user
// approves it through the same rules, and the message is updated; a
// replayed, forged or self-approving request changes nothing.
func TestSlackThroughTheBinary(t *testing.T) {
	d := setup(t)
	slack := &fakeSlack{}
	api := httptest.NewServer(slack)
	slack.base = api.URL
	defer api.Close()
	cfg, err := os.ReadFile(filepath.Join(d, "refill.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(cfg)
	s = strings.Replace(s, "alice: {roles: [engineer]}", "alice: {roles: [engineer], slack: UALICE}", 1)
	s = strings.Replace(s, "bob: {roles: [engineer]}", "bob: {roles: [engineer], slack: UBOB}", 1)
	s += fmt.Sprintf("notify:\n  slack: {bot_token_env: TEST_SLACK_TOKEN, channel: C0REFILL, signing_secret_env: TEST_SLACK_SECRET, api_url: %q}\nserver: {public_url: \"https://refill.example.com\"}\n", api.URL+"/api/")
	if err := os.WriteFile(filepath.Join(d, "refill.yaml"), []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	const secret = "8f742231b10e8888abcd99yyyzzz85a5"
	t.Setenv("TEST_SLACK_TOKEN", "xoxb-test")
	t.Setenv("TEST_SLACK_SECRET", secret)

	// The plan is made at the CLI, with no server running: its message
	// waits in the queue, committed with the plan.
	p := decode[planJSON](t, step(t, d, 0, "", "plan", "sessions", "--from", "2026-11-10", "--to", "2026-11-23", "--reason", "two weeks", "--as", "alice", "-o", "json").stdout)
	srv := serve(t, d)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if posts, _, _ := slack.counts(); posts > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Slack message within 30 s\n%s", srv.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	slack.mu.Lock()
	first := slack.posts[0]
	slack.mu.Unlock()
	for _, want := range []string{p.ID, "semi-auto", "https://refill.example.com/plans/" + p.ID, "refill_approve", "refill_reject", "two weeks"} {
		if !strings.Contains(first.Get("blocks")+first.Get("text"), want) {
			t.Errorf("the message lacks %q:\n%s", want, first.Get("blocks"))
		}
	}
	if first.Get("channel") != "C0REFILL" {
		t.Errorf("posted to %q", first.Get("channel"))
	}
	// The lineage picture follows in the message's thread, a PNG; and no
	// link in the message needs a bearer token (no /api/ route).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		slack.mu.Lock()
		n := len(slack.shared)
		slack.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no lineage picture shared within 30 s\n%s", srv.logs)
		}
	}
	slack.mu.Lock()
	up, shared := slack.uploads[0], slack.shared[0]
	slack.mu.Unlock()
	if i := bytes.Index(up, []byte("\x89PNG\r\n\x1a\n")); i < 0 {
		t.Errorf("the upload is no PNG: %.120q", up)
	} else if _, err := png.Decode(bytes.NewReader(up[i:])); err != nil {
		t.Errorf("the uploaded PNG does not decode: %v", err)
	}
	if shared.Get("channel_id") != "C0REFILL" || shared.Get("thread_ts") != "1764590000.000001" {
		t.Errorf("the picture went to %q thread %q, not the plan's message", shared.Get("channel_id"), shared.Get("thread_ts"))
	}
	if strings.Contains(first.Get("blocks"), "refill.example.com/api/") {
		t.Errorf("a link in the message needs a bearer token:\n%s", first.Get("blocks"))
	}

	press := func(user string, ts int64, sign string) (int, string) {
		payload := map[string]any{
			"type": "block_actions", "user": map[string]any{"id": user},
			"actions":      []map[string]any{{"action_id": "refill_approve", "block_id": "decide", "value": p.ID, "type": "button"}},
			"response_url": api.URL + "/response",
			"container":    map[string]any{"channel_id": "C0REFILL", "message_ts": "1764590000.000001"},
		}
		req := signed(t, srv.url, sign, ts, payload)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status := func() string {
		return decode[planJSON](t, step(t, d, 0, "", "show", p.ID, "-o", "json").stdout).Status
	}
	now := time.Now().Unix()
	if code, body := press("UBOB", now, "not the secret"); code != http.StatusUnauthorized || status() != "pending" {
		t.Errorf("forged signature: %d %s; status %s", code, body, status())
	}
	if code, body := press("UBOB", now-600, secret); code != http.StatusUnauthorized || status() != "pending" {
		t.Errorf("stale timestamp: %d %s; status %s", code, body, status())
	}
	if code, body := press("UNOBODY", now, secret); !strings.Contains(body, "not mapped") || status() != "pending" {
		t.Errorf("unmapped user: %d %s; status %s", code, body, status())
	}
	if code, body := press("UALICE", now+1, secret); !strings.Contains(body, "nobody approves their own request") || status() != "pending" {
		t.Errorf("self-approval: %d %s; status %s", code, body, status())
	}
	if code, body := press("UBOB", now+2, secret); code != http.StatusOK || status() != "approved" {
		t.Fatalf("bob approves in Slack: %d %s; status %s\n%s", code, body, status(), srv.logs)
	}
	// The very same signed request again is a replay: refused.
	if code, body := press("UBOB", now+2, secret); code != http.StatusConflict {
		t.Errorf("replay: %d %s", code, body)
	}
	approvals := step(t, d, 0, "", "show", p.ID, "-o", "json").stdout
	if n := strings.Count(approvals, `"decision": "approve"`); n != 1 {
		t.Errorf("%d approvals recorded, want 1", n)
	}
	// The message is updated with the outcome.
	deadline = time.Now().Add(30 * time.Second)
	for {
		_, edits, _ := slack.counts()
		if edits > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Slack message was not updated\n%s", srv.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	slack.mu.Lock()
	edit := slack.edits[0]
	slack.mu.Unlock()
	if !strings.Contains(edit.Get("blocks")+edit.Get("text"), "bob") || strings.Contains(edit.Get("blocks"), "refill_approve") {
		t.Errorf("the updated message should name bob and drop the buttons:\n%s", edit.Get("blocks"))
	}
	// Exactly once: the plan's message was posted once, counted when no
	// notice job is left to send anything (each has completed).
	state, err := sql.Open("sqlite", filepath.Join(d, ".refill", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var left int
		if err := state.QueryRow(`SELECT count(*) FROM river_job WHERE kind = 'refill_notify' AND state <> 'completed'`).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d notice job(s) still not done after 30 s\n%s", left, srv.logs)
		}
	}
	slack.mu.Lock()
	created := 0
	for _, post := range slack.posts {
		if strings.Contains(post.Get("blocks"), "refill_approve") {
			created++
		}
	}
	slack.mu.Unlock()
	if created != 1 {
		t.Errorf("the plan's message was posted %d times, want once", created)
	}
}
