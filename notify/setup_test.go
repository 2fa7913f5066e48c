package notify_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the test warehouse

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/internal/pgtest"
	"github.com/refill-dev/refill/internal/secret"
	"github.com/refill-dev/refill/notify"
	"github.com/refill-dev/refill/planner"
	"github.com/refill-dev/refill/project"
	"github.com/refill-dev/refill/store"
)

// Slack users of the test project.
const (
	slackAlice  = "U0ALICE"  // alice, an engineer, requests plans
	slackBob    = "U0BOB"    // bob, an engineer, approves them
	slackCarol  = "U0CAROL"  // carol, a lead
	slackNobody = "U0NOBODY" // mapped to nobody
	channel     = "C0BACKFILL"
	signing     = "a signing secret for tests"
	hookSecret  = "a webhook secret for tests"
	publicURL   = "https://refill.example.com"
)

// recorded is one request the fake Slack (or a webhook receiver) got.
type recorded struct {
	Path   string
	Header http.Header
	Body   []byte
	Form   url.Values // chat.* methods are form-encoded
	At     time.Time
}

// JSON decodes a JSON body (incoming webhooks, response_url, generic
// webhooks).
func (r recorded) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("%s: body is not JSON: %v: %s", r.Path, err, r.Body)
	}
	return m
}

// fakeSlack answers as Slack's Web API (chat.postMessage, chat.update), an
// incoming webhook, an interaction's response_url and a generic webhook
// receiver would, and records every request.
type fakeSlack struct {
	srv      *httptest.Server
	mu       sync.Mutex
	reqs     []recorded
	failNext atomic.Int32 // answer this many of the next requests with 500
	posted   atomic.Int64
	arrived  chan recorded
}

func newFakeSlack(t testing.TB) *fakeSlack {
	f := &fakeSlack{arrived: make(chan recorded, 1024)}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeSlack) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec := recorded{Path: r.URL.Path, Header: r.Header.Clone(), Body: body, At: time.Now()}
	if strings.HasPrefix(r.URL.Path, "/api/") {
		rec.Form, _ = url.ParseQuery(string(body))
	}
	if f.failNext.Add(-1) >= 0 {
		rec.Path += " (failed)"
		f.record(rec)
		http.Error(w, "try again later", http.StatusInternalServerError)
		return
	}
	f.failNext.Store(0)
	f.record(rec)
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/api/chat.postMessage":
		n := f.posted.Add(1)
		fmt.Fprintf(w, `{"ok":true,"channel":%q,"ts":"1700000000.%06d"}`, rec.Form.Get("channel"), n)
	case "/api/files.getUploadURLExternal":
		fmt.Fprintf(w, `{"ok":true,"upload_url":%q,"file_id":"F%d"}`, f.srv.URL+"/upload/F1", f.posted.Load())
	case "/upload/F1":
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "OK - %d", len(body))
	case "/api/files.completeUploadExternal":
		fmt.Fprintf(w, `{"ok":true,"files":[{"id":"F%d","title":"lineage"}]}`, f.posted.Load())
	case "/api/chat.update":
		fmt.Fprintf(w, `{"ok":true,"channel":%q,"ts":%q,"text":""}`, rec.Form.Get("channel"), rec.Form.Get("ts"))
	default:
		fmt.Fprint(w, "ok")
	}
}

func (f *fakeSlack) record(r recorded) {
	f.mu.Lock()
	f.reqs = append(f.reqs, r)
	f.mu.Unlock()
	select {
	case f.arrived <- r:
	default:
	}
}

// requests returns the requests to path so far.
func (f *fakeSlack) requests(path string) []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []recorded
	for _, r := range f.reqs {
		if r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

func (f *fakeSlack) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs)
}

