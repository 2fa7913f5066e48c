package airflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/internal/fixtures"
)

// This file holds a fake Airflow web server for each API version. It serves
// only the endpoints the client uses, and it checks every request it is sent
// and every answer it gives against the published OpenAPI specs in
// ../shared/fixtures/airflow, so a test fails when the client sends a body
// the real API would refuse, or when the fake drifts from what Airflow
// really answers.

// fixtureDir finds the Airflow spec fixtures: $REFILL_FIXTURES/airflow, or
// ../shared/fixtures/airflow beside the module root.
func fixtureDir(t testing.TB) string {
	t.Helper()
	return fixtures.Dir(t, "airflow")
}

// authManagerSpec is the part of Airflow 3's simple auth manager API that
// the client uses: POST and GET /auth/token. The token endpoint is not in
// the core API spec (it belongs to the auth manager), and the fixtures carry
// only NOTES.md's summary of it, so it is transcribed here from
// apache/airflow airflow-core/src/airflow/api_fastapi/auth/managers/simple/
// openapi/v2-simple-auth-manager-generated.yaml at commit
// 4b9f215e325d05d9ee491934c711772c22bd0960 (Apache-2.0), trimmed to those
// two operations.
const authManagerSpec = `
openapi: 3.0.3
info: {title: Simple auth manager sub application, version: 0.1.0}
paths:
  /auth/token:
    post:
      operationId: create_token
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: '#/components/schemas/LoginBody'}
          application/x-www-form-urlencoded:
            schema: {$ref: '#/components/schemas/LoginBody'}
      responses:
        '201':
          description: Successful Response
          content:
            application/json:
              schema: {$ref: '#/components/schemas/LoginResponse'}
        '400': {description: Bad Request, content: {application/json: {schema: {$ref: '#/components/schemas/HTTPExceptionResponse'}}}}
        '401': {description: Unauthorized, content: {application/json: {schema: {$ref: '#/components/schemas/HTTPExceptionResponse'}}}}
        '415': {description: Unsupported Media Type, content: {application/json: {schema: {$ref: '#/components/schemas/HTTPExceptionResponse'}}}}
        '422': {description: Validation Error, content: {application/json: {schema: {$ref: '#/components/schemas/HTTPValidationError'}}}}
    get:
      operationId: create_token_all_admins
      responses:
        '201':
          description: Successful Response
          content:
            application/json:
              schema: {$ref: '#/components/schemas/LoginResponse'}
        '403': {description: Forbidden, content: {application/json: {schema: {$ref: '#/components/schemas/HTTPExceptionResponse'}}}}
components:
  schemas:
    HTTPExceptionResponse:
      type: object
      required: [detail]
      properties:
        detail:
          anyOf:
          - type: string
          - {type: object, additionalProperties: true}
    HTTPValidationError:
      type: object
      properties:
        detail:
          type: array
          items: {$ref: '#/components/schemas/ValidationError'}
    ValidationError:
      type: object
      required: [loc, msg, type]
      properties:
        loc: {type: array, items: {anyOf: [{type: string}, {type: integer}]}}
        msg: {type: string}
        type: {type: string}
    LoginBody:
      type: object
      additionalProperties: false
      required: [username, password]
      properties:
        username: {type: string}
        password: {type: string}
    LoginResponse:
      type: object
      required: [access_token]
      properties:
        access_token: {type: string}
`

// specs are the three documents the fakes validate against, loaded once.
type specs struct{ v1, v2, auth *openapi3.T }

var (
	specsOnce sync.Once
	specsVal  specs
	specsErr  error
)

func loadSpecs(t testing.TB) specs {
	t.Helper()
	dir := fixtureDir(t)
	specsOnce.Do(func() { specsVal, specsErr = readSpecs(dir) })
	if specsErr != nil {
		t.Fatal(specsErr)
	}
	return specsVal
}

