package server_test

import (
	"bytes"
	"context"
	"errors"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/demo"
	"github.com/refill-dev/refill/internal/apitest"
	"github.com/refill-dev/refill/lineage"
	"github.com/refill-dev/refill/planner"
	"github.com/refill-dev/refill/project"
	"github.com/refill-dev/refill/server"
	"github.com/refill-dev/refill/store"
)

// webEnv is a served demo project: the demo's warehouse and refill.yaml
// (alice and bob are engineers, carol a lead), a server over it, and an
// API token per user.
type webEnv struct {
	ctx    context.Context
	sc     *demo.Scenario
	ctl    *control.Control
	ts     *httptest.Server
	tokens map[string]string
	ids    map[string]string // token IDs, for revoking
}

func webSetup(t *testing.T) *webEnv {
	t.Helper()
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	sc := demoCopy(t, now)
	p, err := project.Open(ctx, project.Options{Config: sc.Config, Now: func() time.Time { return now },
		Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	srv := server.New(&server.Server{Config: p.Config, Store: p.Store, Control: p.Control, Runner: p.Runner})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.Close()
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	})
	e := &webEnv{ctx: ctx, sc: sc, ctl: p.Control, ts: ts, tokens: map[string]string{}, ids: map[string]string{}}
	for _, u := range []string{"alice", "bob", "carol"} {
		secret, tok, err := p.Control.CreateToken(ctx, u, 0)
		if err != nil {
			t.Fatal(err)
		}
		e.tokens[u], e.ids[u] = secret, tok.ID
	}
	return e
}

// plan makes a plan as user through control, as the CLI would.
func (e *webEnv) plan(t *testing.T, user string, r planner.Request) *refill.Plan {
	t.Helper()
	p, err := e.ctl.Plan(e.ctx, user, r)
	if err != nil && !errors.Is(err, refill.ErrBlocked) {
		t.Fatal(err)
	}
	return p
}

// semiAuto is alice's plan over three days of sessions: an unproven job,
// so one approval by someone else.
func (e *webEnv) semiAuto(t *testing.T) *refill.Plan {
	t.Helper()
	p := e.plan(t, "alice", planner.Request{Targets: []string{"sessions"}, From: e.sc.Day(12), To: e.sc.Day(10), Reason: "late sessions"})
	if p.Tier != refill.TierSemiAuto || p.Status != refill.StatusPending {
		t.Fatalf("plan is %s/%s, want semi-auto/pending: %v", p.Tier, p.Status, p.Reasons)
	}
	return p
}

