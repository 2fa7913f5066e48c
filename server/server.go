// Package server is refill's second front door: `refill serve`'s JSON API
// under /api/v1, its web UI, Slack's interactions endpoint, health and
// metrics. It is a thin adapter over the same core the command line calls
// (control.Control): every rule is control's, and the server only maps
// HTTP to it and its errors back to HTTP (docs/design.md §7a).
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/internal/strictjson"
	"github.com/refill-dev/refill/run"
	"github.com/refill-dev/refill/store"
)

// MaxBody bounds a request body: a plan request is a few hundred bytes.
const MaxBody = 1 << 20

// Server serves one project.
type Server struct {
	Config  *refill.Config
	Store   *store.Store
	Control *control.Control
	Runner  *run.Runner
	Log     *slog.Logger
	// Slack, when set, handles POST /slack/interactions (signature
	// verified, replays refused, decisions through Control).
	Slack http.Handler
	// Reload, when set, is asked before each request whether what the
	// core was built from (refill.yaml, and the scripts whose digests jobs
	// seal) changed: it returns nil while nothing did, a fresh core when
	// something did, and an error when the changed config no longer loads
	// — then the server refuses to decide (503) until it is fixed. Without
	// it, the core given at start decides until the process ends.
	Reload func(ctx context.Context) (*Core, error)
	// Version is shown on /healthz.
	Version string

	metrics *metrics
	mux     *http.ServeMux
	// core is what decides now: Config, Control and Runner at start, and
	// what Reload gives after.
	core    atomic.Pointer[Core]
	reload  sync.Mutex
	runners []*run.Runner // every runner a core had, for Shutdown's drain
	// planning bounds dry runs in progress: each scans the warehouse, and
	// on a small machine a burst of them would starve every other request.
	planning chan struct{}

	// Applies started through the server run in the background, under
	// base; Shutdown waits for them.
	base     context.Context
	stop     context.CancelFunc
	applies  sync.WaitGroup
	mu       sync.Mutex
	applying map[string]bool
	closing  bool
}

// New wires the server's routes.
func New(s *Server) *Server {
	if s.Log == nil {
		s.Log = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	s.base, s.stop = context.WithCancel(context.Background())
	s.core.Store(&Core{Config: s.Config, Control: s.Control, Runner: s.Runner})
	s.applying = map[string]bool{}
	s.planning = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))
	s.metrics = newMetrics(s)
	s.metrics.watch(s.Runner)
	if s.Runner != nil {
		s.runners = append(s.runners, s.Runner)
	}
	s.mux = http.NewServeMux()
	s.routes()
	return s
}

// Handler is the server's HTTP handler, with request logging and metrics.
func (s *Server) Handler() http.Handler {
	return s.metrics.instrument(s.logRequests(s.refreshing(s.mux)))
}

// Core is what the server decides with: a config and the core wired over
// it.
type Core struct {
	Config  *refill.Config
	Control *control.Control
	Runner  *run.Runner
}

func (s *Server) ctl() *control.Control { return s.core.Load().Control }
func (s *Server) conf() *refill.Config  { return s.core.Load().Config }

// Current is the core to decide with now: Reload asked first, so a change
// to refill.yaml or a job's script since the last request is seen before
// anything is decided.
func (s *Server) Current(ctx context.Context) (*Core, error) {
	if s.Reload == nil {
		return s.core.Load(), nil
	}
	s.reload.Lock()
	defer s.reload.Unlock()
	fresh, err := s.Reload(ctx)
	if err != nil {
		return nil, err
	}
	if fresh != nil {
		s.metrics.watch(fresh.Runner)
		if fresh.Runner != nil {
			s.runners = append(s.runners, fresh.Runner)
		}
		s.core.Store(fresh)
		s.Log.Info("config reloaded", slog.String("config", fresh.Config.Name()))
	}
	return s.core.Load(), nil
}