func readSpecs(dir string) (specs, error) {
	var s specs
	var err error
	if s.v1, err = openapi3.NewLoader().LoadFromFile(filepath.Join(dir, "airflow2_v1_2.10.0.yaml")); err != nil {
		return s, fmt.Errorf("airflow2_v1_2.10.0.yaml: %w", err)
	}
	if s.v2, err = openapi3.NewLoader().LoadFromFile(filepath.Join(dir, "airflow3_v2_3.2.1rc1.yaml")); err != nil {
		return s, fmt.Errorf("airflow3_v2_3.2.1rc1.yaml: %w", err)
	}
	// The v2 copy says "openapi: 3.1.0" but writes nullability the 3.0
	// way ("nullable: true", where upstream has anyOf [X, null]). Under
	// 3.1 rules nullable is an unknown keyword and kin-openapi would refuse
	// every null, including the logical_date: null that Airflow 3 demands,
	// so the document is read by the 3.0 rules it is actually written in.
	s.v2.OpenAPI = "3.0.3"
	// The copy also empties TriggerDAGRunPostBody's required list, but the
	// server's pydantic model has logical_date without a default: it must
	// be present, though it may be null (NOTES.md, client CHANGELOG 3.0.0).
	// Restore that, so a body without it fails here as it would there.
	body := s.v2.Components.Schemas["TriggerDAGRunPostBody"]
	if body == nil || body.Value == nil || body.Value.Properties["logical_date"] == nil {
		return s, errors.New("airflow3_v2_3.2.1rc1.yaml: no TriggerDAGRunPostBody.logical_date")
	}
	body.Value.Required = []string{"logical_date"}
	// Some v2 operations (trigger_dag_run among them) declare the dag_id
	// path parameter with a schema of only a title. JSON Schema lets that
	// match anything, but kin-openapi decodes a parameter by its schema's
	// type and, finding none, reports the value as empty. A path segment
	// is a string, so say so.
	for _, item := range s.v2.Paths.Map() {
		for _, op := range item.Operations() {
			for _, p := range op.Parameters {
				if p.Value != nil && p.Value.In == openapi3.ParameterInPath && p.Value.Schema != nil &&
					p.Value.Schema.Value != nil && p.Value.Schema.Value.Type == nil {
					p.Value.Schema.Value.Type = &openapi3.Types{openapi3.TypeString}
				}
			}
		}
	}
	if s.auth, err = openapi3.NewLoader().LoadFromData([]byte(authManagerSpec)); err != nil {
		return s, fmt.Errorf("auth manager spec: %w", err)
	}
	// Neither fixture passes doc.Validate as it stands: both carry a
	// top-level security list naming schemes they do not declare (v1 says
	// GoogleOpenID but declares GoogleOpenId; the v2 copy keeps v1's list
	// while declaring only bearer schemes). Only the transcription is
	// checked whole.
	if err := s.auth.Validate(context.Background()); err != nil {
		return s, fmt.Errorf("auth manager spec: %w", err)
	}
	return s, nil
}

// fakeDAG is the one DAG the fakes know.
const fakeDAG = "events_daily_dag"

// Operations of the fake, for counters and fault injection.
const (
	opTrigger = "trigger"
	opGet     = "get"
	opLogin   = "login"
	opPatch   = "patch"
)

// fakeAirflow is one Airflow web server of one API version with one user.
type fakeAirflow struct {
	t         testing.TB
	api       string
	specs     specs
	user      string
	pass      string
	allAdmins bool // GET /auth/token issues a token (simple_auth_manager_all_admins)

	// finalState is where every run ends (default success); queuedFor and
	// runningFor are how many state polls see it queued, then running.
	finalState string
	queuedFor  int
	runningFor int
	// delay holds every answer back, to exercise timeouts.
	delay time.Duration
	// before, when set, sees every request before the fake handles it.
	before func(r *http.Request)

	mu      sync.Mutex
	runs    map[string]*fakeRun
	created map[string]int // runs created per run ID: must never exceed 1
	calls   map[string]int // requests per operation
	fail    map[string]int // operation -> 500s still to give
	tokens  map[string]bool
	seq     int

	srv *httptest.Server
}

