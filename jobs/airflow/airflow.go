// Package airflow runs refill's airflow job kind: it triggers one DAG run
// per partition through Airflow's REST API (Airflow 2's /api/v1 or Airflow
// 3's /api/v2) and waits for the run to end.
//
// A partition job may be retried by River after a crash, a timeout or a
// server error, so a Run must never start a second DAG run for the same
// partition. The caller passes a run ID that is fixed per plan and
// partition; Airflow refuses a second run with that ID (409 Conflict), and
// Run then follows the run that already exists instead of starting another.
package airflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/refill-dev/refill/dsn"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/internal/secret"
)

// ErrRunFailed is wrapped by the error Run returns when the DAG run ended in
// the "failed" state. The run is over and retrying Run would only find the
// same failed run again (its ID is fixed), so callers should not retry it.
var ErrRunFailed = errors.New("DAG run failed")

// Defaults for a zero Client.
const (
	// DefaultPollInterval is how often a zero Client asks for the run's
	// state. DAG runs take minutes; a few seconds keeps the load on the
	// Airflow web server negligible.
	DefaultPollInterval = 5 * time.Second
	// DefaultTimeout bounds each HTTP request of a zero Client, so that a
	// hung connection fails the attempt instead of holding a worker forever.
	DefaultTimeout = 30 * time.Second
)

// Airflow's run_id column is String(250) in both Airflow 2 and 3.
const maxRunIDLen = 250

