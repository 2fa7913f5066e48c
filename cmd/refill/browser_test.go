package main

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// screenshotTo, when set, makes TestBrowser save a full-page PNG of a demo
// plan page there: go test ./cmd/refill -run TestBrowser -screenshot docs/plan-page.png
// (a relative path is from the repository's root). REFILL_SCREENSHOT does
// the same.
var screenshotTo = flag.String("screenshot", "", "save a full-page PNG of a demo plan page to this path (TestBrowser)")

// chromium is the browser the test drives: Debian's chromium, or another
// Chromium or Chrome on PATH. With CI set a missing browser fails the test
// (.ci/run installs it); elsewhere the test is skipped.
func chromium(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no Chromium: the browser test needs /usr/bin/chromium (apt-get install chromium); CI must have it")
	}
	t.Skip("no Chromium (/usr/bin/chromium or chromium on PATH): skipping the browser test; apt-get install chromium to run it")
	return ""
}

// browser starts a headless Chromium for the test, with its home, profile,
// config and cache in the test's temp dir, and returns the context of its
// one tab. As root, chromedp adds --no-sandbox itself.
func browser(t *testing.T, exe string) context.Context {
	t.Helper()
	home := t.TempDir()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(filepath.Join(home, "profile")),
		chromedp.Env("HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "XDG_CACHE_HOME="+filepath.Join(home, ".cache")),
		chromedp.WindowSize(1280, 900),
	)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		acancel() // waits for the browser to exit, before the temp dirs go
	})
	// The first Do starts the browser and binds its life to the context it
	// gets, so it gets ctx itself and not a context with a deadline.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	return ctx
}

// tab is the test's handle on the browser tab: each step has its own
// deadline and fails the test with what it was doing.
type tab struct {
	t   *testing.T
	ctx context.Context
	url string

	mu         sync.Mutex
	exceptions []string // uncaught JavaScript exceptions of the pages
}

// open starts the browser and listens for the pages' uncaught exceptions.
func open(t *testing.T, exe, url string) *tab {
	b := &tab{t: t, ctx: browser(t, exe), url: url}
	console := chromedp.Console(b.ctx)
	go func() {
		for m, err := range console {
			if err != nil {
				return
			}
			if m.IsException() {
				b.mu.Lock()
				b.exceptions = append(b.exceptions, m.String())
				b.mu.Unlock()
			}
		}
	}()
	return b
}

func (b *tab) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// submit clicks a form's button and waits for the page it leads to (after
// any redirect) to load, returning that page's HTTP status.
func (b *tab) submit(what, button string) int64 {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	r, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(button)))
	if err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	return r.Status
}

func get[T any](b *tab, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	return v
}

func (b *tab) text(sel string) string {
	b.t.Helper()
	return strings.TrimSpace(get(b, "text of "+sel, chromedp.Text(chromedp.CSS(sel))))
}

func (b *tab) present(sel string) bool {
	b.t.Helper()
	return get(b, "looking for "+sel, chromedp.Evaluate[bool](`document.querySelector(`+jsString(sel)+`) !== null`))
}

func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// signin signs in through the form, as a person would: paste the token,
// press the button, land on next.
func (b *tab) signin(tok, user, next string) {
	b.t.Helper()
	b.do("sign in as "+user,
		chromedp.Navigate(b.url+"/signin?next="+next),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), tok),
	)
	if st := b.submit("sign in as "+user, "#signin button[type=submit]"); st != 200 {
		b.t.Fatalf("sign in as %s: HTTP %d", user, st)
	}
	if got := b.text("#user"); got != user {
		b.t.Fatalf("signed in as %q, want %q", got, user)
	}
}

func (b *tab) signout() {
	b.t.Helper()
	b.submit("sign out", "#signout button")
	if !b.present("form#signin") {
		b.t.Fatal("signing out does not lead to the sign-in form")
	}
}

// lineageLoaded waits until the plan page's lineage picture has loaded and
// returns its natural width (0: it did not load, a broken image).
func (b *tab) lineageLoaded() int {
	b.t.Helper()
	return get(b, "the lineage picture", chromedp.Poll[int](
		`(() => { const i = document.getElementById('lineage'); return i && i.complete && (i.naturalWidth || -1); })()`,
		chromedp.WithPollingTimeout(20*time.Second)))
}

// follow waits until the plan page shows status want, as a person
// watching it would: while the page follows a run itself (refresh.js) it is
// left alone; a page that shows a settled status other than want is
// reloaded, every half second, until within ends. It returns the number
// of reloads it needed.
func (b *tab) follow(want string, within time.Duration) int {
	b.t.Helper()
	deadline := time.Now().Add(within)
	reloads := 0
	for {
		st := get(b, "the page's status", chromedp.Evaluate[string](`(() => {
			const s = document.getElementById('status'), p = document.getElementById('progress');
			if (!s) return '';
			return s.textContent.trim() + (p && p.dataset.running === 'true' ? ' (following)' : '');
		})()`))
		if st == want {
			return reloads
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("the page's status did not become %s within %s: it shows %q", want, within, st)
		}
		if strings.HasSuffix(st, "(following)") {
			// refresh.js polls every 2 s and reloads the page when the
			// run ends.
			ctx, cancel := context.WithTimeout(b.ctx, 3*time.Second)
			_ = chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("#status.status-"+want)))
			cancel()
			continue
		}
		time.Sleep(500 * time.Millisecond)
		reloads++
		b.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("status")))
	}
}