// refreshing brings the core up to date before every request but health
// and metrics; a config that no longer loads stops every decision.
func (s *Server) refreshing(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz", "/metrics":
		default:
			if _, err := s.Current(r.Context()); err != nil {
				s.Log.Error("config reload", slog.String("error", err.Error()))
				writeJSON(w, http.StatusServiceUnavailable, apiError{
					Error: "refusing to decide: " + err.Error(), Code: refill.ExitInternal})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) routes() {
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.Handle("GET /metrics", s.metrics.handler())
	s.api()
	s.web()
	if s.Slack != nil {
		s.mux.Handle("POST /slack/interactions", s.Slack)
	}
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.Store.DB().PingContext(ctx); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ok": false, "error": "state store: " + err.Error()})
		return
	}
	body := map[string]any{"ok": true, "version": s.Version, "state_store": s.Store.Driver()}
	if f, err := s.ctl().Frozen(ctx); err == nil && f != nil {
		body["frozen"] = f
	}
	writeJSON(w, http.StatusOK, body)
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		// Whoever authenticates the request further in writes its user
		// here, for the log line.
		slot := new(string)
		inner := r.WithContext(context.WithValue(r.Context(), userSlotKey, slot))
		next.ServeHTTP(rec, inner)
		// The mux set the route on the request it saw; the metrics
		// around this read it from the outer one.
		r.Pattern = inner.Pattern
		lvl := slog.LevelInfo
		if rec.status >= 500 {
			lvl = slog.LevelError
		}
		s.Log.LogAttrs(r.Context(), lvl, "request", slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", rec.status), slog.Float64("took_s", time.Since(start).Seconds()), slog.String("user", *slot))
	})
}

// Errors.

// apiError is the body of every error: the message and the CLI's exit
// code for the same failure (docs/design.md §7a).
type apiError struct {
	Error string `json:"error"`
	Code  int    `json:"code"`
}

// HTTPStatus maps an error to its HTTP status by the CLI's exit code: bad
// input 400 (an unknown plan or dataset 404), blocked 409, not permitted
// 403 (a partition lock 409), a failed verification 422, anything else 500.
func HTTPStatus(err error) int {
	switch refill.ExitCode(err) {
	case refill.ExitBadInput:
		if errors.Is(err, refill.ErrNotFound) {
			return http.StatusNotFound
		}
		return http.StatusBadRequest
	case refill.ExitBlocked:
		return http.StatusConflict
	case refill.ExitNotPermitted:
		if errors.Is(err, refill.ErrLocked) {
			return http.StatusConflict
		}
		return http.StatusForbidden
	case refill.ExitVerification:
		return http.StatusUnprocessableEntity
	}
	return http.StatusInternalServerError
}

// writeError answers err as JSON. An internal error's text is logged, not
// shown: it may name hosts and paths.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	// A refused text is named by its key in the body, not its flag.
	var te *refill.TextError
	if errors.As(err, &te) {
		te.Field = strings.TrimPrefix(te.Field, "--")
	}
	status, msg := HTTPStatus(err), apiWords(err.Error())
	if status == http.StatusInternalServerError {
		s.Log.ErrorContext(r.Context(), "internal error", slog.String("path", r.URL.Path), slog.String("error", err.Error()))
		msg = "internal error: " + msg
	}
	writeJSON(w, status, apiError{Error: msg, Code: refill.ExitCode(err)})
}

// cliFlag is a command-line flag named in an error message.
var cliFlag = regexp.MustCompile(`--(reason|note|from|to|exclude|no-downstream|partition|column|dataset|force|check)\b`)

// apiWords says an error the way the API asks: the command line's flags
// become the body's keys ("--reason is required" is "reason is required"),
// and "--as USER" is the token's user.
func apiWords(msg string) string {
	msg = strings.ReplaceAll(msg, "pass --as USER or set REFILL_USER", "send a bearer token")
	return cliFlag.ReplaceAllStringFunc(msg, func(f string) string {
		return strings.ReplaceAll(strings.TrimPrefix(f, "--"), "-", "_")
	})
}