// runIDPattern is the default [scheduler] allowed_run_id_pattern of Airflow
// 2.6.3 and later (and of Airflow 3). Airflow 2 checks it deep inside
// create_dagrun and answers a bad ID with a 500, which a retrying caller
// would repeat until its attempts ran out, so Run checks it first.
var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.~:+-]+$`)

// maxBody bounds how much of a response Run reads. A DAGRun is a few
// hundred bytes; the bound only protects against a misbehaving server.
const maxBody = 1 << 20

var defaultHTTP = &http.Client{Timeout: DefaultTimeout}

// Client triggers and follows Airflow DAG runs. The zero value is ready to
// use, and one Client may serve many concurrent Runs: it caches Airflow 3
// access tokens so that concurrent partitions share one login.
type Client struct {
	// HTTP sends the requests; nil means a client with a 30s timeout.
	HTTP *http.Client
	// PollInterval is the pause between state polls; zero means 5s.
	PollInterval time.Duration
	// Getenv reads the credentials a job names by variable where refill's
	// start (secret.Keep) did not withhold them; nil means os.Getenv.
	// Tests replace it so they need not touch the process environment. A
	// job's credential files are read as secret.Reader reads them: give
	// Run a job resolved with AirflowJob.In.
	Getenv func(string) string

	mu     sync.Mutex
	tokens map[string]string // Airflow 3 access tokens by base URL and user
	// login serialises logins, so that partitions starting together wait
	// for the first one's token instead of each logging in.
	login sync.Mutex
}

// Result describes the DAG run a Run followed.
type Result struct {
	// DagRunID is the run's ID, the one the caller passed.
	DagRunID string `json:"dag_run_id"`
	// State is the last state seen: "success" or "failed" when Run ends
	// normally, or the state before an error.
	State string `json:"state"`
	// Created is true when this Run started the DAG run, and false when the
	// trigger found an existing run with the same ID (a retry after a crash).
	Created bool `json:"created"`
	// Polls counts the GETs of the run's state.
	Polls int `json:"polls"`
}

// Run triggers (or finds) the DAG run for one partition and waits until it
// ends. runID is deterministic per plan and partition (for example
// "refill__<plan>__<dataset>__<partition>"); start and end are the
// partition's bounds as RFC 3339 timestamps and reach the DAG as
// conf.start_date and conf.end_date.
//
// Run returns nil when the run ends "success" and an error wrapping
// ErrRunFailed when it ends "failed". Errors wrapping refill.ErrBadInput
// (missing credentials, a malformed run ID, an unknown DAG, rejected
// credentials or body) will not heal by themselves. Every other error — a
// transport error, a 5xx, a timeout, a cancelled ctx — is plain, so the
// caller's retry runs Run again, which finds the same run through its ID.
func (c *Client) Run(ctx context.Context, job *refill.AirflowJob, runID, start, end string) (Result, error) {
	res := Result{DagRunID: runID}
	s, err := c.session(job, runID, start, end)
	if err != nil {
		return res, err
	}
	run, created, err := s.trigger(ctx, start, end)
	if err != nil {
		return res, err
	}
	res.Created = created
	if !created {
		if run, err = s.get(ctx); err != nil {
			return res, err
		}
		res.Polls++
	}
	res.State = run.State
	for !terminal(run.State) {
		if err := s.wait(ctx, c.pollInterval(job), run.State, res.Polls); err != nil {
			return res, err
		}
		if run, err = s.get(ctx); err != nil {
			return res, err
		}
		res.Polls++
		res.State = run.State
	}
	if run.State == stateFailed {
		return res, fmt.Errorf("%s: ended %q: %w", s.what(), run.State, ErrRunFailed)
	}
	return res, nil
}

// DAG run states (DagState in the v1 spec, DagRunState in v2).
const (
	stateSuccess = "success"
	stateFailed  = "failed"
)

// terminal reports whether a run in state will change no more. Any other
// state, including one a later Airflow may add, is polled again: the
// caller's job timeout bounds the wait.
func terminal(state string) bool { return state == stateSuccess || state == stateFailed }

// pollInterval is the job's poll, else the client's, else the default: a
// per-job setting never needs a client (and a login) of its own.
func (c *Client) pollInterval(job *refill.AirflowJob) time.Duration {
	switch {
	case job != nil && job.Poll > 0:
		return time.Duration(job.Poll)
	case c.PollInterval > 0:
		return c.PollInterval
	}
	return DefaultPollInterval
}

// patchV1 is UpdateDagRunState (API v1); patchV2 is DAGRunPatchBody (v2).
type patchV1 struct {
	State string `json:"state"`
}

type patchV2 struct {
	State string `json:"state"`
	Note  string `json:"note,omitempty"`
}

// Fail marks a DAG run failed, so that a run refill gave up on — its
// attempts ran out, or its plan's run stopped or was resumed afresh — does
// not go on writing unobserved. A run that does not exist is nothing to
// fail; one that already ended is set failed all the same (a late success
// must not count). note says why (API v2 keeps it with the run).
func (c *Client) Fail(ctx context.Context, job *refill.AirflowJob, runID, note string) error {
	now := time.Now().UTC().Format(time.RFC3339)
	s, err := c.session(job, runID, now, now)
	if err != nil {
		return err
	}
	// A run that is not there, or already failed, is left alone: the
	// PATCH needs edit rights on DAG runs, and nothing is gained by it.
	switch run, err := s.get(ctx); {
	case err != nil && strings.Contains(err.Error(), "HTTP 404"):
		return nil
	case err == nil && run.State == stateFailed:
		return nil
	}
	var body any = patchV1{State: stateFailed}
	if s.api == "v2" {
		if len(note) > 1000 {
			note = note[:1000]
		}
		body = patchV2{State: stateFailed, Note: note}
	}
	resp, err := s.call(ctx, http.MethodPatch, s.runsPath()+"/"+url.PathEscape(runID), body)
	if err != nil {
		return fmt.Errorf("%s: mark failed: %w", s.what(), err)
	}
	switch {
	case resp.status == http.StatusNotFound:
		return nil
	case resp.status == http.StatusForbidden:
		return fmt.Errorf("%w (the Airflow user needs edit rights on this DAG's runs, so refill can stop a run it no longer follows)", s.statusError("mark failed", resp))
	case resp.status/100 != 2:
		return s.statusError("mark failed", resp)
	}
	return nil
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return defaultHTTP
}

// where names where a credential is kept: its variable or its file.
func where(s refill.Secret) string {
	if s.File != "" {
		return s.File
	}
	return s.Env
}

// session is one Run's view of its job: where to send requests, as whom,
// and how to name the run in errors.
type session struct {
	c      *Client
	dag    string
	runID  string
	api    string // "v1" or "v2"
	base   string // the job's URL without a trailing slash
	host   string // the URL for messages, without any password
	user   string
	pass   string
	creds  bool   // the job names credentials (user and pass)
	envs   string // where they are kept, for messages
	tokKey string
}

// session validates everything Run can check before it talks to Airflow,
// so that mistakes in configuration fail at once and by name rather than as
// an HTTP error on some later attempt.
func (c *Client) session(job *refill.AirflowJob, runID, start, end string) (*session, error) {
	if job == nil {
		return nil, refill.BadInputf("airflow: no job given")
	}
	s := &session{c: c, dag: job.DagID, runID: runID, api: job.API}
	if job.DagID == "" {
		return nil, refill.BadInputf("airflow job at %s: dag_id is empty", redactURL(job.URL))
	}
	switch job.API {
	case "", "v1":
		s.api = "v1" // the config loader's default, for jobs built by hand
	case "v2":
	default:
		return nil, refill.BadInputf("%s: unknown Airflow API %q: want v1 or v2", s.what(), job.API)
	}
	u, err := url.Parse(job.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		// API paths are appended to the URL, so it must end in its path.
		return nil, refill.BadInputf("%s: url %q is not an http(s) base URL without query or fragment", s.what(), redactURL(job.URL))
	}
	s.base = strings.TrimRight(job.URL, "/")
	s.host = u.Redacted()
	if len(runID) > maxRunIDLen || !runIDPattern.MatchString(runID) {
		return nil, refill.BadInputf("%s: Airflow accepts run IDs of at most %d characters matching %s", s.what(), maxRunIDLen, runIDPattern)
	}
	for _, b := range []struct{ name, v string }{{"start", start}, {"end", end}} {
		if _, err := time.Parse(time.RFC3339, b.v); err != nil {
			return nil, refill.BadInputf("%s: partition %s %q is not an RFC 3339 timestamp", s.what(), b.name, b.v)
		}
	}
	if job.HasCredentials() {
		user, pass := job.Username(""), job.Password("")
		if !user.IsSet() || !pass.IsSet() {
			return nil, refill.BadInputf("%s: give both username_env and password_env (or their _file keys), or neither", s.what())
		}
		read := secret.Reader{Getenv: c.Getenv}
		var err error
		if s.user, err = read.Read(user); err == nil {
			s.pass, err = read.Read(pass)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: the Airflow credentials: %w", s.what(), err)
		}
		var unset []string
		files := false
		for _, c := range []struct {
			s refill.Secret
			v string
		}{{user, s.user}, {pass, s.pass}} {
			if c.v == "" {
				unset = append(unset, where(c.s))
				files = files || c.s.File != ""
			}
		}
		switch {
		case len(unset) == 0:
		case files:
			return nil, refill.BadInputf("%s: the Airflow credentials are missing: nothing in %s", s.what(), strings.Join(unset, " and "))
		case len(unset) == 1:
			return nil, refill.BadInputf("%s: the Airflow credentials are missing: environment variable %s is not set", s.what(), unset[0])
		default:
			return nil, refill.BadInputf("%s: the Airflow credentials are missing: environment variables %s and %s are not set", s.what(), unset[0], unset[1])
		}
		s.creds = true
		s.envs = where(user) + "/" + where(pass)
	}
	s.tokKey = s.base + "\x00" + s.user
	return s, nil
}

// what names the run in every error, so that a failure in a plan of many
// partitions says which DAG and which partition's run it was.
func (s *session) what() string {
	return fmt.Sprintf("airflow dag %q run %q", s.dag, s.runID)
}

// dagRun holds the fields of DAGRun (v1) and DAGRunResponse (v2) that Run
// needs; both APIs name them alike.
type dagRun struct {
	DagRunID string `json:"dag_run_id"`
	State    string `json:"state"`
}

// decodeRun parses a DAGRun or DAGRunResponse body. It insists on a state,
// since a run without one cannot be followed, and on the run ID, since
// Run's whole idempotency rests on Airflow keeping the ID it was given.
func decodeRun(body []byte) (dagRun, error) {
	var r dagRun
	if err := json.Unmarshal(body, &r); err != nil {
		return dagRun{}, fmt.Errorf("decoding the DAG run: %w", err)
	}
	if r.DagRunID == "" {
		return dagRun{}, errors.New("the DAG run has no dag_run_id")
	}
	if r.State == "" {
		return dagRun{}, errors.New("the DAG run has no state")
	}
	return r, nil
}

// triggerV1 is the DAGRun body of Airflow 2's POST dagRuns. It sets only
// writable fields (the spec marks state, dag_id and the like readOnly) and
// leaves logical_date out: Airflow 2 then uses the current time. Setting it
// to the partition's start would collide with the scheduled run of that
// interval, since (dag_id, logical_date) is unique, and make a 409 that is
// not about our run.
type triggerV1 struct {
	DagRunID string            `json:"dag_run_id"`
	Conf     map[string]string `json:"conf"`
}

// triggerV2 is Airflow 3's TriggerDAGRunPostBody. Its logical_date has no
// default on the server, so it is required even though it may be null (the
// client changelog for 3.0.0 says so; the published spec's empty required
// list does not). A null logical_date lets any number of runs coexist, so
// only the run ID decides whether a run already exists.
type triggerV2 struct {
	DagRunID    string            `json:"dag_run_id"`
	LogicalDate *string           `json:"logical_date"`
	Conf        map[string]string `json:"conf"`
}

func (s *session) runsPath() string {
	return "/api/" + s.api + "/dags/" + url.PathEscape(s.dag) + "/dagRuns"
}

// trigger starts the DAG run. It returns created=false, and no run, when
// Airflow answers 409 because a run with this ID exists already.
func (s *session) trigger(ctx context.Context, start, end string) (dagRun, bool, error) {
	conf := map[string]string{"start_date": start, "end_date": end}
	var body any = triggerV1{DagRunID: s.runID, Conf: conf}
	if s.api == "v2" {
		body = triggerV2{DagRunID: s.runID, Conf: conf}
	}
	resp, err := s.call(ctx, http.MethodPost, s.runsPath(), body)
	if err != nil {
		return dagRun{}, false, fmt.Errorf("%s: trigger: %w", s.what(), err)
	}
	switch {
	case resp.status == http.StatusConflict:
		return dagRun{}, false, nil
	case resp.status/100 != 2:
		return dagRun{}, false, s.statusError("trigger", resp)
	}
	run, err := decodeRun(resp.body)
	if err != nil {
		return dagRun{}, false, fmt.Errorf("%s: trigger answered HTTP %d: %w", s.what(), resp.status, err)
	}
	if run.DagRunID != s.runID {
		return dagRun{}, false, fmt.Errorf("%s: trigger answered with run %q instead", s.what(), run.DagRunID)
	}
	return run, true, nil
}

// get fetches the run's current state.
func (s *session) get(ctx context.Context) (dagRun, error) {
	resp, err := s.call(ctx, http.MethodGet, s.runsPath()+"/"+url.PathEscape(s.runID), nil)
	if err != nil {
		return dagRun{}, fmt.Errorf("%s: get state: %w", s.what(), err)
	}
	if resp.status == http.StatusNotFound {
		// Reached after a 409 too: Airflow 2 also refuses a run whose
		// logical date is taken, and then there is no run with our ID.
		// That clash is with the current time, so a retry clears it.
		return dagRun{}, fmt.Errorf("%s: get state: HTTP 404: no such run%s", s.what(), s.detailSuffix(resp))
	}
	if resp.status/100 != 2 {
		return dagRun{}, s.statusError("get state", resp)
	}
	run, err := decodeRun(resp.body)
	if err != nil {
		return dagRun{}, fmt.Errorf("%s: get state answered HTTP %d: %w", s.what(), resp.status, err)
	}
	return run, nil
}

// wait sleeps one poll interval, or until ctx ends.
func (s *session) wait(ctx context.Context, d time.Duration, state string, polls int) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("%s: stopped waiting in state %q after %d polls: %w", s.what(), state, polls, context.Cause(ctx))
	case <-t.C:
		return nil
	}
}

// response is an HTTP answer, read in full (up to maxBody).
type response struct {
	status int
	body   []byte
}

// call sends one API request. On Airflow 3 it authenticates with a bearer
// token and, when the token is refused (expired, or the server restarted
// with a new secret), logs in again once and repeats the request; a 401
// means the request was not processed, so repeating a POST is safe.
func (s *session) call(ctx context.Context, method, path string, body any) (*response, error) {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	if s.api == "v1" {
		return s.send(ctx, method, path, payload, func(r *http.Request) {
			if s.creds {
				r.SetBasicAuth(s.user, s.pass)
			}
		})
	}
	tok, err := s.token(ctx, false)
	if err != nil {
		return nil, err
	}
	bearer := func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
	resp, err := s.send(ctx, method, path, payload, bearer)
	if err != nil || resp.status != http.StatusUnauthorized {
		return resp, err
	}
	s.forget(tok)
	if tok, err = s.token(ctx, true); err != nil {
		return nil, err
	}
	return s.send(ctx, method, path, payload, bearer)
}

// send performs one request against the job's base URL.
func (s *session) send(ctx context.Context, method, path string, payload []byte, auth func(*http.Request)) (*response, error) {
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	auth(req)
	resp, err := s.c.httpClient().Do(req)
	if err != nil {
		return nil, err // a *url.Error: net/http removes any password from its URL
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("reading the HTTP %d answer: %w", resp.StatusCode, err)
	}
	return &response{status: resp.StatusCode, body: b}, nil
}

// token returns an Airflow 3 access token: the cached one unless fresh is
// set, else a new one from the auth manager's token endpoint.
func (s *session) token(ctx context.Context, fresh bool) (string, error) {
	c := s.c
	if !fresh {
		if tok := s.cachedToken(); tok != "" {
			return tok, nil
		}
	}
	c.login.Lock()
	defer c.login.Unlock()
	if !fresh {
		// Another partition may have logged in while this one waited.
		if tok := s.cachedToken(); tok != "" {
			return tok, nil
		}
	}
	tok, err := s.login(ctx)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	if c.tokens == nil {
		c.tokens = map[string]string{}
	}
	c.tokens[s.tokKey] = tok
	c.mu.Unlock()
	return tok, nil
}

// forget drops tok from the cache, unless another Run has replaced it.
func (s *session) forget(tok string) {
	s.c.mu.Lock()
	if s.c.tokens[s.tokKey] == tok {
		delete(s.c.tokens, s.tokKey)
	}
	s.c.mu.Unlock()
}

// loginBody is LoginBody of Airflow 3's simple and FAB auth managers.
type loginBody struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// login asks the auth manager for a JWT. The endpoint is not under /api/v2
// and is not in the core API spec: it belongs to the auth manager, and both
// the simple and the FAB auth manager serve POST /auth/token with
// {username, password}, answering 201 {access_token}. Without credentials
// it tries GET /auth/token, which the simple auth manager answers only when
// simple_auth_manager_all_admins is on (a development setup).
//
// Its errors never carry the server's answer: a 422 from FastAPI echoes the
// request body, password included.
func (s *session) login(ctx context.Context) (string, error) {
	method, payload := http.MethodGet, []byte(nil)
	if s.creds {
		method = http.MethodPost
		payload, _ = json.Marshal(loginBody{Username: s.user, Password: s.pass}) // two strings cannot fail
	}
	resp, err := s.send(ctx, method, "/auth/token", payload, func(*http.Request) {})
	if err != nil {
		return "", fmt.Errorf("log in to %s: %w", s.host, err)
	}
	switch {
	case resp.status/100 == 2:
	case !s.creds && (resp.status == http.StatusForbidden || resp.status == http.StatusUnauthorized):
		return "", refill.BadInputf("log in to %s: HTTP %d: no token without credentials; set username_env and password_env", s.host, resp.status)
	case resp.status == http.StatusUnauthorized || resp.status == http.StatusForbidden:
		return "", refill.BadInputf("log in to %s: HTTP %d: the credentials in %s were refused", s.host, resp.status, s.envs)
	case permanent(resp.status):
		return "", refill.BadInputf("log in to %s: HTTP %d", s.host, resp.status)
	default:
		return "", fmt.Errorf("log in to %s: HTTP %d", s.host, resp.status)
	}
	var lr struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(resp.body, &lr); err != nil || lr.AccessToken == "" {
		return "", fmt.Errorf("log in to %s: HTTP %d without an access_token", s.host, resp.status)
	}
	return lr.AccessToken, nil
}

// permanent reports whether an HTTP status means the request will fail
// however often it is repeated: a client error other than a timeout, a
// conflict or rate limiting.
func permanent(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly, http.StatusTooManyRequests:
		return false
	}
	return status >= 400 && status < 500
}

// statusError describes an unexpected HTTP status, with Airflow's own
// explanation when it gave one. Permanent statuses wrap refill.ErrBadInput
// so that the caller can stop retrying.
func (s *session) statusError(op string, resp *response) error {
	msg := fmt.Sprintf("%s: %s: HTTP %d %s%s", s.what(), op, resp.status, http.StatusText(resp.status), s.detailSuffix(resp))
	if resp.status == http.StatusUnauthorized || resp.status == http.StatusForbidden {
		if s.creds {
			msg += " (credentials from " + s.envs + ")"
		} else {
			msg += " (no username_env/password_env configured)"
		}
	}
	if permanent(resp.status) {
		return refill.BadInputf("%s", msg)
	}
	return errors.New(msg)
}

// detailSuffix is ": " and the server's explanation, or nothing. Any of the
// session's secrets that the server echoed is blanked out, and a repeat of
// the status text (Airflow 2's error title, a proxy's plain-text page) is
// dropped, since the message states the status already.
func (s *session) detailSuffix(resp *response) string {
	d := errorDetail(resp.body)
	if text := http.StatusText(resp.status); text != "" {
		if d == text {
			d = ""
		}
		d = strings.TrimPrefix(d, text+": ")
	}
	if d == "" {
		return ""
	}
	for _, secret := range []string{s.pass, s.cachedToken()} {
		if secret != "" {
			d = strings.ReplaceAll(d, secret, "***")
		}
	}
	return ": " + d
}

func (s *session) cachedToken() string {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.c.tokens[s.tokKey]
}

// maxDetail bounds the server text quoted in an error.
const maxDetail = 300

// errorDetail extracts a one-line explanation from an Airflow error body:
// Airflow 2's RFC 7807 Error {title, detail}, Airflow 3's
// HTTPExceptionResponse {detail: string or object} or HTTPValidationError
// {detail: [{loc, msg}]}, or, from a proxy in front of Airflow, plain text.
func errorDetail(body []byte) string {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return ""
	}
	var e struct {
		Title  string          `json:"title"`
		Detail json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &e) != nil {
		return oneLine(string(body))
	}
	var parts []string
	if e.Title != "" {
		parts = append(parts, e.Title)
	}
	var str string
	var items []struct {
		Loc []any  `json:"loc"`
		Msg string `json:"msg"`
	}
	switch {
	case len(e.Detail) == 0 || string(e.Detail) == "null":
	case json.Unmarshal(e.Detail, &str) == nil:
		if str != "" {
			parts = append(parts, str)
		}
	case json.Unmarshal(e.Detail, &items) == nil:
		for _, it := range items {
			loc := make([]string, len(it.Loc))
			for i, l := range it.Loc {
				loc[i] = fmt.Sprint(l)
			}
			parts = append(parts, strings.Join(loc, ".")+": "+it.Msg)
		}
	default:
		parts = append(parts, string(e.Detail))
	}
	if len(parts) == 0 {
		return oneLine(string(body))
	}
	return oneLine(strings.Join(parts, ": "))
}

// oneLine collapses whitespace and clips s to maxDetail runes, so that a
// server's HTML error page cannot flood a log line.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(strings.ToValidUTF8(s, "?")), " ")
	if r := []rune(s); len(r) > maxDetail {
		s = string(r[:maxDetail]) + "…"
	}
	return s
}

// redactURL returns raw with any password replaced (dsn.Redact), for
// messages about a URL that may not even parse.
func redactURL(raw string) string { return dsn.Redact(raw) }