func (e *webEnv) status(t *testing.T, id string) refill.Status {
	t.Helper()
	st, err := e.ctl.Load(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return st.Plan.Status
}

func (e *webEnv) approvals(t *testing.T, id string) int {
	t.Helper()
	st, err := e.ctl.Load(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return len(st.Approvals)
}

// resp is a response with its body read.
type resp struct {
	*http.Response
	body string
}

func (r resp) cookie(name string) *http.Cookie {
	for _, c := range r.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// do sends a request to the server without following redirects. The
// session is user's (no cookie for ""); headers are extra request headers.
func (e *webEnv) do(t *testing.T, method, path, user string, form url.Values, headers map[string]string, cookies ...*http.Cookie) resp {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(e.ctx, method, e.ts.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if user != "" {
		req.AddCookie(&http.Cookie{Name: "refill_session", Value: e.tokens[user]})
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	var sent []byte
	if form != nil {
		sent = []byte(form.Encode())
	}
	apitest.Check(t, req, sent, res.StatusCode, res.Header, b)
	return resp{res, string(b)}
}

func (e *webEnv) get(t *testing.T, path, user string) resp {
	t.Helper()
	return e.do(t, http.MethodGet, path, user, nil, nil)
}

// sameOrigin are the headers a browser sends with a form POST from the
// server's own page.
var sameOrigin = map[string]string{"Sec-Fetch-Site": "same-origin"}

// post sends a form as user from the server's own page.
func (e *webEnv) post(t *testing.T, path, user string, form url.Values) resp {
	t.Helper()
	return e.do(t, http.MethodPost, path, user, form, sameOrigin)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is user's CSRF token, read from a page as a browser would.
func (e *webEnv) csrf(t *testing.T, user string) string {
	t.Helper()
	r := e.get(t, "/", user)
	m := csrfField.FindStringSubmatch(r.body)
	if r.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("GET / as %s: %d, no csrf field:\n%s", user, r.StatusCode, r.body)
	}
	return html.UnescapeString(m[1])
}

// has reports whether the page has an element with id.
func has(body, id string) bool { return strings.Contains(body, `id="`+id+`"`) }

// text is the text of the element with id (up to its first tag's end).
func text(body, id string) string {
	i := strings.Index(body, `id="`+id+`"`)
	if i < 0 {
		return ""
	}
	rest := body[i:]
	start := strings.Index(rest, ">")
	end := strings.Index(rest, "</")
	if start < 0 || end < start {
		return ""
	}
	return html.UnescapeString(strings.TrimSpace(rest[start+1 : end]))
}

func TestWebSignIn(t *testing.T) {
	t.Parallel()
	e := webSetup(t)

	r := e.get(t, "/plans/x?y=1", "")
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/signin?next="+url.QueryEscape("/plans/x?y=1") {
		t.Fatalf("unauthenticated page: %d to %q, want 303 to /signin?next=...", r.StatusCode, r.Header.Get("Location"))
	}
	if r := e.get(t, "/plans/x/lineage.svg", ""); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("unauthenticated picture: %d, want 401", r.StatusCode)
	}

	// signinForm fetches the sign-in form as a browser would: its nonce
	// cookie and its CSRF field.
	signinForm := func(next string) (*http.Cookie, string) {
		t.Helper()
		r := e.get(t, "/signin?next="+url.QueryEscape(next), "")
		nonce, m := r.cookie("refill_signin"), csrfField.FindStringSubmatch(r.body)
		if r.StatusCode != http.StatusOK || nonce == nil || m == nil || !has(r.body, "token") {
			t.Fatalf("GET /signin: %d, nonce %v, form:\n%s", r.StatusCode, nonce, r.body)
		}
		return nonce, html.UnescapeString(m[1])
	}

	nonce, csrf := signinForm("/plans/x")
	r = e.do(t, http.MethodPost, "/signin", "", url.Values{"csrf": {csrf}, "next": {"/plans/x"}, "token": {"rfl_not-a-token"}}, sameOrigin, nonce)
	if r.StatusCode != http.StatusUnauthorized || !strings.Contains(text(r.body, "flash"), "not accepted") {
		t.Errorf("bad token: %d, flash %q; want 401 and the refusal", r.StatusCode, text(r.body, "flash"))
	}
	if c := r.cookie("refill_session"); c != nil && c.Value != "" {
		t.Error("a bad token set a session cookie")
	}

	r = e.do(t, http.MethodPost, "/signin", "", url.Values{"next": {"/plans/x"}, "token": {e.tokens["bob"]}}, sameOrigin, nonce)
	if r.StatusCode != http.StatusForbidden || r.cookie("refill_session") != nil {
		t.Errorf("sign-in without its CSRF field: %d, cookie %v; want 403 and no session", r.StatusCode, r.cookie("refill_session"))
	}

	nonce, csrf = signinForm("/plans/x")
	r = e.do(t, http.MethodPost, "/signin", "", url.Values{"csrf": {csrf}, "next": {"/plans/x"}, "token": {" " + e.tokens["bob"] + "\n"}}, sameOrigin, nonce)
	c := r.cookie("refill_session")
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/plans/x" || c == nil {
		t.Fatalf("sign-in: %d to %q, cookie %v; want 303 to next with a session", r.StatusCode, r.Header.Get("Location"), c)
	}
	if c.Value != e.tokens["bob"] || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure {
		t.Errorf("session cookie %+v: want the token, HttpOnly, SameSite=Strict, Path=/, not Secure over plain HTTP", c)
	}
	if r := e.do(t, http.MethodGet, "/", "", nil, nil, c); r.StatusCode != http.StatusOK || text(r.body, "user") != "bob" {
		t.Errorf("with the cookie: %d, user %q", r.StatusCode, text(r.body, "user"))
	}

	// next never leads off the server.
	for _, next := range []string{"//evil.example/x", "https://evil.example/", "/\\evil.example", "javascript:alert(1)", "/\tx"} {
		nonce, csrf := signinForm(next)
		r := e.do(t, http.MethodPost, "/signin", "", url.Values{"csrf": {csrf}, "next": {next}, "token": {e.tokens["bob"]}}, sameOrigin, nonce)
		if loc := r.Header.Get("Location"); r.StatusCode != http.StatusSeeOther || loc != "/" {
			t.Errorf("next %q: %d to %q, want 303 to /", next, r.StatusCode, loc)
		}
	}

	// A revoked token ends the session at once.
	if _, err := e.ctl.RevokeToken(e.ctx, e.ids["bob"], "bob"); err != nil {
		t.Fatal(err)
	}
	r = e.get(t, "/", "bob")
	if r.StatusCode != http.StatusSeeOther || !strings.Contains(r.Header.Get("Location"), "ended=1") {
		t.Errorf("revoked token: %d to %q, want 303 to sign-in", r.StatusCode, r.Header.Get("Location"))
	}

	// Sign-out needs the CSRF token too, and forgets the cookie.
	csrf = e.csrf(t, "alice")
	if r := e.post(t, "/signout", "alice", url.Values{}); r.StatusCode != http.StatusForbidden {
		t.Errorf("sign-out without CSRF: %d, want 403", r.StatusCode)
	}
	r = e.post(t, "/signout", "alice", url.Values{"csrf": {csrf}})
	if c := r.cookie("refill_session"); r.StatusCode != http.StatusSeeOther || c == nil || c.MaxAge >= 0 {
		t.Errorf("sign-out: %d, cookie %v; want 303 and the cookie deleted", r.StatusCode, c)
	}
}

func TestWebPlanPage(t *testing.T) {
	t.Parallel()
	e := webSetup(t)
	p := e.semiAuto(t)
	path := "/plans/" + p.ID

	bob := e.get(t, path, "bob")
	if bob.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", path, bob.StatusCode, bob.body)
	}
	for _, h := range []string{"Content-Security-Policy", "X-Content-Type-Options", "X-Frame-Options"} {
		if bob.Header.Get(h) == "" {
			t.Errorf("no %s header", h)
		}
	}
	if csp := bob.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("CSP %q", csp)
	}
	if got := text(bob.body, "status"); got != "pending" {
		t.Errorf("#status = %q, want pending", got)
	}
	if !strings.Contains(bob.body, `<img id="lineage" src="/plans/`+p.ID+`/lineage.svg"`) {
		t.Error("no lineage picture")
	}
	if !has(bob.body, "gate") || !has(bob.body, "findings-none") || !strings.Contains(bob.body, `href="/datasets/events_raw"`) {
		t.Error("the gate's verdict over events_raw is not shown")
	}
	if !strings.Contains(bob.body, "late sessions") || !strings.Contains(bob.body, "needs one approval by someone other than alice") {
		t.Error("the page lacks the reason or what is unmet")
	}
	if !strings.Contains(bob.body, `class="list partitions" data-dataset="sessions"`) || !strings.Contains(bob.body, e.sc.Day(11)) {
		t.Error("no partitions table for the sessions step")
	}
	if !has(bob.body, "approve") || !has(bob.body, "reject") {
		t.Error("bob (an engineer who did not ask) is not offered approve and reject")
	}
	if has(bob.body, "apply") {
		t.Error("Apply offered before approval")
	}
	if has(bob.body, "cancel") {
		t.Error("bob neither asked nor approved nor leads, yet is offered cancel")
	}

	alice := e.get(t, path, "alice")
	if has(alice.body, "approve") || has(alice.body, "reject") {
		t.Error("alice is offered to decide on her own request")
	}
	if !has(alice.body, "cancel") {
		t.Error("the requester is not offered cancel")
	}

	svg := e.get(t, path+"/lineage.svg", "bob")
	if svg.StatusCode != http.StatusOK || svg.Header.Get("Content-Type") != "image/svg+xml" || !strings.Contains(svg.body, "<svg") ||
		!strings.Contains(svg.body, "sessions") || !strings.Contains(svg.body, "events_raw") {
		t.Errorf("lineage.svg: %d %s\n%.300s", svg.StatusCode, svg.Header.Get("Content-Type"), svg.body)
	}
	if r := e.get(t, "/plans/nope", "bob"); r.StatusCode != http.StatusNotFound {
		t.Errorf("unknown plan: %d, want 404", r.StatusCode)
	}
}