// wait waits for at least n requests to path.
func (f *fakeSlack) wait(t testing.TB, path string, n int) []recorded {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := f.requests(path)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 20s for %d request(s) to %s; got %d", n, path, len(got))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// options shape a test project.
type options struct {
	// postgres puts the state store on PostgreSQL (its own schema).
	postgres bool
	// bot posts with a bot token (chat.postMessage, chat.update); else
	// through an incoming webhook.
	bot bool
	// noNotify leaves notify: out of refill.yaml.
	noNotify bool
	// noSecret leaves Slack's signing secret out of the environment.
	noSecret bool
	// team is notify.slack.team_id, "" for none.
	team string
	// openLineage sends runs to the fake's /ol/api/v1/lineage, with the
	// API key in OL_KEY; broken makes orders_daily's job fail.
	openLineage, broken bool
}

// env is a test project with notices installed, and its fake Slack.
type env struct {
	p     *project.Project
	n     *notify.Notifier
	slack *fakeSlack
	vars  map[string]string
	cfg   string
}

func (e *env) getenv(name string) string { return e.vars[name] }

// setup writes a project — a SQLite warehouse with orders and the
// orders_daily aggregate built from them, users alice, bob (engineers) and
// carol (a lead) mapped to Slack users — opens it, and installs notices on
// its state store.
func setup(t testing.TB, o options) *env {
	t.Helper()
	e := &env{slack: newFakeSlack(t), vars: map[string]string{}}
	dir := t.TempDir()
	wh, err := sql.Open("sqlite", filepath.Join(dir, "warehouse.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE orders (id INTEGER, order_date TEXT, amount REAL)`,
		`WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < 50)
		 INSERT INTO orders SELECT i, date('2026-11-01', '+' || (i % 5) || ' days'), i FROM g`,
		`CREATE TABLE orders_daily (day TEXT, orders INTEGER, amount REAL)`,
		`INSERT INTO orders_daily VALUES ('2026-11-01', 10, 1), ('2026-11-02', 3, 1)`,
	} {
		if _, err := wh.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	wh.Close()
	state := "sqlite:.refill/state.db"
	if o.postgres {
		state = pgtest.Schema(t)
	}
	notifyYAML := ""
	if !o.noNotify {
		notifyYAML = fmt.Sprintf(`notify:
  slack:
    webhook_url_env: SLACK_WEBHOOK_URL
    bot_token_env: SLACK_BOT_TOKEN
    channel: %s
    signing_secret_env: SLACK_SIGNING_SECRET
    api_url: %s/api/
  webhooks:
    - {url: "%s/hook", secret_env: HOOK_SECRET}
`, channel, e.slack.srv.URL, e.slack.srv.URL)
		if o.team != "" {
			notifyYAML = strings.Replace(notifyYAML, "    api_url:", "    team_id: "+o.team+"\n    api_url:", 1)
		}
	}
	if o.openLineage {
		notifyYAML += fmt.Sprintf("openlineage: {url: \"%s/ol\", api_key_env: OL_KEY, namespace: acme-refill}\nrun: {attempts: 1}\n", e.slack.srv.URL)
		e.vars["OL_KEY"] = "an OpenLineage key"
	}
	job := "SELECT order_date AS day, count(*) AS orders, sum(amount) AS amount"
	if o.broken {
		job = "SELECT order_date AS day, count(*) AS orders, sum(amount) AS amount, 1 AS no_such_column"
	}
	cfg := fmt.Sprintf(`version: 1
warehouse: sqlite:warehouse.db
state: "%s"
server: {public_url: "%s"}
%susers:
  alice: {roles: [engineer], slack: %s}
  bob: {roles: [engineer], slack: %s}
  carol: {roles: [lead], slack: %s}
datasets:
  orders:
    table: orders
    partition: {column: order_date}
  orders_daily:
    table: orders_daily
    partition: {column: day}
    upstream: [orders]
    tags: [aggregate]
    job:
      query: |
        %s
        FROM orders WHERE order_date = :partition GROUP BY order_date
`, state, publicURL, notifyYAML, slackAlice, slackBob, slackCarol, job)
	e.cfg = filepath.Join(dir, "refill.yaml")
	if err := os.WriteFile(e.cfg, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	e.vars["SLACK_WEBHOOK_URL"] = e.slack.srv.URL + "/webhook"
	e.vars["HOOK_SECRET"] = hookSecret
	if o.bot {
		e.vars["SLACK_BOT_TOKEN"] = "xoxb-test"
	}
	if !o.noSecret {
		e.vars["SLACK_SIGNING_SECRET"] = signing
	}
	e.p, e.n = e.open(t)
	return e
}

// open opens the project (again: another process on the same store) and
// installs notices on it.
func (e *env) open(t testing.TB) (*project.Project, *notify.Notifier) {
	t.Helper()
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	p, err := project.Open(ctx, project.Options{Config: e.cfg, Getenv: e.getenv, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	n := e.notifier(t, p)
	if err := n.Install(ctx); err != nil {
		t.Fatal(err)
	}
	return p, n
}

// notifier is a Notifier of p's whose secrets come from e's environment.
func (e *env) notifier(t testing.TB, p *project.Project) *notify.Notifier {
	t.Helper()
	n, err := notify.New(p.Config, p.Store, secret.Reader{Getenv: e.getenv}.Read)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// plan makes alice's plan: orders (and so orders_daily) for three days.
func (e *env) plan(t testing.TB) *refill.Plan {
	t.Helper()
	p, err := e.p.Control.Plan(context.Background(), "alice", planner.Request{Targets: []string{"orders"},
		From: "2026-11-01", To: "2026-11-03", Reason: "late orders <!here>"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// run works the notice queue until the test ends.
func (e *env) run(t testing.TB, p *project.Project, n *notify.Notifier) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx, p.Control, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// jobs counts notice jobs in River's table.
func jobs(t testing.TB, st *store.Store) int {
	t.Helper()
	var n int
	if err := st.DB().QueryRow(`SELECT count(*) FROM river_job WHERE kind = 'refill_notify'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// auditLen counts a plan's audit entries.
func auditLen(t testing.TB, st *store.Store, planID string) int {
	t.Helper()
	evs, err := st.Audit(context.Background(), store.AuditFilter{PlanID: planID})
	if err != nil {
		t.Fatal(err)
	}
	return len(evs)
}

func status(t testing.TB, st *store.Store, planID string) refill.Status {
	t.Helper()
	p, err := st.Plan(context.Background(), planID)
	if err != nil {
		t.Fatal(err)
	}
	return p.Status
}

// press is the body Slack sends when user presses action on plan's message.
func (e *env) press(action, planID, user string) []byte {
	return pressTo(action, planID, user, e.slack.srv.URL+"/respond")
}

// pressTo is press with another response_url.
func pressTo(action, planID, user, responseURL string) []byte {
	return pressFrom(action, planID, user, responseURL, "", "T0TEST")
}

// pressFrom is pressTo from workspace team (no team object when "") by a
// user of workspace userTeam (no team_id when "").
func pressFrom(action, planID, user, responseURL, team, userTeam string) []byte {
	u := map[string]any{"id": user, "username": strings.ToLower(user)}
	if userTeam != "" {
		u["team_id"] = userTeam
	}
	payload := map[string]any{
		"type":         "block_actions",
		"user":         u,
		"api_app_id":   "A0REFILL",
		"container":    map[string]any{"type": "message", "message_ts": "1700000000.000001", "channel_id": channel},
		"channel":      map[string]any{"id": channel, "name": "backfills"},
		"response_url": responseURL,
		"trigger_id":   "1.2.3",
		"actions": []any{map[string]any{
			"action_id": action, "block_id": "refill_actions", "type": "button", "value": planID,
			"text": map[string]any{"type": "plain_text", "text": "Approve"}, "action_ts": "1700000001.000001",
		}},
	}
	if team != "" {
		payload["team"] = map[string]any{"id": team, "domain": "acme"}
	}
	b, _ := json.Marshal(payload)
	return []byte("payload=" + url.QueryEscape(string(b)))
}

// signed is a request to the interactions endpoint signed at ts.
func signed(secret string, ts time.Time, body []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/slack/interactions", strings.NewReader(string(body)))
	stamp := strconv.FormatInt(ts.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(m, "v0:%s:%s", stamp, body)
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("X-Slack-Request-Timestamp", stamp)
	r.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(m.Sum(nil)))
	return r
}

// serve runs one request through the handler and decodes its JSON answer.
func serve(t testing.TB, h http.Handler, r *http.Request) (int, map[string]any) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var m map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
		t.Fatalf("answer is not JSON: %v: %s", err, w.Body)
	}
	return w.Code, m
}

var errRollback = errors.New("roll back")
