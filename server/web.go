package server

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
)

// The web UI is server-rendered HTML over the same control the API and the
// CLI use: every page reads through it and every button calls it as the
// signed-in user, so a button the page did not show (a forged POST) is
// refused by the same rule that hid it. Templates, CSS and the one small
// script are embedded; nothing is fetched from elsewhere.
//
//go:embed templates static
var webFiles embed.FS

// Cookies of the web UI.
const (
	// sessionCookie holds the API token the user signed in with. Every
	// request authenticates it again (control.Authenticate), so revoking
	// the token or removing its user ends the session at once.
	sessionCookie = "refill_session"
	// signinCookie holds a nonce for the sign-in form's CSRF token, since
	// there is no session yet to bind it to.
	signinCookie = "refill_signin"
	// flashCookie carries a signed one-time message across the redirect
	// after a successful action.
	flashCookie = "refill_flash"
)

// contentSecurity is the policy of every web response: nothing from
// elsewhere, no inline script or style, never framed.
const contentSecurity = "default-src 'self'; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"

// webUI is the web front door of one server.
type webUI struct {
	s *Server
	// secret keys the CSRF tokens and flash messages. It lives in the
	// state store, so every replica (and a restarted one) accepts the
	// forms another made; a token still needs the session it is bound to.
	secret []byte
	pages  map[string]*template.Template
	// origins refuses cross-origin browser POSTs by Sec-Fetch-Site or
	// Origin, before any CSRF token is looked at.
	origins *http.CrossOriginProtection
	// secureCookies is set when server.public_url is https: the cookies
	// then say Secure even behind a proxy that ends TLS.
	secureCookies bool
}

// web registers the web UI's routes.
func (s *Server) web() {
	ui, err := newWebUI(s)
	if err != nil {
		// The templates are embedded: this is a build defect, and the
		// server's tests catch it.
		panic(err)
	}
	m := s.mux
	m.Handle("GET /static/", ui.static())
	// A plan's lineage PNG by a signed, expiring link, without a session:
	// what Slack fetches for a message sent through an incoming webhook.
	m.HandleFunc("GET /pictures/plans/{id}/lineage.png", ui.signedPicture)
	m.HandleFunc("GET /signin", ui.signinForm)
	m.HandleFunc("POST /signin", ui.signin)
	m.HandleFunc("POST /signout", ui.action(ui.signout))
	m.HandleFunc("GET /{$}", ui.page(ui.plans))
	m.HandleFunc("GET /plans/{id}", ui.page(ui.plan))
	m.HandleFunc("GET /plans/{id}/lineage.svg", ui.asset(ui.planLineage))
	m.HandleFunc("GET /plans/{id}/progress", ui.asset(ui.planProgress))
	m.HandleFunc("POST /plans/{id}/{action}", ui.action(ui.decide))
	m.HandleFunc("POST /plans", ui.action(ui.newPlan))
	m.HandleFunc("GET /datasets/{name}", ui.page(ui.dataset))
	m.HandleFunc("GET /datasets/{name}/lineage.svg", ui.asset(ui.datasetLineage))
	m.HandleFunc("GET /audit", ui.page(ui.audit))
}