// A POST the page did not offer is refused by control, and nothing changes.
func TestWebForgedApproveIsRefused(t *testing.T) {
	t.Parallel()
	e := webSetup(t)
	p := e.semiAuto(t)
	r := e.post(t, "/plans/"+p.ID+"/approve", "alice", url.Values{"csrf": {e.csrf(t, "alice")}, "note": {"mine"}})
	if r.StatusCode != http.StatusForbidden {
		t.Errorf("self-approval: %d, want 403", r.StatusCode)
	}
	if f := text(r.body, "flash"); !strings.Contains(f, "nobody approves their own request") {
		t.Errorf("#flash = %q, want control's refusal", f)
	}
	if got := text(r.body, "status"); got != "pending" {
		t.Errorf("the refusal page shows #status %q", got)
	}
	if st := e.status(t, p.ID); st != refill.StatusPending || e.approvals(t, p.ID) != 0 {
		t.Errorf("after a refused approval: %s with %d decisions", st, e.approvals(t, p.ID))
	}
}

func TestWebCSRF(t *testing.T) {
	t.Parallel()
	e := webSetup(t)
	p := e.semiAuto(t)
	path := "/plans/" + p.ID + "/approve"
	bobs := e.csrf(t, "bob")
	for _, c := range []struct {
		name    string
		form    url.Values
		headers map[string]string
	}{
		{"no token", url.Values{"note": {"x"}}, sameOrigin},
		{"another session's token", url.Values{"csrf": {e.csrf(t, "carol")}}, sameOrigin},
		{"a made-up token", url.Values{"csrf": {strings.Repeat("A", len(bobs))}}, sameOrigin},
		{"cross-site Origin", url.Values{"csrf": {bobs}}, map[string]string{"Origin": "https://evil.example"}},
		{"cross-site fetch", url.Values{"csrf": {bobs}}, map[string]string{"Sec-Fetch-Site": "cross-site"}},
	} {
		r := e.do(t, http.MethodPost, path, "bob", c.form, c.headers)
		if r.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", c.name, r.StatusCode)
		}
		if st := e.status(t, p.ID); st != refill.StatusPending || e.approvals(t, p.ID) != 0 {
			t.Fatalf("%s: the plan is %s with %d decisions", c.name, st, e.approvals(t, p.ID))
		}
	}
	// Without a session nothing is done either.
	if r := e.post(t, path, "", url.Values{"csrf": {bobs}}); r.StatusCode != http.StatusUnauthorized || e.status(t, p.ID) != refill.StatusPending {
		t.Errorf("no session: %d", r.StatusCode)
	}
	// The same form from the server's own origin goes through.
	r := e.do(t, http.MethodPost, path, "bob", url.Values{"csrf": {bobs}}, map[string]string{"Origin": e.ts.URL})
	if r.StatusCode != http.StatusSeeOther || e.status(t, p.ID) != refill.StatusApproved {
		t.Errorf("same-origin approval: %d, plan %s", r.StatusCode, e.status(t, p.ID))
	}
}

