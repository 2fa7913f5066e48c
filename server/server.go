// Package server is refill's second front door: `refill serve`'s JSON API
// under /api/v1, its web UI, Slack's interactions endpoint, health and
// metrics. It is a thin adapter over the same core the command line calls
// (control.Control): every rule is control's, and the server only maps
// HTTP to it and its errors back to HTTP (DESIGN.md §6a).
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
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
	// Version is shown on /healthz.
	Version string

	metrics *metrics
	mux     *http.ServeMux
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
	s.applying = map[string]bool{}
	s.planning = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))
	s.metrics = newMetrics(s)
	s.mux = http.NewServeMux()
	s.routes()
	return s
}

// Handler is the server's HTTP handler, with request logging and metrics.
func (s *Server) Handler() http.Handler {
	return s.metrics.instrument(s.logRequests(s.mux))
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
	if f, err := s.Control.Frozen(ctx); err == nil && f != nil {
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
		next.ServeHTTP(rec, r)
		lvl := slog.LevelInfo
		if rec.status >= 500 {
			lvl = slog.LevelError
		}
		s.Log.LogAttrs(r.Context(), lvl, "request", slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", rec.status), slog.Duration("took", time.Since(start)), slog.String("user", userOf(r.Context())))
	})
}

// Errors.

// apiError is the body of every error: the message and the CLI's exit
// code for the same failure (DESIGN.md §6a).
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
	status, msg := HTTPStatus(err), err.Error()
	if status == http.StatusInternalServerError {
		s.Log.ErrorContext(r.Context(), "internal error", slog.String("path", r.URL.Path), slog.String("error", err.Error()))
		msg = "internal error: " + msg
	}
	writeJSON(w, status, apiError{Error: msg, Code: refill.ExitCode(err)})
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

// decode reads a JSON body strictly: at most MaxBody bytes, no unknown
// fields, one document.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return refill.BadInputf("request body: Content-Type %q: want application/json", ct)
	}
	body := http.MaxBytesReader(w, r.Body, MaxBody)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			return refill.BadInputf("request body: larger than %d bytes", MaxBody)
		case errors.Is(err, io.EOF):
			return refill.BadInputf("request body: empty; want a JSON object")
		}
		return refill.BadInputf("request body: %v", err)
	}
	if dec.More() {
		return refill.BadInputf("request body: more than one JSON document")
	}
	if _, err := io.Copy(io.Discard, body); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return refill.BadInputf("request body: larger than %d bytes", MaxBody)
		}
	}
	return nil
}

// Identity.

type ctxKey int

const userKey ctxKey = iota

func withUser(ctx context.Context, user string) context.Context {
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
		user, err := s.Control.Authenticate(r.Context(), tok)
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

// startApply runs plan id as user in the background: the run outlives the
// request that started it. A second start of a plan this server is
// already running is refused as locked.
func (s *Server) startApply(id, user string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.applying[id] {
		return refill.Lockedf("plan %s is already running on this server", id)
	}
	if s.closing {
		return fmt.Errorf("the server is shutting down and starts no new runs")
	}
	s.applying[id] = true
	s.applies.Add(1)
	go func() {
		defer s.applies.Done()
		defer func() {
			s.mu.Lock()
			delete(s.applying, id)
			s.mu.Unlock()
		}()
		s.Log.Info("apply started", slog.String("plan", id), slog.String("user", user))
		err := s.Control.Apply(s.base, id, user)
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
	if s.Runner != nil {
		s.Runner.Drain()
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

// StartApply starts (or resumes) plan id as user in the background, as the
// API's apply does: the watcher in refill serve runs its auto plans so.
func (s *Server) StartApply(id, user string) error { return s.startApply(id, user) }