// unauthorized answers a missing or bad token: 401, with the CLI's "not
// permitted" code.
func unauthorized(w http.ResponseWriter, why string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="refill"`)
	writeJSON(w, http.StatusUnauthorized, apiError{Error: why, Code: refill.ExitNotPermitted})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// decode reads a JSON body strictly: at most MaxBody bytes, one document,
// each key once at any depth, spelled as refill spells it, and none it
// does not define (strictjson; a DAG run's conf takes other keys too).
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return refill.BadInputf("request body: Content-Type %q: want application/json", ct)
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return refill.BadInputf("request body: larger than %d bytes", MaxBody)
		}
		return refill.BadInputf("request body: %v", err)
	}
	if err := strictjson.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("request body: %w", err)
	}
	return nil
}

// Identity.

type ctxKey int

const userKey ctxKey = iota

// userSlotKey holds the *string the request log reads the user from.
const userSlotKey ctxKey = iota + 100

func withUser(ctx context.Context, user string) context.Context {
	if slot, ok := ctx.Value(userSlotKey).(*string); ok {
		*slot = user
	}
	return context.WithValue(ctx, userKey, user)
}

func userOf(ctx context.Context) string {
	u, _ := ctx.Value(userKey).(string)
	return u
}

// bearer returns the token of an Authorization: Bearer header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// authed requires a valid bearer token and puts its user in the context.
func (s *Server) authed(next func(w http.ResponseWriter, r *http.Request, user string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, ok := bearer(r)
		if !ok {
			unauthorized(w, "missing bearer token: send Authorization: Bearer TOKEN (refill token create --as USER)")
			return
		}
		user, err := s.ctl().Authenticate(r.Context(), tok)
		if err != nil {
			if refill.ExitCode(err) == refill.ExitNotPermitted {
				unauthorized(w, err.Error())
				return
			}
			s.writeError(w, r, err)
			return
		}
		r = r.WithContext(withUser(r.Context(), user))
		next(w, r, user)
	}
}

// Background applies.

// startApply starts (or resumes) plan id's run as user and returns once
// this server holds it (control.Start: the run's lease is taken); the run
// then goes on in the background, outliving the request that started it.
// Every refusal comes back here, before any answer: a plan this server
// already runs, one another process runs or takes first (ErrLocked), a
// gate that fails now (ErrBlocked), anything unmet.
func (s *Server) startApply(ctx context.Context, id, user string) error {
	s.mu.Lock()
	if s.applying[id] {
		s.mu.Unlock()
		return refill.Lockedf("plan %s is already running on this server", id)
	}
	if s.closing {
		s.mu.Unlock()
		return fmt.Errorf("the server is shutting down and starts no new runs")
	}
	s.applying[id] = true
	s.applies.Add(1)
	s.mu.Unlock()
	done := func() {
		s.mu.Lock()
		delete(s.applying, id)
		s.mu.Unlock()
		s.applies.Done()
	}
	run, err := s.ctl().Start(ctx, id, user)
	if err != nil {
		done()
		return err
	}
	s.Log.Info("apply started", slog.String("plan", id), slog.String("user", user))
	go func() {
		defer done()
		err := run(s.base)
		s.metrics.run(err)
		if err != nil {
			s.Log.Warn("apply ended", slog.String("plan", id), slog.String("user", user), slog.String("error", err.Error()),
				slog.Int("code", refill.ExitCode(err)))
			return
		}
		s.Log.Info("apply finished", slog.String("plan", id), slog.String("user", user))
	}()
	return nil
}

// Running reports whether this server is running plan id.
func (s *Server) Running(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applying[id]
}

// Shutdown stops taking new runs; runs in progress start no new
// partition, and the partitions in flight may finish and publish until ctx
// ends. Then they are stopped: their transactions roll back. Either way
// the plans are left failed, and refill apply resumes them.
func (s *Server) Shutdown(ctx context.Context) {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.reload.Lock()
	runners := slices.Clone(s.runners)
	s.reload.Unlock()
	for _, r := range runners {
		r.Drain()
	}
	done := make(chan struct{})
	go func() { s.applies.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.Log.Warn("shutdown: runs still in progress are stopped; their partitions in flight roll back, and apply resumes them")
		s.stop()
		<-done
	}
	s.stop()
}

// StartApply starts (or resumes) plan id as user, as the API's apply does:
// it returns once this server holds the run, which goes on in the
// background. The watcher in refill serve runs its auto plans so.
func (s *Server) StartApply(ctx context.Context, id, user string) error {
	return s.startApply(ctx, id, user)
}