func newWebUI(s *Server) (*webUI, error) {
	ui := &webUI{s: s, pages: map[string]*template.Template{}, origins: http.NewCrossOriginProtection()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	if ui.secret, err = s.Store.WebSecret(ctx); err != nil {
		// Forms then work on this process only, until it restarts.
		s.Log.Warn("web: no shared secret from the state store; using one of this process's own", slog.String("error", err.Error()))
		ui.secret = make([]byte, 32)
		if _, err := rand.Read(ui.secret); err != nil {
			return nil, fmt.Errorf("web: secret: %w", err)
		}
	}
	if pub := s.conf().Server.PublicURL; pub != "" {
		if u, err := url.Parse(pub); err == nil && u.Scheme != "" && u.Host != "" {
			if err := ui.origins.AddTrustedOrigin(u.Scheme + "://" + u.Host); err != nil {
				s.Log.Warn("web: server.public_url is not a usable origin", slog.String("public_url", pub), slog.String("error", err.Error()))
			}
			ui.secureCookies = u.Scheme == "https"
		}
	}
	layout, err := template.New("layout.html").Funcs(webFuncs).ParseFS(webFiles, "templates/layout.html")
	if err != nil {
		return nil, err
	}
	pages, err := fs.Glob(webFiles, "templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, p := range pages {
		name := strings.TrimSuffix(strings.TrimPrefix(p, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.Must(layout.Clone()).ParseFS(webFiles, p)
		if err != nil {
			return nil, err
		}
		ui.pages[name] = t
	}
	return ui, nil
}

func (ui *webUI) static() http.Handler {
	sub, _ := fs.Sub(webFiles, "static")
	files := http.StripPrefix("/static/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secureHeaders(w.Header())
		w.Header().Set("Cache-Control", "public, max-age=300")
		files.ServeHTTP(w, r)
	})
}

func secureHeaders(h http.Header) {
	h.Set("Content-Security-Policy", contentSecurity)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
}

// view is what every page's template gets: who is signed in, the CSRF
// token for its forms, the freeze banner, a flash message, and the page's
// own data.
type view struct {
	Title  string
	Nav    string
	User   string
	CSRF   string
	Freeze *refill.Freeze
	Flash  *flash
	// Refresh asks a browser without JavaScript to reload the page now
	// and then (a run in progress).
	Refresh bool
	// Bounce reloads the page at once (see signinFirst).
	Bounce bool
	Data   any
}

// flash is a one-time message shown above a page.
type flash struct {
	Kind string `json:"k"` // "ok" or "error"
	Msg  string `json:"m"`
}

// Sessions.

var errNoSession = errors.New("not signed in")

// session returns the signed-in user and their token, from the session
// cookie. A missing cookie is errNoSession; a token control no longer
// accepts is not permitted.
func (ui *webUI) session(r *http.Request) (user, token string, err error) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return "", "", errNoSession
	}
	user, err = ui.s.ctl().Authenticate(r.Context(), c.Value)
	if err != nil {
		return "", "", err
	}
	return user, c.Value, nil
}

func (ui *webUI) cookie(r *http.Request, name, value, path string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: path, MaxAge: maxAge, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || ui.secureCookies}
}

// page wraps a page handler: security headers, the session (a visitor who
// is not signed in is sent to /signin and back), and the page's view.
func (ui *webUI) page(fn func(http.ResponseWriter, *http.Request, *view)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		secureHeaders(w.Header())
		w.Header().Set("Cache-Control", "no-store")
		user, token, err := ui.session(r)
		if err != nil {
			ui.signinFirst(w, r, err)
			return
		}
		r = r.WithContext(withUser(r.Context(), user))
		v, err := ui.view(w, r, user, token)
		if err != nil {
			ui.fail(w, r, v, err)
			return
		}
		fn(w, r, v)
	}
}

// signinFirst answers a page request without a valid session.
func (ui *webUI) signinFirst(w http.ResponseWriter, r *http.Request, err error) {
	if !errors.Is(err, errNoSession) && refill.ExitCode(err) != refill.ExitNotPermitted {
		ui.fail(w, r, &view{Title: "Error"}, err)
		return
	}
	if _, e := r.Cookie(sessionCookie); e != nil && r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		// A link followed from another site (a Slack message) arrives
		// without the SameSite=Strict cookie even when the user is signed
		// in. Loading the page again from here sends it.
		ui.render(w, r, http.StatusOK, "bounce", &view{Title: "refill", Bounce: true, Data: r.URL.RequestURI()})
		return
	}
	to := "/signin?next=" + url.QueryEscape(r.URL.RequestURI())
	if !errors.Is(err, errNoSession) {
		// The cookie's token stopped working: expired, revoked, or its
		// user was removed from users:.
		http.SetCookie(w, ui.cookie(r, sessionCookie, "", "/", -1))
		to += "&ended=1"
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// view builds a signed-in page's view: the CSRF token, the freeze in
// force, and the flash message left by the last action (then cleared).
func (ui *webUI) view(w http.ResponseWriter, r *http.Request, user, token string) (*view, error) {
	v := &view{User: user, CSRF: ui.sessionCSRF(token)}
	f, err := ui.s.ctl().Frozen(r.Context())
	if err != nil {
		return v, err
	}
	v.Freeze = f
	if c, err := r.Cookie(flashCookie); err == nil {
		http.SetCookie(w, ui.cookie(r, flashCookie, "", "/", -1))
		v.Flash = ui.readFlash(c.Value)
	}
	return v, nil
}

// asset wraps a signed-in resource that is not a page (a picture, the
// progress JSON): without a session it answers 401 rather than a redirect.
func (ui *webUI) asset(fn func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		secureHeaders(w.Header())
		user, _, err := ui.session(r)
		if err != nil {
			if errors.Is(err, errNoSession) || refill.ExitCode(err) == refill.ExitNotPermitted {
				http.Error(w, "sign in first: /signin", http.StatusUnauthorized)
				return
			}
			ui.s.writeError(w, r, err)
			return
		}
		fn(w, r.WithContext(withUser(r.Context(), user)), user)
	}
}

