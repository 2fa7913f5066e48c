package server_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/demo"
	"github.com/refill-dev/refill/internal/apitest"
	"github.com/refill-dev/refill/internal/pgtest"
	"github.com/refill-dev/refill/planner"
	"github.com/refill-dev/refill/project"
	"github.com/refill-dev/refill/server"
)

// apiEnv is a served demo project and a token per demo user.
type apiEnv struct {
	t      testing.TB
	p      *project.Project
	sc     *demo.Scenario
	srv    *server.Server
	url    string
	tokens map[string]string
}

// apiServe writes the demo, opens it (on a PostgreSQL state store when
// stateDSN is set) and serves it.
func apiServe(t *testing.T, stateDSN string) *apiEnv { return apiServeB(t, stateDSN) }

// apiServeB is apiServe for tests and benchmarks.
func apiServeB(t testing.TB, stateDSN string) *apiEnv {
	t.Helper()
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	sc := demoCopy(t, now)
	if stateDSN != "" {
		b, err := os.ReadFile(sc.Config)
		if err != nil {
			t.Fatal(err)
		}
		b = bytes.Replace(b, []byte("state: sqlite:.refill/state.db"), []byte("state: "+stateDSN), 1)
		if err := os.WriteFile(sc.Config, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p, err := project.Open(ctx, project.Options{Config: sc.Config, Now: func() time.Time { return now },
		Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	srv := server.New(&server.Server{Config: p.Config, Store: p.Store, Control: p.Control, Runner: p.Runner})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	})
	e := &apiEnv{t: t, p: p, sc: sc, srv: srv, url: hs.URL, tokens: map[string]string{}}
	for _, u := range []string{"alice", "bob", "carol"} {
		tok, _, err := p.Control.CreateToken(ctx, u, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		e.tokens[u] = tok
	}
	return e
}

// callB is call on behalf of a benchmark.
func (e *apiEnv) callB(_ testing.TB, user, method, path, body string) (int, map[string]any) {
	return e.call(user, method, path, body)
}

// call sends a request as user ("" for none) and decodes a JSON answer.
func (e *apiEnv) call(user, method, path, body string) (int, map[string]any) {
	e.t.Helper()
	status, raw := e.raw(user, method, path, "application/json", strings.NewReader(body))
	var out map[string]any
	if len(raw) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, &out); err != nil {
			e.t.Fatalf("%s %s: %v in %s", method, path, err, raw)
		}
	}
	return status, out
}

func (e *apiEnv) raw(user, method, path, contentType string, body io.Reader) (int, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if user != "" {
		tok := e.tokens[user]
		if tok == "" {
			tok = user // a literal token
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	var sent []byte
	if body != nil {
		var err error
		if sent, err = io.ReadAll(body); err != nil {
			e.t.Fatal(err)
		}
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(sent)), int64(len(sent))
		if len(sent) == 0 {
			req.Body = http.NoBody
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	apitest.Check(e.t, req, sent, resp.StatusCode, resp.Header, b)
	return resp.StatusCode, b
}

// wantError checks an error answer: HTTP status and the CLI's exit code.
func wantError(t *testing.T, what string, status int, body map[string]any, wantStatus, wantCode int) {
	t.Helper()
	if status != wantStatus {
		t.Errorf("%s: HTTP %d, want %d (%v)", what, status, wantStatus, body["error"])
	}
	if code, _ := body["code"].(float64); int(code) != wantCode {
		t.Errorf("%s: code %v, want %d", what, body["code"], wantCode)
	}
	if msg, _ := body["error"].(string); msg == "" {
		t.Errorf("%s: no error message in %v", what, body)
	}
}

func (e *apiEnv) status(id string) refill.Status {
	e.t.Helper()
	p, err := e.p.Store.Plan(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return p.Status
}

func (e *apiEnv) auditLen() int {
	e.t.Helper()
	rep, err := e.p.Store.VerifyAudit(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return int(rep.Entries)
}

func TestAPIPlanApproveApplyReport(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			dsn := ""
			if store == "postgres" {
				dsn = pgtest.Schema(t)
			}
			e := apiServe(t, dsn)
			body := `{"targets":["sessions"],"from":"` + e.sc.Day(12) + `","to":"` + e.sc.Day(10) + `","reason":"late sessions"}`
			status, plan := e.call("alice", "POST", "/api/v1/plans", body)
			if status != http.StatusCreated {
				t.Fatalf("create: HTTP %d: %v", status, plan)
			}
			id, _ := plan["id"].(string)
			if plan["status"] != "pending" || plan["tier"] != "semi-auto" || len(plan["steps"].([]any)) == 0 {
				t.Fatalf("created plan: status %v tier %v steps %v", plan["status"], plan["tier"], plan["steps"])
			}
			if req := plan["request"].(map[string]any); req["requested_by"] != "alice" || req["reason"] != "late sessions" {
				t.Errorf("request: %v", req)
			}
			// Self-approval: 403 with the CLI's code 4, nothing changes.
			before := e.auditLen()
			st, res := e.call("alice", "POST", "/api/v1/plans/"+id+"/approve", `{"note":"mine"}`)
			wantError(t, "self-approval", st, res, http.StatusForbidden, refill.ExitNotPermitted)
			if e.status(id) != refill.StatusPending || e.auditLen() != before {
				t.Errorf("a refused approval changed the plan (%s) or the log (%d -> %d)", e.status(id), before, e.auditLen())
			}
			// Apply before approval: refused at once.
			st, res = e.call("bob", "POST", "/api/v1/plans/"+id+"/apply", "")
			wantError(t, "apply unapproved", st, res, http.StatusForbidden, refill.ExitNotPermitted)
			if st, res = e.call("bob", "POST", "/api/v1/plans/"+id+"/approve", `{"note":"checked the counts"}`); st != http.StatusOK || res["status"] != "approved" {
				t.Fatalf("approve by bob: HTTP %d %v", st, res)
			}
			if st, res = e.call("bob", "POST", "/api/v1/plans/"+id+"/apply", ""); st != http.StatusAccepted {
				t.Fatalf("apply: HTTP %d %v", st, res)
			}
			deadline := time.Now().Add(60 * time.Second)
			for e.status(id) != refill.StatusApplied {
				if time.Now().After(deadline) {
					t.Fatalf("the run did not finish: %s", e.status(id))
				}
				time.Sleep(50 * time.Millisecond)
			}
			st, got := e.call("carol", "GET", "/api/v1/plans/"+id, "")
			prog, _ := got["progress"].(map[string]any)
			if st != http.StatusOK || got["status"] != "applied" || prog["published"] != prog["partitions"] || prog["published"].(float64) != 3 {
				t.Errorf("after the run: HTTP %d status %v progress %v", st, got["status"], prog)
			}
			st, rep := e.call("carol", "GET", "/api/v1/plans/"+id+"/report", "")
			if st != http.StatusOK || rep["published"].(float64) != 3 || rep["status"] != "applied" {
				t.Errorf("report: HTTP %d %v", st, rep)
			}
			st, hist := e.call("carol", "GET", "/api/v1/history?dataset=sessions&partition="+e.sc.Day(11), "")
			if plans, _ := hist["plans"].([]any); st != http.StatusOK || len(plans) != 1 || plans[0].(map[string]any)["plan_id"] != id {
				t.Errorf("history: HTTP %d %v", st, hist)
			}
			st, list := e.raw("carol", "GET", "/api/v1/plans?status=applied", "", nil)
			if st != http.StatusOK || !bytes.Contains(list, []byte(id)) {
				t.Errorf("list: HTTP %d, plan %s missing", st, id)
			}
		})
	}
}

func TestAPIErrors(t *testing.T) {
	t.Parallel()
	e := apiServe(t, "")
	ctx := context.Background()
	good := `{"targets":["sessions"],"from":"` + e.sc.Day(12) + `","to":"` + e.sc.Day(10) + `","reason":"late sessions"}`
	before := e.auditLen()

	// 401: no token, a malformed header, an unknown token, a revoked one.
	st, res := e.call("", "GET", "/api/v1/plans", "")
	wantError(t, "no token", st, res, http.StatusUnauthorized, refill.ExitNotPermitted)
	st, res = e.call("rfl_0000_not-a-token", "GET", "/api/v1/plans", "")
	wantError(t, "unknown token", st, res, http.StatusUnauthorized, refill.ExitNotPermitted)
	tok, info, err := e.p.Control.CreateToken(ctx, "alice", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.p.Control.RevokeToken(ctx, info.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	st, res = e.call(tok, "GET", "/api/v1/plans", "")
	wantError(t, "revoked token", st, res, http.StatusUnauthorized, refill.ExitNotPermitted)
	before = e.auditLen()

	// 400: bad dates, malformed JSON, unknown fields, two documents, a
	// body over the limit, the wrong content type. Nothing is planned.
	for _, c := range []struct{ what, body string }{
		{"bad dates", `{"targets":["sessions"],"from":"2026-13-01","to":"2026-11-03","reason":"x"}`},
		{"malformed JSON", `{"targets":["sessions"],`},
		{"unknown field", `{"targets":["sessions"],"from":"2026-11-01","to":"2026-11-03","reason":"x","force":true}`},
		{"two documents", good + good},
		{"no targets", `{"from":"2026-11-01","to":"2026-11-03","reason":"x"}`},
		{"empty body", ``},
		{"oversized", `{"targets":["sessions"],"reason":"` + strings.Repeat("x", server.MaxBody) + `"}`},
		{"a field in another case", `{"targets":["sessions"],"from":"2026-11-01","to":"2026-11-03","reason":"x","REASON":"y"}`},
		{"a field given twice", `{"targets":["sessions"],"from":"2026-11-01","to":"2026-11-03","reason":"reviewed","reason":"rubber stamp"}`},
		{"no reason", `{"targets":["sessions"],"from":"` + e.sc.Day(12) + `","to":"` + e.sc.Day(10) + `","reason":"  "}`},
		{"a bad exclude", `{"targets":["sessions"],"exclude":["nope"],"from":"` + e.sc.Day(12) + `","to":"` + e.sc.Day(10) + `","reason":"x"}`},
	} {
		st, res := e.call("alice", "POST", "/api/v1/plans", c.body)
		wantError(t, c.what, st, res, http.StatusBadRequest, refill.ExitBadInput)
		// The API's words: the body's keys, not the command line's flags.
		if msg, _ := res["error"].(string); strings.Contains(msg, "--") {
			t.Errorf("%s: %q names a command-line flag", c.what, msg)
		}
	}
	st, raw := e.raw("alice", "POST", "/api/v1/plans", "text/plain", strings.NewReader(good))
	if st != http.StatusBadRequest || !bytes.Contains(raw, []byte("Content-Type")) {
		t.Errorf("text/plain body: HTTP %d %s", st, raw)
	}
	if n := e.auditLen(); n != before {
		t.Errorf("bad input changed the audit log: %d -> %d entries", before, n)
	}

	// 400 on a list's query: a status no plan can have (not an empty
	// page), a limit that is no count.
	for _, q := range []string{"status=bogus", "status=Applied", "limit=0", "limit=x"} {
		st, res := e.call("alice", "GET", "/api/v1/plans?"+q, "")
		wantError(t, q, st, res, http.StatusBadRequest, refill.ExitBadInput)
		if msg, _ := res["error"].(string); strings.HasPrefix(q, "status") && !strings.Contains(msg, "rolled_back") {
			t.Errorf("%s: %q does not list the statuses", q, msg)
		}
	}

	// 404: an unknown plan, an unknown route.
	st, res = e.call("alice", "GET", "/api/v1/plans/deadbeef", "")
	wantError(t, "unknown plan", st, res, http.StatusNotFound, refill.ExitBadInput)
	st, res = e.call("alice", "GET", "/api/v1/nothing", "")
	wantError(t, "unknown route", st, res, http.StatusNotFound, refill.ExitBadInput)
	st, res = e.call("alice", "GET", "/api/v1/plans/deadbeef/approve", "")
	wantError(t, "GET on a POST route", st, res, http.StatusMethodNotAllowed, refill.ExitBadInput)

	// 409 blocked: the broken range fails the source gate; the plan is
	// stored and returned beside the error.
	st, res = e.call("alice", "POST", "/api/v1/plans", `{"targets":["events_raw"],"from":"`+e.sc.BrokenFrom+`","to":"`+e.sc.BrokenTo+`","reason":"the incident"}`)
	wantError(t, "blocked", st, res, http.StatusConflict, refill.ExitBlocked)
	if p, _ := res["plan"].(map[string]any); p == nil || p["status"] != "blocked" {
		t.Errorf("blocked: the plan is not in the answer: %v", res["plan"])
	}

	// 409 locked: an approved plan holds its partitions; an overlapping
	// request cannot be approved until it is done.
	_, first := e.call("alice", "POST", "/api/v1/plans", good)
	if st, res := e.call("bob", "POST", "/api/v1/plans/"+first["id"].(string)+"/approve", ""); st != http.StatusOK {
		t.Fatalf("approve: %d %v", st, res)
	}
	st, second := e.call("alice", "POST", "/api/v1/plans", `{"targets":["sessions"],"from":"`+e.sc.Day(13)+`","to":"`+e.sc.Day(11)+`","reason":"overlapping"}`)
	id2, _ := second["id"].(string)
	if id2 == "" {
		t.Fatalf("overlapping plan: HTTP %d %v", st, second)
	}
	st, res = e.call("bob", "POST", "/api/v1/plans/"+id2+"/approve", "")
	wantError(t, "locked", st, res, http.StatusConflict, refill.ExitNotPermitted)
	if e.status(id2) != refill.StatusPending {
		t.Errorf("a locked approval changed the plan: %s", e.status(id2))
	}

	// 422: a proof of a job that is not idempotent fails, with evidence.
	st, res = e.call("alice", "POST", "/api/v1/datasets/revenue_daily/prove", `{"partition":"`+e.sc.Day(20)+`"}`)
	wantError(t, "failing proof", st, res, http.StatusUnprocessableEntity, refill.ExitVerification)
	if res["proof"] == nil {
		t.Errorf("failing proof: no evidence in the answer")
	}

	// 500: the state store is gone; the message does not leak details
	// beyond saying it is internal.
	e.p.Store.DB().Close()
	st, res = e.call("alice", "GET", "/api/v1/plans", "")
	if st == http.StatusUnauthorized {
		// Authentication reads the store first.
		st, res = e.call("alice", "GET", "/api/v1/plans", "")
	}
	wantError(t, "state store down", st, res, http.StatusInternalServerError, refill.ExitInternal)
}

// TestAPIProveCommandJob proves the demo's partner export, a command job,
// over HTTP: the server proves it against proof_warehouse as refill prove
// does, with the export's input copied there first, and never runs it on
// the production warehouse.
func TestAPIProveCommandJob(t *testing.T) {
	t.Parallel()
	e := apiServe(t, "")
	day := e.sc.Day(20)
	scalar := func(db, query string) int64 {
		t.Helper()
		conn, err := sql.Open("sqlite", filepath.Join(e.sc.Dir, db))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var n int64
		if err := conn.QueryRow(query, day).Scan(&n); err != nil {
			t.Fatalf("%s: %s: %v", db, query, err)
		}
		return n
	}
	input := scalar("warehouse.db", `SELECT count(*) FROM events_daily WHERE day = ?`)
	exported := scalar("warehouse.db", `SELECT rows_exported FROM partner_feed WHERE day = ?`)

	st, res := e.call("alice", "POST", "/api/v1/datasets/partner_feed/prove", `{"partition":"`+day+`"}`)
	if st != http.StatusOK || res["passed"] != true || res["kind"] != "command" {
		t.Fatalf("prove partner_feed: HTTP %d %v", st, res)
	}
	if w, _ := res["warehouse"].(string); !strings.HasPrefix(w, "proof_warehouse sqlite:") || !strings.HasSuffix(w, "scratch.db") {
		t.Errorf("the proof ran in %q, want proof_warehouse", w)
	}
	// The export writes one line per events_daily row of its day: it saw
	// the day's rows in the proof warehouse because they were copied there.
	if input == 0 {
		t.Fatalf("the demo has no events_daily rows on %s", day)
	}
	if got := scalar("scratch.db", `SELECT count(*) FROM events_daily WHERE day = ?`); got != input {
		t.Errorf("proof_warehouse has %d events_daily rows on %s, want the warehouse's %d", got, day, input)
	}
	if got := scalar("scratch.db", `SELECT rows_exported FROM partner_feed WHERE day = ?`); got != input {
		t.Errorf("the export in proof_warehouse recorded %d rows, want %d", got, input)
	}
	if got := scalar("warehouse.db", `SELECT rows_exported FROM partner_feed WHERE day = ?`); got != exported {
		t.Errorf("the proof changed the production partner_feed: %d -> %d", exported, got)
	}
	proofs, err := e.p.Store.Proofs(context.Background(), "partner_feed")
	if err != nil || len(proofs) != 1 || !proofs[0].Passed || proofs[0].ProvenBy != "alice" {
		t.Errorf("stored proofs: %+v (%v), want alice's passing proof", proofs, err)
	}
}

func TestAPIAirflowTrigger(t *testing.T) {
	t.Parallel()
	e := apiServe(t, "")
	for _, c := range []struct {
		what, body, from, to string
	}{
		{"conf", `{"dag_run_id":"manual__1","logical_date":"2026-11-20T00:00:00Z","conf":{"start_date":"` + e.sc.Day(12) + `","end_date":"` + e.sc.Day(10) + `"},"note":"late sessions"}`, e.sc.Day(12), e.sc.Day(10)},
		{"data interval (end excluded)", `{"data_interval_start":"` + e.sc.Day(30) + `T00:00:00Z","data_interval_end":"` + e.sc.Day(28) + `T00:00:00Z","note":"two days","run_after":"2026-11-20T00:00:00Z"}`, e.sc.Day(30), e.sc.Day(29)},
	} {
		st, res := e.call("alice", "POST", "/api/v1/dags/sessions/dagRuns", c.body)
		if st != http.StatusCreated {
			t.Fatalf("%s: HTTP %d %v", c.what, st, res)
		}
		plan, _ := res["plan"].(map[string]any)
		req, _ := plan["request"].(map[string]any)
		if res["dag_id"] != "sessions" || plan["status"] != "pending" || req["from"] != c.from || req["to"] != c.to || req["reason"] != res["note"] {
			t.Errorf("%s: %v", c.what, res)
		}
		// It planned: nothing ran.
		if p, err := e.p.Store.Published(context.Background(), plan["id"].(string)); err != nil || len(p) != 0 {
			t.Errorf("%s: the trigger ran the plan (%d published, %v)", c.what, len(p), err)
		}
	}
	for _, c := range []struct{ what, body string }{
		{"no range", `{"note":"x"}`},
		{"half a conf", `{"conf":{"start_date":"2026-11-01"},"note":"x"}`},
		{"empty interval", `{"data_interval_start":"2026-11-02T00:00:00Z","data_interval_end":"2026-11-02T00:00:00Z","note":"x"}`},
		{"not Airflow's", `{"conf":{"start_date":"2026-11-01","end_date":"2026-11-02"},"note":"x","run_now":true}`},
	} {
		st, res := e.call("alice", "POST", "/api/v1/dags/sessions/dagRuns", c.body)
		wantError(t, c.what, st, res, http.StatusBadRequest, refill.ExitBadInput)
	}
	st, res := e.call("alice", "POST", "/api/v1/dags/nope/dagRuns", `{"conf":{"start_date":"2026-11-01","end_date":"2026-11-02"},"note":"x"}`)
	if st != http.StatusBadRequest && st != http.StatusNotFound {
		t.Errorf("unknown dataset: HTTP %d %v", st, res)
	}
}

// TestAPIRangeRules: POST /plans and the DAG-run trigger refuse, as the
// CLI does (400, code 2), hours for a dataset partitioned by day — naming
// its grain and the dataset — a range that starts after the last partition
// that could exist, naming it, and a year out of bounds; nothing is
// planned.
func TestAPIRangeRules(t *testing.T) {
	t.Parallel()
	e := apiServe(t, "")
	before := e.auditLen()
	tomorrow := time.Now().UTC().AddDate(0, 0, 1).Format("2006-01-02")
	after := time.Now().UTC().AddDate(0, 0, 2).Format("2006-01-02")
	today := time.Now().UTC().Format("2006-01-02")
	hour := e.sc.Day(12) + "T05"
	for _, c := range []struct{ what, path, body, says string }{
		{"hours for a day dataset", "/api/v1/plans", `{"targets":["sessions"],"from":"` + hour + `","to":"` + hour + `","reason":"r"}`, "sessions is partitioned by day"},
		{"hours for a day DAG", "/api/v1/dags/sessions/dagRuns", `{"conf":{"start_date":"` + hour + `","end_date":"` + hour + `"},"note":"r"}`, "sessions is partitioned by day"},
		{"a range to come", "/api/v1/plans", `{"targets":["sessions"],"from":"` + tomorrow + `","to":"` + tomorrow + `","reason":"r"}`, "is after " + today + ", the last partition that could exist yet"},
		{"a DAG run to come", "/api/v1/dags/sessions/dagRuns", `{"data_interval_start":"` + tomorrow + `T00:00:00Z","data_interval_end":"` + after + `T00:00:00Z","note":"r"}`, "is after " + today},
		{"year 9999", "/api/v1/plans", `{"targets":["sessions"],"from":"9999-12-30","to":"9999-12-31","reason":"r"}`, "in the year 9999"},
		{"year 0000", "/api/v1/dags/sessions/dagRuns", `{"conf":{"start_date":"0000-01-01","end_date":"0000-01-05"},"note":"r"}`, "in the year 0000"},
	} {
		st, res := e.call("alice", "POST", c.path, c.body)
		wantError(t, c.what, st, res, http.StatusBadRequest, refill.ExitBadInput)
		if msg, _ := res["error"].(string); !strings.Contains(msg, c.says) {
			t.Errorf("%s: %q, want it to say %q", c.what, msg, c.says)
		}
	}
	if n := e.auditLen(); n != before {
		t.Errorf("refused ranges changed the audit log: %d -> %d entries", before, n)
	}
}

func TestAPICancelAndFreeze(t *testing.T) {
	t.Parallel()
	e := apiServe(t, "")
	ctx := context.Background()
	plan, err := e.p.Control.Plan(ctx, "alice", planner.Request{Targets: []string{"sessions"}, From: e.sc.Day(12), To: e.sc.Day(10), Reason: "late sessions"})
	if err != nil {
		t.Fatal(err)
	}
	// Someone who neither asked nor approved, and is no lead, may not.
	st, res := e.call("bob", "POST", "/api/v1/plans/"+plan.ID+"/cancel", `{"reason":"not mine"}`)
	wantError(t, "cancel by a bystander", st, res, http.StatusForbidden, refill.ExitNotPermitted)
	st, res = e.call("alice", "POST", "/api/v1/plans/"+plan.ID+"/cancel", `{}`)
	wantError(t, "cancel without a reason", st, res, http.StatusBadRequest, refill.ExitBadInput)
	if st, res = e.call("alice", "POST", "/api/v1/plans/"+plan.ID+"/cancel", `{"reason":"wrong range"}`); st != http.StatusOK || res["status"] != "cancelled" {
		t.Fatalf("cancel: HTTP %d %v", st, res)
	}
	st, res = e.call("bob", "POST", "/api/v1/plans/"+plan.ID+"/approve", "")
	wantError(t, "approve a cancelled plan", st, res, http.StatusForbidden, refill.ExitNotPermitted)

	// Freeze: leads only; shown on /healthz and in every plan's state.
	st, res = e.call("alice", "POST", "/api/v1/freeze", `{"reason":"quarter close"}`)
	wantError(t, "freeze by an engineer", st, res, http.StatusForbidden, refill.ExitNotPermitted)
	if st, res = e.call("carol", "POST", "/api/v1/freeze", `{"reason":"quarter close"}`); st != http.StatusOK || res["frozen"] != true {
		t.Fatalf("freeze: HTTP %d %v", st, res)
	}
	_, health := e.call("", "GET", "/healthz", "")
	if f, _ := health["frozen"].(map[string]any); f["reason"] != "quarter close" {
		t.Errorf("healthz does not show the freeze: %v", health)
	}
	if st, res = e.call("carol", "DELETE", "/api/v1/freeze", `{"reason":"closed"}`); st != http.StatusOK || res["frozen"] != false {
		t.Fatalf("unfreeze: HTTP %d %v", st, res)
	}
	st, res = e.call("carol", "DELETE", "/api/v1/freeze", "")
	wantError(t, "unfreeze when not frozen", st, res, http.StatusForbidden, refill.ExitNotPermitted)
}

func TestAPIMetrics(t *testing.T) {
	t.Parallel()
	e := apiServe(t, "")
	// Before anything happened, every labelled series is there at zero.
	_, fresh := e.raw("", "GET", "/metrics", "", nil)
	for _, want := range []string{
		`refill_runs_total{outcome="failed"} 0`,
		`refill_runs_total{outcome="applied"} 0`,
		`refill_gate_failures_total{at="apply"} 0`,
		`refill_partition_duration_seconds_count{dataset="sessions"} 0`,
		`refill_plans{status="rolled_back",tier="manual"} 0`,
		`refill_http_request_duration_seconds_count{method="POST",route="POST /api/v1/plans/{id}/apply",status="202"} 0`,
		`refill_http_request_duration_seconds_count{method="POST",route="POST /api/v1/plans",status="201"} 0`,
	} {
		if !bytes.Contains(fresh, []byte(want)) {
			t.Errorf("a fresh server's metrics lack %s", want)
		}
	}
	e.call("alice", "POST", "/api/v1/plans", `{"targets":["sessions"],"from":"`+e.sc.Day(12)+`","to":"`+e.sc.Day(10)+`","reason":"late sessions"}`)
	st, body := e.raw("", "GET", "/metrics", "", nil)
	if st != http.StatusOK {
		t.Fatalf("metrics: HTTP %d", st)
	}
	for _, want := range []string{
		`refill_plans{status="pending",tier="semi-auto"} 1`,
		`refill_http_request_duration_seconds_count{method="POST",route="POST /api/v1/plans",status="201"} 1`,
	} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestAPIAccept: refill accept over HTTP, as the token's user, with the
// CLI's rules: a failing finding is accepted (201) and shows in history;
// a passing check, a missing reason, an unknown dataset or field are
// refused and record nothing.
func TestAPIAccept(t *testing.T) {
	t.Parallel()
	e := apiServe(t, "")
	day := e.sc.Day(demo.RemappedAgo)
	path := "/api/v1/datasets/events_raw/accept"
	before := e.auditLen()
	for _, c := range []struct {
		what, path, body string
		status, code     int
	}{
		{"no reason", path, `{"partition":"` + day + `","check":"drift","column":"event_type"}`, http.StatusBadRequest, refill.ExitBadInput},
		{"a passing check", path, `{"partition":"` + day + `","check":"volume","reason":"x"}`, http.StatusBadRequest, refill.ExitBadInput},
		{"another column", path, `{"partition":"` + day + `","check":"drift","column":"amount","reason":"x"}`, http.StatusBadRequest, refill.ExitBadInput},
		{"an unknown field", path, `{"partition":"` + day + `","check":"drift","column":"event_type","reason":"x","as":"carol"}`, http.StatusBadRequest, refill.ExitBadInput},
		{"an unknown dataset", "/api/v1/datasets/nope/accept", `{"partition":"` + day + `","check":"volume","reason":"x"}`, http.StatusNotFound, refill.ExitBadInput},
	} {
		st, res := e.call("alice", "POST", c.path, c.body)
		wantError(t, c.what, st, res, c.status, c.code)
	}
	if n := e.auditLen(); n != before {
		t.Errorf("refused acceptances changed the audit log: %d -> %d entries", before, n)
	}
	st, res := e.call("bob", "POST", path, `{"partition":"`+day+`","check":"drift","column":"event_type","reason":"the upstream really did stop sending types that day (INC-7)"}`)
	if st != http.StatusCreated || res["by"] != "bob" || res["column"] != "event_type" || !strings.Contains(fmt.Sprint(res["measured"]), "distinct=1 ") {
		t.Fatalf("accept: HTTP %d %v", st, res)
	}
	st, res = e.call("alice", "GET", "/api/v1/history?dataset=events_raw&partition="+day, "")
	acc, _ := res["acceptances"].([]any)
	if st != http.StatusOK || len(acc) != 1 || acc[0].(map[string]any)["reason"] != "the upstream really did stop sending types that day (INC-7)" {
		t.Fatalf("history after accept: HTTP %d %v", st, res)
	}
	// Withdrawn by its author or a lead only.
	body := `{"partition":"` + day + `","check":"drift","column":"event_type","reason":"it was a bug after all"}`
	st, res = e.call("alice", "POST", path+"/revoke", body)
	wantError(t, "revoke by someone else", st, res, http.StatusForbidden, refill.ExitNotPermitted)
	st, res = e.call("carol", "POST", path+"/revoke", body)
	if rv, _ := res["revoked"].(map[string]any); st != http.StatusOK || rv == nil || rv["by"] != "carol" {
		t.Fatalf("revoke by a lead: HTTP %d %v", st, res)
	}
	st, res = e.call("carol", "POST", path+"/revoke", body)
	wantError(t, "nothing left to revoke", st, res, http.StatusNotFound, refill.ExitBadInput)
}

// Selectors work through the API as through the CLI: the plan takes only
// what they select, names what it leaves out that reads what it rewrites,
// and a bad selector is a 400 that names it and the nearest datasets.
func TestAPISelectors(t *testing.T) {
	t.Parallel()
	e := apiServe(t, "")
	body := `{"targets":["sessions","events_daily"],"exclude":["partner_feed"],"no_downstream":true,"from":"` + e.sc.Day(12) + `","to":"` + e.sc.Day(11) + `","reason":"only the two tables"}`
	status, plan := e.call("alice", "POST", "/api/v1/plans", body)
	if status != http.StatusCreated {
		t.Fatalf("create: HTTP %d: %v", status, plan)
	}
	var steps []string
	for _, s := range plan["steps"].([]any) {
		steps = append(steps, s.(map[string]any)["dataset"].(string))
	}
	if !slices.Equal(steps, []string{"events_daily", "sessions"}) {
		t.Errorf("steps = %v, want events_daily and sessions alone", steps)
	}
	req := plan["request"].(map[string]any)
	if fmt.Sprint(req["select"]) != "[sessions events_daily]" || fmt.Sprint(req["exclude"]) != "[partner_feed]" || req["no_downstream"] != true {
		t.Errorf("request = %v, want the selectors as given", req)
	}
	var left []string
	for _, l := range plan["left_out"].([]any) {
		m := l.(map[string]any)
		left = append(left, fmt.Sprintf("%s<-%v", m["dataset"], m["reads"]))
	}
	if !slices.Equal(left, []string{"partner_feed<-[events_daily]", "revenue_daily<-[events_daily]"}) {
		t.Errorf("left_out = %v", left)
	}
	// revenue_daily is billing, partner_feed external: left out, they keep
	// the plan manual.
	if plan["tier"] != "manual" || !strings.Contains(fmt.Sprint(plan["reasons"]), "revenue_daily is tagged billing (manual_tags): left out of the plan") {
		t.Errorf("tier %v, reasons %v; want manual for the billing table left out", plan["tier"], plan["reasons"])
	}
	before := e.auditLen()
	for _, c := range []struct{ body, want string }{
		{`{"targets":["sesions"],"from":"2026-11-01","to":"2026-11-03","reason":"x"}`, `unknown dataset "sesions" (known: sessions`},
		{`{"targets":["tag:nope"],"from":"2026-11-01","to":"2026-11-03","reason":"x"}`, `no dataset is tagged nope`},
		{`{"targets":["sessions"],"exclude":["partner_fed"],"from":"2026-11-01","to":"2026-11-03","reason":"x"}`, `exclude "partner_fed": unknown dataset "partner_fed" (known: partner_feed`},
	} {
		st, res := e.call("alice", "POST", "/api/v1/plans", c.body)
		wantError(t, c.want, st, res, http.StatusBadRequest, refill.ExitBadInput)
		if !strings.Contains(fmt.Sprint(res["error"]), c.want) {
			t.Errorf("%s: error %q does not say %q", c.body, res["error"], c.want)
		}
	}
	if n := e.auditLen(); n != before {
		t.Errorf("bad selectors changed the audit log: %d -> %d entries", before, n)
	}
}