// TestBrowser drives the web UI in a real headless Chromium: sign-in with a
// token, the plan page and its lineage picture, four-eyes (the requester
// has no Approve button, and a forged approve form is refused), approval
// and a run the page shows to its end, and a manual plan an engineer may
// not approve. No page throws a JavaScript exception.
func TestBrowser(t *testing.T) {
	t.Parallel()
	exe := chromium(t)
	d := setup(t)
	alice, bob := token(t, d, "alice"), token(t, d, "bob")
	p := decode[planJSON](t, step(t, d, 0, "", "plan", "sessions", "--from", "2026-11-10", "--to", "2026-11-23",
		"--reason", "sessionization fix, two weeks", "--as", "alice", "-o", "json").stdout)
	if p.Tier != "semi-auto" || p.Status != "pending" {
		t.Fatalf("plan: %s %s, want a pending semi-auto plan (%q)", p.Tier, p.Status, p.Reasons)
	}
	s := serve(t, d)
	b := open(t, exe, s.url)
	page := "/plans/" + p.ID

	// 1. alice, who asked, signs in and sees her plan, its lineage, and no
	// Approve button.
	b.signin(alice, "alice", page)
	b.do("the plan page", chromedp.WaitVisible(chromedp.ID("requirements")))
	if loc := get(b, "location", chromedp.Location()); loc != s.url+page {
		t.Errorf("after sign-in the browser is at %s, want %s", loc, s.url+page)
	}
	if st, tier := b.text("#status"), b.text("#tier"); st != "pending" || tier != "semi-auto" {
		t.Errorf("status %q tier %q, want pending semi-auto", st, tier)
	}
	if got := b.text("#requester"); !strings.HasPrefix(got, "alice,") {
		t.Errorf("requested by %q", got)
	}
	if w := b.lineageLoaded(); w <= 0 {
		t.Errorf("the lineage picture did not load (naturalWidth %d)", w)
	}
	svg := get(b, "fetching the lineage picture", chromedp.Evaluate[string](
		`fetch('/plans/`+p.ID+`/lineage.svg').then(r => r.text().then(body => r.headers.get('Content-Type') + '\n' + body))`,
		chromedp.EvalAwaitPromise))
	if !strings.HasPrefix(svg, "image/svg+xml") || !strings.Contains(svg, "<svg") || !strings.Contains(svg, "sessions") || !strings.Contains(svg, "events_raw") {
		t.Errorf("lineage.svg is not an SVG of sessions and its source:\n%.400s", svg)
	}
	// What changes leads the evidence: the sessions step, diffed in the
	// rehearsal, above the request and the decision.
	if got := b.text("#changes"); !strings.Contains(got, "sessions") || !strings.Contains(got, "14 partitions compared") {
		t.Errorf("the changes card says %q, want sessions with its 14 partitions compared", got)
	}
	if order := get(b, "card order", chromedp.Evaluate[bool](`!!(document.querySelector("#changes").compareDocumentPosition(document.querySelector("#requirements")) & Node.DOCUMENT_POSITION_FOLLOWING)`)); !order {
		t.Error("the changes card does not come before the decision")
	}
	if rows := get(b, "partition rows", chromedp.Evaluate[int](`document.querySelectorAll('table.partitions[data-dataset="sessions"] tr.partition').length`)); rows != 14 {
		t.Errorf("%d partition rows for sessions, want 14", rows)
	}
	if b.present("form#approve") {
		t.Error("alice, who asked for the plan, is offered an Approve button")
	}
	if !b.present("form#cancel") {
		t.Error("alice, who asked for the plan, is not offered to cancel it")
	}

	// She forges the approve form anyway, with her own valid CSRF token
	// (taken from the cancel form): control refuses, the page says why.
	b.do("forge an approve form",
		chromedp.Evaluate[chromedp.Void](`(() => {
			const f = document.createElement('form');
			f.id = 'forged'; f.method = 'post'; f.action = '/plans/`+p.ID+`/approve';
			const c = document.createElement('input');
			c.type = 'hidden'; c.name = 'csrf'; c.value = document.querySelector('form#cancel input[name=csrf]').value;
			const btn = document.createElement('button');
			btn.type = 'submit'; btn.textContent = 'Approve my own plan';
			f.append(c, btn);
			document.querySelector('main').prepend(f);
		})()`),
	)
	if st := b.submit("the forged approve form", "#forged button"); st != 403 {
		t.Errorf("the forged self-approval answered %d, want 403", st)
	}
	if msg := b.text("#flash"); !strings.Contains(msg, "nobody approves their own request") {
		t.Errorf("flash after self-approval: %q", msg)
	}
	if st := b.text("#status"); st != "pending" {
		t.Errorf("after the refused self-approval the page shows %q", st)
	}
	if got := decode[planJSON](t, step(t, d, 0, "", "show", p.ID, "-o", "json").stdout); got.Status != "pending" {
		t.Fatalf("after alice's forged approval the plan is %s", got.Status)
	}

	// 2. bob approves it with the button, then applies it; the page follows
	// the run until it is applied.
	b.signout()
	b.signin(bob, "bob", page)
	b.do("bob's Approve button", chromedp.WaitVisible(chromedp.CSS("form#approve button[type=submit]")))
	b.do("a note", chromedp.SendKeys(chromedp.ID("approve-note"), "range checked"))
	b.submit("approve", "form#approve button[type=submit]")
	if st := b.text("#status"); st != "approved" {
		t.Errorf("after approval the page shows %q", st)
	}
	if msg := b.text("#flash"); msg != "You approved the plan." {
		t.Errorf("flash after approval: %q", msg)
	}
	if b.present("form#approve") {
		t.Error("an Approve button on an approved plan")
	}
	if got := b.text("#approvals"); !strings.Contains(got, "bob") || !strings.Contains(got, "range checked") {
		t.Errorf("decisions: %q", got)
	}
	b.submit("apply", "form#apply button[type=submit]")
	if msg := b.text("#flash"); msg != "The run started." {
		t.Errorf("flash after apply: %q", msg)
	}
	after := b.text("#status")
	if n := b.follow("applied", 90*time.Second); n > 0 {
		t.Errorf("after Apply the page showed %q and did not follow the run: %d reload(s) to see it applied", after, n)
	}
	if got := b.text("#report-summary"); !strings.HasPrefix(got, "14 of 14 partitions published; none differs from the plan's expectation by more than 10%, nor from what the dry run foresaw") {
		t.Errorf("run summary: %q", got)
	}
	if got := decode[planJSON](t, step(t, d, 0, "", "show", p.ID, "-o", "json").stdout); got.Status != "applied" {
		t.Errorf("after the run the plan is %s", got.Status)
	}

	// 3. A manual plan: bob, an engineer, may not approve it (a lead
	// does, after the snapshot and the scope).
	m := decode[planJSON](t, step(t, d, 0, "", "plan", "events_raw", "--from", "2026-11-21", "--to", "2026-11-23",
		"--reason", "recheck the incident's hours", "--as", "alice", "-o", "json").stdout)
	if m.Tier != "manual" || m.Status != "pending" {
		t.Fatalf("plan: %s %s, want a pending manual plan", m.Tier, m.Status)
	}
	b.do("the manual plan's page",
		chromedp.Navigate(s.url+"/plans/"+m.ID),
		chromedp.WaitVisible(chromedp.ID("checklist")),
	)
	if tier := b.text("#tier"); tier != "manual" {
		t.Errorf("tier %q", tier)
	}
	if b.present("form#approve") || b.present("form#reject") {
		t.Error("bob, an engineer, is offered to decide a manual plan")
	}
	if w := b.lineageLoaded(); w <= 0 {
		t.Errorf("the manual plan's lineage picture did not load (naturalWidth %d)", w)
	}

	if path := screenshotPath(); path != "" {
		shoot(t, b, d, path)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.exceptions {
		t.Errorf("a page threw: %s", e)
	}
}

func screenshotPath() string {
	p := *screenshotTo
	if p == "" {
		p = os.Getenv("REFILL_SCREENSHOT")
	}
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	// go test runs in cmd/refill; a relative path is from the repository.
	return filepath.Join("..", "..", p)
}

// shoot saves a full-page screenshot of a plan page of the demo: the redo,
// the manual plan that was applied and signed off, with its checklist,
// lineage, gate findings, steps with before and after counts, and
// decisions.
func shoot(t *testing.T, b *tab, dir, path string) {
	t.Helper()
	var redo string
	for _, p := range decode[[]planJSON](t, step(t, dir, 0, "", "plans", "--status", "applied", "-o", "json").stdout) {
		if p.Tier == "manual" {
			redo = p.ID // newest first: the redo
			break
		}
	}
	if redo == "" {
		t.Fatal("the demo has no applied manual plan to show")
	}
	b.do("the redo's page",
		chromedp.Navigate(b.url+"/plans/"+redo),
		chromedp.WaitVisible(chromedp.ID("steps")),
	)
	if w := b.lineageLoaded(); w <= 0 {
		t.Fatalf("the redo's lineage picture did not load")
	}
	png := get(b, "screenshot", chromedp.FullScreenshot(100))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("saved a screenshot of plan %s to %s (%d bytes)", redo, path, len(png))
}