// action wraps a form POST. In order: a cross-origin browser request is
// refused (Sec-Fetch-Site, Origin); the form is read (bounded); the session
// must be valid; and the form's CSRF token must be the session's. Any
// failure answers 403 (401 without a session) and changes nothing.
func (ui *webUI) action(fn func(http.ResponseWriter, *http.Request, *view)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !ui.readForm(w, r) {
			return
		}
		user, token, err := ui.session(r)
		if err != nil {
			if errors.Is(err, errNoSession) || refill.ExitCode(err) == refill.ExitNotPermitted {
				ui.refuse(w, r, http.StatusUnauthorized, "You are not signed in (or your token stopped working), so nothing was done. Sign in and try again.")
				return
			}
			ui.fail(w, r, &view{Title: "Error"}, err)
			return
		}
		if !ui.validCSRF(r.PostForm.Get("csrf"), ui.sessionCSRF(token)) {
			ui.refuse(w, r, http.StatusForbidden, "The form's security token is missing or not yours (it may be from before a server restart), so nothing was done. Reload the page and try again.")
			return
		}
		r = r.WithContext(withUser(r.Context(), user))
		v, err := ui.view(w, r, user, token)
		if err != nil {
			ui.fail(w, r, v, err)
			return
		}
		fn(w, r, v)
	}
}

// CSRF tokens and signed cookies.

// mac is the HMAC-SHA256 under the server's secret of purpose and subject.
func (ui *webUI) mac(purpose, subject string) string {
	m := hmac.New(sha256.New, ui.secret)
	m.Write([]byte(purpose))
	m.Write([]byte{0})
	m.Write([]byte(subject))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// sessionCSRF is a session's CSRF token: keyed by the server's secret over
// the hash of the session's token (the token itself never goes into a
// page). It is the same for every form of the session.
func (ui *webUI) sessionCSRF(token string) string {
	return ui.mac("csrf", control.HashToken(token))
}

func (ui *webUI) validCSRF(got, want string) bool {
	return got != "" && hmac.Equal([]byte(got), []byte(want))
}

func (ui *webUI) setFlash(w http.ResponseWriter, r *http.Request, f flash) {
	b, _ := json.Marshal(f)
	v := base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(w, ui.cookie(r, flashCookie, v+"."+ui.mac("flash", v), "/", 60))
}

// readFlash returns the message of a flash cookie this server signed, or
// nil: a message planted by someone else is not shown.
func (ui *webUI) readFlash(c string) *flash {
	v, sig, ok := strings.Cut(c, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(ui.mac("flash", v))) {
		return nil
	}
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return nil
	}
	var f flash
	if json.Unmarshal(b, &f) != nil {
		return nil
	}
	return &f
}

// Sign-in.

type signinData struct {
	Next  string
	Error string
	Ended bool
}