// bob approves; alice applies from the page; the page follows the run and
// then shows what it did.
func TestWebApproveAndApply(t *testing.T) {
	t.Parallel()
	e := webSetup(t)
	p := e.semiAuto(t)
	path := "/plans/" + p.ID

	r := e.post(t, path+"/approve", "bob", url.Values{"csrf": {e.csrf(t, "bob")}, "note": {"range checked"}})
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != path {
		t.Fatalf("approve: %d to %q\n%s", r.StatusCode, r.Header.Get("Location"), r.body)
	}
	if st := e.status(t, p.ID); st != refill.StatusApproved {
		t.Fatalf("after bob's approval the plan is %s", st)
	}
	flash := r.cookie("refill_flash")
	if flash == nil {
		t.Fatal("no flash message after the approval")
	}
	page := e.do(t, http.MethodGet, path, "bob", nil, nil, flash)
	if got := text(page.body, "status"); got != "approved" {
		t.Errorf("#status = %q, want approved", got)
	}
	if got := text(page.body, "written"); !strings.HasPrefix(got, "Nothing has been written") {
		t.Errorf("#written before the run = %q", got)
	}
	if !strings.Contains(text(page.body, "flash"), "You approved") {
		t.Errorf("#flash = %q", text(page.body, "flash"))
	}
	if has(page.body, "approve") {
		t.Error("approve still offered on an approved plan")
	}
	// A flash cookie the server did not sign is not shown.
	forged := &http.Cookie{Name: "refill_flash", Value: "eyJrIjoib2siLCJtIjoiaGkifQ.bad"}
	if page := e.do(t, http.MethodGet, path, "bob", nil, nil, forged); has(page.body, "flash") {
		t.Error("an unsigned flash message was shown")
	}

	alice := e.get(t, path, "alice")
	if !has(alice.body, "apply") || !has(alice.body, "unmet-none") {
		t.Fatalf("alice is not offered Apply on the approved plan")
	}
	r = e.post(t, path+"/apply", "alice", url.Values{"csrf": {e.csrf(t, "alice")}})
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("apply: %d\n%s", r.StatusCode, text(r.body, "flash"))
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		st := e.status(t, p.ID)
		if st == refill.StatusApplied {
			break
		}
		if st == refill.StatusFailed || time.Now().After(deadline) {
			t.Fatalf("the run ended %s", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	pr := e.get(t, path+"/progress", "alice")
	if pr.StatusCode != http.StatusOK || !strings.Contains(pr.body, `"published": 3`) || !strings.Contains(pr.body, `"status": "applied"`) {
		t.Errorf("progress: %d %s", pr.StatusCode, pr.body)
	}
	page = e.get(t, path, "alice")
	if got := text(page.body, "status"); got != "applied" {
		t.Errorf("#status = %q, want applied", got)
	}
	if !has(page.body, "progress") || !strings.Contains(page.body, "3 of 3 partitions published") {
		t.Error("the run's progress is not shown")
	}
	if !has(page.body, "report-summary") || !strings.Contains(page.body, "<th class=\"num\">After</th>") {
		t.Error("no before/after after the run")
	}
	if got := text(page.body, "written"); !strings.HasPrefix(got, "The run wrote 3 of 3 partitions") {
		t.Errorf("#written of an applied plan = %q", got)
	}
	if has(page.body, "apply") || has(page.body, "cancel") {
		t.Error("Apply or Cancel offered on an applied plan")
	}
	// The run is in the dataset's history and the audit log.
	ds := e.get(t, "/datasets/sessions", "bob")
	if ds.StatusCode != http.StatusOK || !strings.Contains(ds.body, `data-partition="`+e.sc.Day(11)+`"`) || !strings.Contains(ds.body, "partition_published") {
		t.Errorf("dataset history lacks the run: %d", ds.StatusCode)
	}
	au := e.get(t, "/audit?plan="+p.ID, "bob")
	if au.StatusCode != http.StatusOK || !strings.Contains(au.body, "approval") || !strings.Contains(au.body, "run_finished") {
		t.Errorf("audit page lacks the plan's entries: %d", au.StatusCode)
	}
}

// A manual plan shows its checklist, and only a lead is offered approval.
func TestWebManualChecklist(t *testing.T) {
	t.Parallel()
	e := webSetup(t)
	incident := planner.Request{Targets: []string{"events_raw"}, From: e.sc.BrokenFrom, To: e.sc.BrokenTo, Reason: "INC-4711"}
	blocked := e.plan(t, "alice", incident)
	page := e.get(t, "/plans/"+blocked.ID, "carol")
	if text(page.body, "status") != "blocked" || !has(page.body, "findings") || !strings.Contains(page.body, `class="finding failed"`) || has(page.body, "approve") {
		t.Errorf("blocked plan: #status %q, failed findings %v, approve offered %v", text(page.body, "status"),
			strings.Contains(page.body, `class="finding failed"`), has(page.body, "approve"))
	}
	if _, err := e.sc.Repair(e.ctx); err != nil {
		t.Fatal(err)
	}
	p := e.plan(t, "alice", incident)
	if p.Tier != refill.TierManual || p.Status != refill.StatusPending {
		t.Fatalf("plan is %s/%s, want manual/pending", p.Tier, p.Status)
	}
	path := "/plans/" + p.ID
	page = e.get(t, path, "alice")
	if !has(page.body, "checklist") || !has(page.body, "snapshot") || has(page.body, "scope") {
		t.Fatal("the checklist does not offer the snapshot first")
	}
	if r := e.post(t, path+"/snapshot", "alice", url.Values{"csrf": {e.csrf(t, "alice")}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("snapshot: %d %s", r.StatusCode, text(r.body, "flash"))
	}
	r := e.post(t, path+"/scope", "alice", url.Values{"csrf": {e.csrf(t, "alice")}})
	if r.StatusCode != http.StatusBadRequest || !strings.Contains(text(r.body, "flash"), "--note is required") {
		t.Errorf("scope without a note: %d %q, want 400 and control's message", r.StatusCode, text(r.body, "flash"))
	}
	if r := e.post(t, path+"/scope", "alice", url.Values{"csrf": {e.csrf(t, "alice")}, "note": {"the 72 broken hours"}}); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("scope: %d %s", r.StatusCode, text(r.body, "flash"))
	}
	if bob := e.get(t, path, "bob"); has(bob.body, "approve") {
		t.Error("an engineer is offered approval of a manual plan")
	}
	r = e.post(t, path+"/approve", "bob", url.Values{"csrf": {e.csrf(t, "bob")}})
	if r.StatusCode != http.StatusForbidden || !strings.Contains(text(r.body, "flash"), "only a lead may approve") {
		t.Errorf("bob's forged approval: %d %q", r.StatusCode, text(r.body, "flash"))
	}
	carol := e.get(t, path, "carol")
	if !has(carol.body, "approve") || !strings.Contains(carol.body, `id="check-1" class="done"`) || !strings.Contains(carol.body, `id="check-2" class="done"`) {
		t.Fatal("carol (a lead) is not offered approval after snapshot and scope")
	}
	if r := e.post(t, path+"/approve", "carol", url.Values{"csrf": {e.csrf(t, "carol")}}); r.StatusCode != http.StatusSeeOther || e.status(t, p.ID) != refill.StatusApproved {
		t.Errorf("carol's approval: %d, plan %s", r.StatusCode, e.status(t, p.ID))
	}
	if r := e.post(t, path+"/frobnicate", "carol", url.Values{"csrf": {e.csrf(t, "carol")}}); r.StatusCode != http.StatusNotFound {
		t.Errorf("unknown action: %d, want 404", r.StatusCode)
	}
	// Run it, then roll it back from the page: a lead is offered force.
	if err := e.ctl.Apply(e.ctx, p.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	if page := e.get(t, path, "carol"); !has(page.body, "rollback") || !strings.Contains(page.body, `name="force"`) {
		t.Error("carol is not offered the rollback with force")
	}
	if page := e.get(t, path, "bob"); !has(page.body, "rollback") || strings.Contains(page.body, `name="force"`) {
		t.Error("bob should be offered the rollback without force")
	}
	r = e.post(t, path+"/rollback", "carol", url.Values{"csrf": {e.csrf(t, "carol")}, "force": {"1"}})
	if r.StatusCode != http.StatusBadRequest || e.status(t, p.ID) != refill.StatusApplied {
		t.Errorf("forced rollback without a reason: %d, plan %s", r.StatusCode, e.status(t, p.ID))
	}
	if r := e.post(t, path+"/rollback", "bob", url.Values{"csrf": {e.csrf(t, "bob")}}); r.StatusCode != http.StatusSeeOther || e.status(t, p.ID) != refill.StatusRolledBack {
		t.Errorf("rollback: %d %q, plan %s", r.StatusCode, text(r.body, "flash"), e.status(t, p.ID))
	}
}

func TestWebListsAndFreeze(t *testing.T) {
	t.Parallel()
	e := webSetup(t)
	p := e.semiAuto(t)

	list := e.get(t, "/", "bob")
	if list.StatusCode != http.StatusOK || !strings.Contains(list.body, `data-id="`+p.ID+`"`) || has(list.body, "freeze-banner") {
		t.Fatalf("plans list: %d, plan listed %v", list.StatusCode, strings.Contains(list.body, p.ID))
	}
	if r := e.get(t, "/?status=applied", "bob"); strings.Contains(r.body, `data-id="`+p.ID+`"`) {
		t.Error("the status filter shows a pending plan among the applied")
	}
	if r := e.get(t, "/?status=pending", "bob"); !strings.Contains(r.body, `data-id="`+p.ID+`"`) {
		t.Error("the status filter hides a pending plan")
	}
	if r := e.get(t, "/?status=bogus", "bob"); r.StatusCode != http.StatusBadRequest {
		t.Errorf("unknown status: %d, want 400", r.StatusCode)
	}
	if strings.Contains(list.body, ".000") || !regexp.MustCompile(`<td class="nowrap" title="[^"]+">\d{4}-\d\d-\d\d \d\d:\d\d UTC</td>`).MatchString(list.body) {
		t.Error("the plans list does not show its times to the minute")
	}
	// Waiting for me: alice's plan waits for bob's approval, not for hers.
	if r := e.get(t, "/?waiting=me", "bob"); !strings.Contains(r.body, `data-id="`+p.ID+`"`) {
		t.Error("waiting for bob hides the plan he may approve")
	}
	if r := e.get(t, "/?waiting=me", "alice"); strings.Contains(r.body, `data-id="`+p.ID+`"`) || !strings.Contains(r.body, "waiting for you") {
		t.Error("waiting for alice shows her own plan, which waits for someone else")
	}

	ds := e.get(t, "/datasets/events_daily", "bob")
	if ds.StatusCode != http.StatusOK || !strings.Contains(ds.body, "events_daily") || !strings.Contains(ds.body, `href="/datasets/revenue_daily"`) ||
		!strings.Contains(ds.body, "aggregate") {
		t.Errorf("dataset page: %d", ds.StatusCode)
	}
	if r := e.get(t, "/datasets/events_daily/lineage.svg", "bob"); r.StatusCode != http.StatusOK || !strings.Contains(r.body, "partner_feed") {
		t.Errorf("dataset lineage: %d", r.StatusCode)
	}
	if r := e.get(t, "/datasets/nope", "bob"); r.StatusCode != http.StatusNotFound {
		t.Errorf("unknown dataset: %d, want 404", r.StatusCode)
	}

	// The audit log pages newest first.
	seqs := func(body string) []int {
		var out []int
		for _, m := range regexp.MustCompile(`data-seq="(\d+)"`).FindAllStringSubmatch(body, -1) {
			n, _ := strconv.Atoi(m[1])
			out = append(out, n)
		}
		return out
	}
	au := e.get(t, "/audit?limit=2", "bob")
	first := seqs(au.body)
	older := regexp.MustCompile(`id="older" href="/audit\?before=(\d+)`).FindStringSubmatch(au.body)
	if au.StatusCode != http.StatusOK || len(first) != 2 || first[0] <= first[1] || older == nil || older[1] != strconv.Itoa(first[1]) {
		t.Fatalf("audit page: %d, seqs %v, older %v", au.StatusCode, first, older)
	}
	second := seqs(e.get(t, "/audit?limit=2&before="+older[1], "bob").body)
	if len(second) != 2 || second[0] != first[1]-1 {
		t.Errorf("the next page %v does not continue below %v", second, first)
	}

	if _, err := e.ctl.Freeze(e.ctx, "carol", "quarter close"); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/", "/plans/" + p.ID, "/audit", "/datasets/sessions"} {
		if r := e.get(t, path, "bob"); !strings.Contains(text(r.body, "freeze-banner"), "refill is frozen") || !strings.Contains(r.body, "quarter close") {
			t.Errorf("%s: no freeze banner", path)
		}
	}
}

// A link followed from another site arrives without the SameSite=Strict
// cookie: the page reloads itself from here, which sends it.
func TestWebCrossSiteLinkBounces(t *testing.T) {
	t.Parallel()
	e := webSetup(t)
	r := e.do(t, http.MethodGet, "/plans/x", "", nil, map[string]string{"Sec-Fetch-Site": "cross-site"})
	if r.StatusCode != http.StatusOK || !strings.Contains(r.body, `<meta http-equiv="refresh" content="0">`) || !has(r.body, "continue") {
		t.Errorf("cross-site link: %d\n%s", r.StatusCode, r.body)
	}
}

func TestWebStatic(t *testing.T) {
	t.Parallel()
	e := webSetup(t)
	for _, path := range []string{"/static/style.css", "/static/refresh.js"} {
		if r := e.get(t, path, ""); r.StatusCode != http.StatusOK || len(r.body) < 100 {
			t.Errorf("%s: %d", path, r.StatusCode)
		}
	}
}

// TestWebNewPlan plans from the browser as the CLI would: the plan is the
// signed-in user's request; bad input shows the form again with what was
// typed and changes nothing; a blocked plan is stored and shown.
func TestWebNewPlan(t *testing.T) {
	t.Parallel()
	e := webSetup(t)
	csrf := e.csrf(t, "alice")
	r := e.post(t, "/plans", "alice", url.Values{"csrf": {csrf}, "targets": {"sessions"},
		"from": {e.sc.Day(12)}, "to": {e.sc.Day(10)}, "reason": {"late sessions"}})
	if r.StatusCode != http.StatusSeeOther || !strings.HasPrefix(r.Header.Get("Location"), "/plans/") {
		t.Fatalf("new plan: %d to %q\n%s", r.StatusCode, r.Header.Get("Location"), r.body)
	}
	id := strings.TrimPrefix(r.Header.Get("Location"), "/plans/")
	st, err := e.ctl.Load(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Plan.Request.RequestedBy != "alice" || st.Plan.Request.Reason != "late sessions" || st.Plan.Status != refill.StatusPending {
		t.Errorf("planned %+v, %s", st.Plan.Request, st.Plan.Status)
	}
	before, err := e.ctl.Store.Plans(e.ctx, refill.PlanFilter{})
	if err != nil {
		t.Fatal(err)
	}
	r = e.post(t, "/plans", "alice", url.Values{"csrf": {csrf}, "targets": {"sessions"},
		"from": {"2026-13-40"}, "to": {e.sc.Day(10)}, "reason": {"typo"}})
	if r.StatusCode != http.StatusBadRequest || !strings.Contains(text(r.body, "flash"), "2026-13-40") || !strings.Contains(r.body, `value="typo"`) {
		t.Errorf("bad dates: %d, flash %q", r.StatusCode, text(r.body, "flash"))
	}
	r = e.post(t, "/plans", "alice", url.Values{"targets": {"sessions"}, "from": {e.sc.Day(12)}, "to": {e.sc.Day(10)}, "reason": {"no csrf"}})
	if r.StatusCode != http.StatusForbidden {
		t.Errorf("new plan without CSRF: %d", r.StatusCode)
	}
	after, err := e.ctl.Store.Plans(e.ctx, refill.PlanFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("refused requests made plans: %d -> %d", len(before), len(after))
	}
	r = e.post(t, "/plans", "alice", url.Values{"csrf": {csrf}, "targets": {"events_raw"},
		"from": {e.sc.BrokenFrom}, "to": {e.sc.BrokenTo}, "reason": {"the incident"}})
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("blocked plan: %d", r.StatusCode)
	}
	page := e.do(t, http.MethodGet, r.Header.Get("Location"), "alice", nil, nil, r.cookie("refill_flash"))
	if text(page.body, "status") != "blocked" || !strings.Contains(page.body, "source gate blocked") {
		t.Errorf("blocked plan page: status %q", text(page.body, "status"))
	}
}

// TestWebNewPlanSelectors: the form takes selectors as the CLI does — typed
// selectors beside the picked datasets, what to leave out, nothing
// downstream — and the plan page names what the plan leaves out; a bad
// selector shows the form again, naming the nearest datasets.
func TestWebNewPlanSelectors(t *testing.T) {
	t.Parallel()
	e := webSetup(t)
	csrf := e.csrf(t, "alice")
	r := e.post(t, "/plans", "alice", url.Values{"csrf": {csrf}, "select": {"+revenue_daily"}, "no_downstream": {"1"},
		"from": {e.sc.Day(12)}, "to": {e.sc.Day(11)}, "reason": {"only revenue"}})
	if r.StatusCode != http.StatusSeeOther {
		t.Fatalf("new plan: %d\n%s", r.StatusCode, r.body)
	}
	id := strings.TrimPrefix(r.Header.Get("Location"), "/plans/")
	st, err := e.ctl.Load(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Plan.Datasets(); !slices.Equal(got, []string{"events_daily", "revenue_daily"}) || !st.Plan.Request.NoDownstream {
		t.Errorf("planned %v (no_downstream %v), want events_daily and revenue_daily alone", got, st.Plan.Request.NoDownstream)
	}
	page := e.get(t, "/plans/"+id, "bob")
	card := page.body[max(0, strings.Index(page.body, `id="left-out"`)):]
	card = card[:max(0, strings.Index(card, "</section>"))]
	if got := card; !strings.Contains(got, "partner_feed reads events_daily, which this plan rewrites, and is not rebuilt") {
		t.Errorf("the plan page's left-out card: %q", got)
	}
	if got := text(page.body, "selection"); got != "+revenue_daily --no-downstream" {
		t.Errorf("the plan page's selection: %q", got)
	}
	r = e.post(t, "/plans", "alice", url.Values{"csrf": {csrf}, "targets": {"sessions"}, "exclude": {"tag:nope"},
		"from": {e.sc.Day(12)}, "to": {e.sc.Day(11)}, "reason": {"typo"}})
	if r.StatusCode != http.StatusBadRequest || !strings.Contains(text(r.body, "flash"), "no dataset is tagged nope") || !strings.Contains(r.body, `value="tag:nope"`) {
		t.Errorf("bad selector: %d, flash %q", r.StatusCode, text(r.body, "flash"))
	}
}

// TestWebDatasetShowsAcceptances: the dataset page lists findings accepted
// as real data, with who, why and what they are bound to.
func TestWebDatasetShowsAcceptances(t *testing.T) {
	t.Parallel()
	e := webSetup(t)
	if r := e.get(t, "/datasets/events_raw", "bob"); r.StatusCode != http.StatusOK || has(r.body, "accepted") {
		t.Fatalf("dataset page before any acceptance: HTTP %d, accepted section %v", r.StatusCode, has(r.body, "accepted"))
	}
	day := e.sc.Day(demo.RemappedAgo)
	if _, err := e.ctl.Accept(e.ctx, control.AcceptRequest{Dataset: "events_raw", Partition: day, Check: "drift", Column: "event_type",
		Reason: "the upstream <really> stopped sending types"}, "alice"); err != nil {
		t.Fatal(err)
	}
	r := e.get(t, "/datasets/events_raw", "bob")
	got := r.body[max(0, strings.Index(r.body, `id="accepted"`)):]
	got = got[:max(0, strings.Index(got, "</section>"))]
	for _, want := range []string{day, "drift", "event_type", "alice", "the upstream &lt;really&gt; stopped sending types", "distinct=1 "} {
		if !strings.Contains(got, want) {
			t.Errorf("accepted section lacks %q:\n%s", want, got)
		}
	}
}

// TestWebShowsWhoRunsThePlan: a running plan's page says who holds its
// run and when the lease expires, and never that a lease "lapsed" at a
// time still to come: a holder killed a moment ago is gone, its lease
// still running, and the page offers to resume the run. A run alive in
// another process is not offered.
func TestWebShowsWhoRunsThePlan(t *testing.T) {
	t.Parallel()
	e := webSetup(t)
	p := e.semiAuto(t)
	path := "/plans/" + p.ID
	if _, err := e.ctl.Approve(e.ctx, p.ID, "bob", ""); err != nil {
		t.Fatal(err)
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	st := e.ctl.Store
	hold := func(holder string, from refill.Status) {
		t.Helper()
		err := st.Update(e.ctx, func(tx *store.Tx) error {
			if err := tx.TakeLease(e.ctx, p.ID, holder, time.Now().Add(10*time.Minute), func(store.Lease) bool { return false }); err != nil {
				return err
			}
			if from != refill.StatusRunning {
				return tx.SetStatus(e.ctx, p.ID, from, refill.StatusRunning)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	hold(host+":2147483646", refill.StatusApproved) // a process that no longer exists
	page := e.get(t, path, "alice")
	got := text(page.body, "run-holder")
	if !strings.Contains(got, "is no longer running on its host, though its lease expires only at") || strings.Contains(got, "lapsed") {
		t.Errorf("#run-holder of a killed holder's run = %q", got)
	}
	if !has(page.body, "apply") || !strings.Contains(page.body, "Resume the run") {
		t.Error("a run nobody runs is not offered to be resumed")
	}

	hold("other-host:1", refill.StatusRunning)
	page = e.get(t, path, "alice")
	if got := text(page.body, "run-holder"); !strings.HasPrefix(got, "Held by other-host:1; its lease expires at ") {
		t.Errorf("#run-holder of a live run = %q", got)
	}
	if has(page.body, "apply") {
		t.Error("apply offered on a run alive in another process")
	}
}

// TestSignedPictureLink: a plan's lineage PNG answers a signed, unexpired
// link without a session (Slack fetches it for a webhook's message), and
// nothing else: another plan's signature, a longer expiry, an expired link.
func TestSignedPictureLink(t *testing.T) {
	t.Parallel()
	e := webSetup(t)
	p := e.semiAuto(t)
	other := e.plan(t, "alice", planner.Request{Targets: []string{"sessions"}, From: e.sc.Day(20), To: e.sc.Day(19), Reason: "another"})
	seal, err := e.ctl.Store.SealKey(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	key := lineage.PictureLinkKey(seal)
	fetch := func(link string) (int, []byte) {
		t.Helper()
		res, err := http.Get(link)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}
	link := lineage.PictureLink(key, e.ts.URL, p.ID, time.Now().Add(time.Hour))
	if code, b := fetch(link); code != http.StatusOK || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("a signed link: %d %.40q", code, b)
	}
	u, _ := url.Parse(link)
	q := u.Query()
	for name, bad := range map[string]string{
		"another plan's signature": e.ts.URL + "/pictures/plans/" + other.ID + "/lineage.png?" + q.Encode(),
		"a longer expiry":          e.ts.URL + "/pictures/plans/" + p.ID + "/lineage.png?expires=9999999999&sig=" + q.Get("sig"),
		"expired":                  lineage.PictureLink(key, e.ts.URL, p.ID, time.Now().Add(-time.Second)),
		"no signature":             e.ts.URL + "/pictures/plans/" + p.ID + "/lineage.png",
	} {
		if code, _ := fetch(bad); code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, code)
		}
	}
}