type fakeRun struct {
	dag   string
	id    string
	conf  map[string]any
	polls int
	state string
	note  string
}

func newFake(t testing.TB, api string) *fakeAirflow {
	t.Helper()
	f := &fakeAirflow{
		t: t, api: api, specs: loadSpecs(t), user: "airflow-user", pass: "s3cret-Pa55",
		runs: map[string]*fakeRun{}, created: map[string]int{}, calls: map[string]int{},
		fail: map[string]int{}, tokens: map[string]bool{},
	}
	mux := http.NewServeMux()
	if api == "v1" {
		mux.Handle("POST /api/v1/dags/{dag_id}/dagRuns", f.endpoint(f.specs.v1, "/dags/{dag_id}/dagRuns", opTrigger, f.trigger))
		mux.Handle("GET /api/v1/dags/{dag_id}/dagRuns/{dag_run_id}", f.endpoint(f.specs.v1, "/dags/{dag_id}/dagRuns/{dag_run_id}", opGet, f.get))
		mux.Handle("PATCH /api/v1/dags/{dag_id}/dagRuns/{dag_run_id}", f.endpoint(f.specs.v1, "/dags/{dag_id}/dagRuns/{dag_run_id}", opPatch, f.patch))
	} else {
		mux.Handle("POST /api/v2/dags/{dag_id}/dagRuns", f.endpoint(f.specs.v2, "/api/v2/dags/{dag_id}/dagRuns", opTrigger, f.trigger))
		mux.Handle("GET /api/v2/dags/{dag_id}/dagRuns/{dag_run_id}", f.endpoint(f.specs.v2, "/api/v2/dags/{dag_id}/dagRuns/{dag_run_id}", opGet, f.get))
		mux.Handle("PATCH /api/v2/dags/{dag_id}/dagRuns/{dag_run_id}", f.endpoint(f.specs.v2, "/api/v2/dags/{dag_id}/dagRuns/{dag_run_id}", opPatch, f.patch))
		mux.Handle("POST /auth/token", f.endpoint(f.specs.auth, "/auth/token", opLogin, f.login))
		mux.Handle("GET /auth/token", f.endpoint(f.specs.auth, "/auth/token", opLogin, f.loginAllAdmins))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		f.problem("request to an endpoint the client should not use: %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// job is a refill job pointing at the fake, with its credentials in the
// environment that env returns.
func (f *fakeAirflow) job() (*refill.AirflowJob, func(string) string) {
	env := map[string]string{"AF_USER": f.user, "AF_PASS": f.pass}
	return &refill.AirflowJob{URL: f.srv.URL, DagID: fakeDAG, API: f.api, UsernameEnv: "AF_USER", PasswordEnv: "AF_PASS"},
		func(k string) string { return env[k] }
}

// problem fails the test from a handler's goroutine (Errorf, not Fatal,
// is safe there).
func (f *fakeAirflow) problem(format string, args ...any) {
	f.t.Errorf("fake Airflow %s: %s", f.api, fmt.Sprintf(format, args...))
}

func (f *fakeAirflow) count(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

func (f *fakeAirflow) createdRuns(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.created[id]
}

// failNext makes the next n requests of op answer 500. A failing trigger
// still creates the run first, like a server that committed and then lost
// the answer — the case where a blind retry would start a second run.
func (f *fakeAirflow) failNext(op string, n int) {
	f.mu.Lock()
	f.fail[op] = n
	f.mu.Unlock()
}

// revokeTokens makes every issued token invalid, as an expiry would.
func (f *fakeAirflow) revokeTokens() {
	f.mu.Lock()
	clear(f.tokens)
	f.mu.Unlock()
}

// seed creates a run as if an earlier attempt had triggered it.
func (f *fakeAirflow) seed(dag, id, state string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs[dag+"\x00"+id] = &fakeRun{dag: dag, id: id, state: state, conf: map[string]any{}}
	f.created[id]++
}

// answer is what a handler wants sent: a status and a JSON body.
type answer struct {
	status int
	body   any
}

// endpoint wraps a handler with the checks against specPath in doc:
// authentication by the operation's security requirements, the request
// (parameters, content type, body) and the answer.
func (f *fakeAirflow) endpoint(doc *openapi3.T, specPath, op string, h func(r *http.Request, body []byte) answer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.before != nil {
			f.before(r)
		}
		f.mu.Lock()
		f.calls[op]++
		f.mu.Unlock()
		body, err := io.ReadAll(r.Body)
		if err != nil {
			f.problem("reading the request: %v", err)
			return
		}
		// Delay only once the body is read: net/http notices a client
		// hanging up (and cancels r.Context) only after that.
		if f.delay > 0 {
			select {
			case <-time.After(f.delay):
			case <-r.Context().Done():
				return
			}
		}
		input, err := f.route(doc, specPath, r, body)
		if err != nil {
			f.problem("%v", err)
			w.WriteHeader(http.StatusNotFound)
			return
		}
		var a answer
		if err := f.authenticate(input); err != nil {
			a = answer{http.StatusUnauthorized, f.errorBody(http.StatusUnauthorized, "Not authenticated")}
		} else if err := validateRequest(input, body); err != nil {
			f.problem("%s %s: a request the real API would reject: %v\nbody: %s", r.Method, r.URL.Path, err, body)
			a = f.badRequest(err)
		} else if f.takeFailure(op) {
			if op == opTrigger {
				h(r, body) // commit, then lose the answer
			}
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, "Internal Server Error") // as a proxy would: no JSON, not in the spec
			return
		} else {
			a = h(r, body)
		}
		out, err := json.Marshal(a.body)
		if err != nil {
			f.problem("encoding the answer: %v", err)
			return
		}
		if err := validateResponse(input, a.status, out); err != nil {
			f.problem("%s %s: an answer the real API would not give: %v\nbody: %s", r.Method, r.URL.Path, err, out)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		w.Write(out)
	})
}

// route builds kin-openapi's route for the request by the path template
// it was registered under, failing if the spec has no such operation.
func (f *fakeAirflow) route(doc *openapi3.T, specPath string, r *http.Request, body []byte) (*openapi3filter.RequestValidationInput, error) {
	item := doc.Paths.Value(specPath)
	if item == nil {
		return nil, fmt.Errorf("the spec has no path %s", specPath)
	}
	op := item.GetOperation(r.Method)
	if op == nil {
		return nil, fmt.Errorf("the spec has no %s %s", r.Method, specPath)
	}
	params := map[string]string{}
	for _, p := range []string{"dag_id", "dag_run_id"} {
		if v := r.PathValue(p); v != "" {
			params[p] = v
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return &openapi3filter.RequestValidationInput{
		Request:    r,
		PathParams: params,
		Route:      &routers.Route{Spec: doc, Path: specPath, PathItem: item, Method: r.Method, Operation: op},
	}, nil
}

// authenticate applies the operation's security requirements (or the
// document's, for v1) the way the real server would: Basic for Airflow 2,
// a bearer token the fake issued for Airflow 3.
func (f *fakeAirflow) authenticate(input *openapi3filter.RequestValidationInput) error {
	sec := input.Route.Operation.Security
	if sec == nil {
		sec = &input.Route.Spec.Security
	}
	if len(*sec) == 0 {
		return nil
	}
	input.Options = &openapi3filter.Options{AuthenticationFunc: func(_ context.Context, ai *openapi3filter.AuthenticationInput) error {
		r := ai.RequestValidationInput.Request
		s := ai.SecurityScheme
		switch {
		case s.Type == "http" && s.Scheme == "basic":
			u, p, ok := r.BasicAuth()
			if ok && u == f.user && p == f.pass {
				return nil
			}
		case s.Type == "oauth2" || (s.Type == "http" && s.Scheme == "bearer"):
			tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			f.mu.Lock()
			valid := ok && f.tokens[tok]
			f.mu.Unlock()
			if valid {
				return nil
			}
		}
		return ai.NewError(nil)
	}}
	err := openapi3filter.ValidateSecurityRequirements(context.Background(), input, *sec)
	input.Options = nil
	return err
}

// validateRequest checks parameters, content type and body against the
// spec. Authentication has been decided already.
func validateRequest(input *openapi3filter.RequestValidationInput, body []byte) error {
	input.Request.Body = io.NopCloser(bytes.NewReader(body))
	input.Options = &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}
	return openapi3filter.ValidateRequest(context.Background(), input)
}

// validateResponse checks an answer: its status must be one the operation
// declares and its body must match that status's schema.
func validateResponse(input *openapi3filter.RequestValidationInput, status int, body []byte) error {
	h := http.Header{"Content-Type": {"application/json"}}
	return openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: input,
		Status:                 status,
		Header:                 h,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	})
}

func (f *fakeAirflow) takeFailure(op string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail[op] > 0 {
		f.fail[op]--
		return true
	}
	return false
}

// errorBody is the API's error shape: RFC 7807 Error for Airflow 2,
// HTTPExceptionResponse for Airflow 3.
func (f *fakeAirflow) errorBody(status int, detail string) any {
	if f.api == "v1" {
		return map[string]any{"type": "https://airflow.apache.org/docs/apache-airflow/2.10.0/stable-rest-api-ref.html#section/Errors/" + strings.ReplaceAll(http.StatusText(status), " ", ""),
			"title": http.StatusText(status), "status": status, "detail": detail}
	}
	return map[string]any{"detail": detail}
}

// badRequest is how each API refuses a body: 400 BadRequest in Airflow 2,
// 422 HTTPValidationError in Airflow 3.
func (f *fakeAirflow) badRequest(err error) answer {
	if f.api == "v1" {
		return answer{http.StatusBadRequest, f.errorBody(http.StatusBadRequest, err.Error())}
	}
	return answer{http.StatusUnprocessableEntity, map[string]any{"detail": []any{
		map[string]any{"loc": []any{"body"}, "msg": err.Error(), "type": "value_error"}}}}
}

func (f *fakeAirflow) trigger(r *http.Request, body []byte) answer {
	var req struct {
		DagRunID string         `json:"dag_run_id"`
		Conf     map[string]any `json:"conf"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.DagRunID == "" {
		// Valid by the spec, but refill must always name its run.
		f.problem("trigger without a dag_run_id: %s", body)
		return f.badRequest(errors.New("no dag_run_id"))
	}
	dag := r.PathValue("dag_id")
	if dag != fakeDAG {
		return answer{http.StatusNotFound, f.errorBody(http.StatusNotFound, fmt.Sprintf("DAG with dag_id: '%s' not found", dag))}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := dag + "\x00" + req.DagRunID
	if _, ok := f.runs[key]; ok {
		return answer{http.StatusConflict, f.errorBody(http.StatusConflict,
			fmt.Sprintf("DAGRun with DAG ID: '%s' and DAGRun ID: '%s' already exists", dag, req.DagRunID))}
	}
	run := &fakeRun{dag: dag, id: req.DagRunID, conf: req.Conf, state: "queued"}
	f.runs[key] = run
	f.created[req.DagRunID]++
	return answer{http.StatusOK, f.dagRun(run)}
}

func (f *fakeAirflow) get(r *http.Request, _ []byte) answer {
	dag, id := r.PathValue("dag_id"), r.PathValue("dag_run_id")
	f.mu.Lock()
	defer f.mu.Unlock()
	run, ok := f.runs[dag+"\x00"+id]
	if !ok {
		return answer{http.StatusNotFound, f.errorBody(http.StatusNotFound, fmt.Sprintf("DAGRun with DAG ID: '%s' and DagRun ID: '%s' not found", dag, id))}
	}
	run.polls++
	if run.state == "queued" || run.state == "running" {
		switch final := f.finalState; {
		case run.polls <= f.queuedFor:
			run.state = "queued"
		case run.polls <= f.queuedFor+f.runningFor:
			run.state = "running"
		case final == "":
			run.state = "success"
		default:
			run.state = final
		}
	}
	return answer{http.StatusOK, f.dagRun(run)}
}

// patch sets a run's state, as update_dag_run_state (v1) and
// patch_dag_run (v2) do.
func (f *fakeAirflow) patch(r *http.Request, body []byte) answer {
	var req struct {
		State string `json:"state"`
		Note  string `json:"note"`
	}
	_ = json.Unmarshal(body, &req) // the spec check has passed
	dag, id := r.PathValue("dag_id"), r.PathValue("dag_run_id")
	f.mu.Lock()
	defer f.mu.Unlock()
	run, ok := f.runs[dag+"\x00"+id]
	if !ok {
		return answer{http.StatusNotFound, f.errorBody(http.StatusNotFound, fmt.Sprintf("DAGRun with DAG ID: '%s' and DagRun ID: '%s' not found", dag, id))}
	}
	run.state = req.State
	run.note = req.Note
	return answer{http.StatusOK, f.dagRun(run)}
}

// state returns a run's state, "" if there is no such run.
func (f *fakeAirflow) state(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if run, ok := f.runs[fakeDAG+"\x00"+id]; ok {
		return run.state
	}
	return ""
}

// dagRun renders a run as DAGRun (v1) or DAGRunResponse (v2), with every
// field the real server fills, so that the response check covers them.
func (f *fakeAirflow) dagRun(run *fakeRun) map[string]any {
	const at = "2026-11-05T10:00:00+00:00"
	var end any
	if run.state == "success" || run.state == "failed" {
		end = "2026-11-05T10:05:00+00:00"
	}
	if f.api == "v1" {
		return map[string]any{
			"dag_id": run.dag, "dag_run_id": run.id, "conf": run.conf, "state": run.state,
			"logical_date": at, "execution_date": at, "start_date": at, "end_date": end,
			"data_interval_start": at, "data_interval_end": at, "last_scheduling_decision": nil,
			"run_type": "manual", "external_trigger": true, "note": nil,
		}
	}
	return map[string]any{
		"dag_id": run.dag, "dag_display_name": run.dag, "dag_run_id": run.id, "conf": run.conf, "state": run.state,
		"logical_date": nil, "run_after": at, "queued_at": at, "start_date": at, "end_date": end, "duration": nil,
		"data_interval_start": nil, "data_interval_end": nil, "last_scheduling_decision": nil,
		"run_type": "manual", "triggered_by": "rest_api", "triggering_user_name": f.user,
		"note": noteOf(run), "bundle_version": nil, "partition_key": nil,
		"dag_versions": []any{map[string]any{
			"id": "0b9d6a3e-5f0e-4c1b-9a52-2d7d1c6a8f10", "version_number": 1, "dag_id": run.dag,
			"dag_display_name": run.dag, "created_at": at, "bundle_name": "dags-folder",
			"bundle_url": nil, "bundle_version": nil,
		}},
	}
}

func noteOf(run *fakeRun) any {
	if run.note == "" {
		return nil
	}
	return run.note
}

func (f *fakeAirflow) login(_ *http.Request, body []byte) answer {
	var lb struct{ Username, Password string }
	_ = json.Unmarshal(body, &lb) // the spec check has passed
	if lb.Username != f.user || lb.Password != f.pass {
		return answer{http.StatusUnauthorized, map[string]any{"detail": "Invalid credentials"}}
	}
	return f.issue()
}

func (f *fakeAirflow) loginAllAdmins(*http.Request, []byte) answer {
	if !f.allAdmins {
		return answer{http.StatusForbidden, map[string]any{"detail": "This method is only allowed if ``[core] simple_auth_manager_all_admins`` is True"}}
	}
	return f.issue()
}

func (f *fakeAirflow) issue() answer {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	tok := fmt.Sprintf("eyJhbGciOiJIUzUxMiJ9.fake-%d.sig", f.seq)
	f.tokens[tok] = true
	return answer{http.StatusCreated, map[string]any{"access_token": tok}}
}