func (ui *webUI) signinForm(w http.ResponseWriter, r *http.Request) {
	secureHeaders(w.Header())
	w.Header().Set("Cache-Control", "no-store")
	next := localPath(r.URL.Query().Get("next"))
	if _, _, err := ui.session(r); err == nil {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	ui.renderSignin(w, r, http.StatusOK, signinData{Next: next, Ended: r.URL.Query().Get("ended") == "1"})
}

// renderSignin shows the sign-in form with a fresh nonce: the form's CSRF
// token is bound to it, since there is no session yet.
func (ui *webUI) renderSignin(w http.ResponseWriter, r *http.Request, status int, d signinData) {
	var n [16]byte
	_, _ = rand.Read(n[:])
	nonce := base64.RawURLEncoding.EncodeToString(n[:])
	http.SetCookie(w, ui.cookie(r, signinCookie, nonce, "/signin", 3600))
	ui.render(w, r, status, "signin", &view{Title: "Sign in", CSRF: ui.mac("signin", nonce), Data: d})
}

// readForm starts every form POST: no caching, a cross-origin form
// refused (Sec-Fetch-Site, Origin), the body read within MaxBody. It
// answers the refusal itself and returns false.
func (ui *webUI) readForm(w http.ResponseWriter, r *http.Request) bool {
	secureHeaders(w.Header())
	w.Header().Set("Cache-Control", "no-store")
	if err := ui.origins.Check(r); err != nil {
		ui.refuse(w, r, http.StatusForbidden, "This form was sent from another site, so it was refused. Open refill directly and try again.")
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
	if err := r.ParseForm(); err != nil {
		ui.refuse(w, r, http.StatusBadRequest, "The form could not be read: "+err.Error())
		return false
	}
	return true
}

func (ui *webUI) signin(w http.ResponseWriter, r *http.Request) {
	if !ui.readForm(w, r) {
		return
	}
	next := localPath(r.PostForm.Get("next"))
	c, err := r.Cookie(signinCookie)
	if err != nil || !ui.validCSRF(r.PostForm.Get("csrf"), ui.mac("signin", c.Value)) {
		ui.renderSignin(w, r, http.StatusForbidden, signinData{Next: next,
			Error: "The sign-in form expired or was not sent from this page (are cookies allowed?). Paste the token again."})
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	user, err := ui.s.ctl().Authenticate(r.Context(), token)
	if err != nil {
		if refill.ExitCode(err) != refill.ExitNotPermitted {
			ui.fail(w, r, &view{Title: "Error"}, err)
			return
		}
		ui.renderSignin(w, r, http.StatusUnauthorized, signinData{Next: next,
			Error: "That token was not accepted (" + err.Error() + "). Make one with: refill token create --as YOU"})
		return
	}
	ui.s.Log.Info("web sign-in", slog.String("user", user))
	http.SetCookie(w, ui.cookie(r, signinCookie, "", "/signin", -1))
	http.SetCookie(w, ui.cookie(r, sessionCookie, token, "/", 0))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// signout forgets the session in this browser. The token itself stays
// valid (it is an API token): revoke it with refill token revoke.
func (ui *webUI) signout(w http.ResponseWriter, r *http.Request, v *view) {
	http.SetCookie(w, ui.cookie(r, sessionCookie, "", "/", -1))
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}

// localPath returns next when it is a path on this server, else "/": the
// sign-in form never sends anyone to another site.
func localPath(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/"
	}
	for _, c := range next {
		if c < 0x20 || c == 0x7f || c == '\\' {
			return "/"
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Path == "/signin" {
		return "/"
	}
	return next
}

// Rendering.

// render executes a page into a buffer first, so a template error is a
// clean 500 rather than half a page.
func (ui *webUI) render(w http.ResponseWriter, r *http.Request, status int, name string, v *view) {
	t, ok := ui.pages[name]
	if !ok {
		ui.s.Log.Error("web: no template", slog.String("name", name))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout.html", v); err != nil {
		ui.s.Log.ErrorContext(r.Context(), "web: template", slog.String("name", name), slog.String("error", err.Error()))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail shows err as a page with its HTTP status. An internal error's text
// is logged, not shown: it may name hosts and paths.
func (ui *webUI) fail(w http.ResponseWriter, r *http.Request, v *view, err error) {
	status, msg := HTTPStatus(err), err.Error()
	if status == http.StatusInternalServerError {
		ui.s.Log.ErrorContext(r.Context(), "internal error", slog.String("path", r.URL.Path), slog.String("error", msg))
		msg = "Internal error: the server log has the details."
	}
	if v == nil {
		v = &view{}
	}
	v.Title = http.StatusText(status)
	v.Data = msg
	ui.render(w, r, status, "error", v)
}

// refuse answers a request refused before anything was done, with a page
// that says why.
func (ui *webUI) refuse(w http.ResponseWriter, r *http.Request, status int, msg string) {
	ui.render(w, r, status, "error", &view{Title: http.StatusText(status), Data: msg})
}
