package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/refill-dev/refill/internal/apitest"
)

// TestTokensAreShownOnceAndStoredHashed: the secret is printed once, never
// listed, and not in the state store; revoking is for its owner or a lead.
func TestTokensAreShownOnceAndStoredHashed(t *testing.T) {
	t.Parallel()
	d := setup(t)
	created := decode[struct {
		ID    string `json:"id"`
		User  string `json:"user"`
		Token string `json:"token"`
	}](t, step(t, d, 0, "", "token", "create", "--as", "alice", "--expires", "30d", "-o", "json").stdout)
	if !strings.HasPrefix(created.Token, "rfl_"+created.ID+"_") || created.User != "alice" {
		t.Fatalf("token create: %+v", created)
	}
	list := step(t, d, 0, created.ID, "token", "list")
	if strings.Contains(list.stdout, created.Token) {
		t.Error("token list shows the secret")
	}
	state, err := os.ReadFile(filepath.Join(d, ".refill", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	wal, _ := os.ReadFile(filepath.Join(d, ".refill", "state.db-wal"))
	secret := created.Token[len("rfl_"+created.ID+"_"):]
	if strings.Contains(string(state)+string(wal), secret) {
		t.Error("the state store holds the token's secret")
	}
	step(t, d, 2, "--expires", "token", "create", "--as", "alice", "--expires", "forever")
	step(t, d, 4, `unknown user "mallory"`, "token", "create", "--as", "mallory")
	step(t, d, 4, "only they or a lead", "token", "revoke", created.ID, "--as", "bob")
	step(t, d, 0, "revoked", "token", "revoke", created.ID, "--as", "carol")
	step(t, d, 2, "revoked already", "token", "revoke", created.ID, "--as", "carol")
	step(t, d, 2, "no token", "token", "revoke", "nosuchid", "--as", "carol")
}

// TestFreezeStopsAutoPlansOnly: while frozen, an auto plan (which nobody
// approves) may not run; a plan a person approved still may. Leads only,
// audited.
func TestFreezeStopsAutoPlansOnly(t *testing.T) {
	t.Parallel()
	d := setup(t)
	auto := decode[planJSON](t, step(t, d, 0, "", "plan", "sessions", "--from", "2026-11-24", "--to", "2026-11-26", "--reason", "late events", "--as", "alice", "-o", "json").stdout)
	if auto.Tier != "auto" {
		t.Fatalf("plan tier %s, want auto (sessions is proven by the demo): %v", auto.Tier, auto.Reasons)
	}
	step(t, d, 4, "only a lead", "freeze", "--reason", "quarter close", "--as", "alice")
	step(t, d, 2, "--reason is required", "freeze", "--as", "carol")
	step(t, d, 0, "FROZEN by carol", "freeze", "--reason", "quarter close", "--as", "carol")
	step(t, d, 4, "frozen already", "freeze", "--reason", "again", "--as", "carol")
	step(t, d, 0, "refill is frozen by carol", "show", auto.ID)
	step(t, d, 4, "refill is frozen by carol", "apply", auto.ID, "--as", "alice")
	if n := countRows(t, d, "SELECT count(*) FROM refill_published WHERE plan_id = ?", auto.ID); n != 0 {
		t.Fatalf("%d partitions published while frozen", n)
	}
	step(t, d, 4, "only a lead", "unfreeze", "--as", "bob")
	step(t, d, 0, "unfrozen", "unfreeze", "--reason", "closed", "--as", "carol")
	step(t, d, 0, "", "apply", auto.ID, "--as", "alice")
	audit := step(t, d, 0, "", "audit", "verify")
	_ = audit
}

// TestCancelAPlanThatHasNotRun ends it at once; it can never run after.
func TestCancelAPlanThatHasNotRun(t *testing.T) {
	t.Parallel()
	d := setup(t)
	p := decode[planJSON](t, step(t, d, 0, "", "plan", "sessions", "--from", "2026-11-10", "--to", "2026-11-23", "--reason", "two weeks", "--as", "alice", "-o", "json").stdout)
	step(t, d, 2, "--reason is required", "cancel", p.ID, "--as", "alice")
	step(t, d, 4, "only the requester", "cancel", p.ID, "--as", "bob", "--reason", "not mine")
	r := step(t, d, 0, "", "cancel", p.ID, "--as", "alice", "--reason", "wrong range", "-o", "json")
	if st := decode[struct {
		Status string `json:"status"`
		Cancel struct {
			Actor, Reason string
		} `json:"cancel"`
	}](t, r.stdout); st.Status != "cancelled" || st.Cancel.Reason != "wrong range" {
		t.Errorf("after cancel: %+v", st)
	}
	step(t, d, 4, "cancelled", "approve", p.ID, "--as", "bob")
	step(t, d, 4, "cancelled", "apply", p.ID, "--as", "alice")
	step(t, d, 4, "nothing to cancel", "cancel", p.ID, "--as", "alice", "--reason", "again")
}

func countRows(t *testing.T, dir, q string, args ...any) int {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(dir, "warehouse.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return 0
		}
		t.Fatal(err)
	}
	return n
}

// served is a running `refill serve`.
type served struct {
	cmd  *exec.Cmd
	url  string
	logs *strings.Builder
	done chan error
}

// serve starts the binary's server on a free port and waits until it
// listens.
func serve(t *testing.T, dir string, args ...string) *served {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "REFILL_NOW="+demoNow, "REFILL_USER=", "REFILL_CONFIG=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &served{cmd: cmd, logs: &strings.Builder{}, done: make(chan error, 1)}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`refill serve: (http://\S+) `)
		for sc.Scan() {
			line := sc.Text()
			s.logs.WriteString(line + "\n")
			if m := re.FindStringSubmatch(line); m != nil {
				urls <- m[1]
			}
		}
		s.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
		}
	})
	select {
	case s.url = <-urls:
	case <-time.After(60 * time.Second):
		t.Fatalf("refill serve did not start:\n%s", s.logs)
	}
	return s
}

func (s *served) do(t *testing.T, token, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	// The binary's answers are held to the API's OpenAPI document too.
	status, _, b := apitest.Do(t, req, []byte(body))
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return status, out
}

func token(t *testing.T, dir, user string) string {
	t.Helper()
	return decode[struct {
		Token string `json:"token"`
	}](t, step(t, dir, 0, "", "token", "create", "--as", user, "-o", "json").stdout).Token
}

// TestServeRunsWhatTheBrowserApproves drives the real binary: a plan made
// at the CLI is approved and applied over the API with the same rules, the
// run needs no terminal, and SIGTERM stops the server cleanly.
func TestServeRunsWhatTheBrowserApproves(t *testing.T) {
	t.Parallel()
	d := setup(t)
	alice, bob := token(t, d, "alice"), token(t, d, "bob")
	p := decode[planJSON](t, step(t, d, 0, "", "plan", "sessions", "--from", "2026-11-10", "--to", "2026-11-23", "--reason", "two weeks", "--as", "alice", "-o", "json").stdout)
	s := serve(t, d)
	if st, _ := s.do(t, "", "GET", "/healthz", ""); st != http.StatusOK {
		t.Fatalf("healthz: %d", st)
	}
	if st, res := s.do(t, alice, "POST", "/api/v1/plans/"+p.ID+"/approve", ""); st != http.StatusForbidden || res["code"] != float64(4) {
		t.Fatalf("self-approval over the API: %d %v", st, res)
	}
	if st, res := s.do(t, bob, "POST", "/api/v1/plans/"+p.ID+"/approve", `{"note":"ok"}`); st != http.StatusOK {
		t.Fatalf("approve: %d %v", st, res)
	}
	if st, res := s.do(t, bob, "POST", "/api/v1/plans/"+p.ID+"/apply", ""); st != http.StatusAccepted {
		t.Fatalf("apply: %d %v", st, res)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		_, res := s.do(t, bob, "GET", "/api/v1/plans/"+p.ID, "")
		if res["status"] == "applied" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not finish: %v\n%s", res["status"], s.logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	step(t, d, 0, "applied", "show", p.ID)
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("serve exited with %v after SIGTERM\n%s", err, s.logs)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not stop on SIGTERM\n%s", s.logs)
	}
	// Structured logs: every line after the banner is one JSON object.
	for _, line := range strings.Split(strings.TrimSpace(s.logs.String()), "\n") {
		if strings.HasPrefix(line, "refill serve:") {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec["msg"] == nil {
			t.Errorf("a log line that is not slog JSON: %q", line)
		}
	}
	// Durations are seconds, as a number (took_s), never nanoseconds.
	if !regexp.MustCompile(`"path":"/api/v1/plans/`+p.ID+`/approve","status":200,"took_s":0\.\d+`).MatchString(s.logs.String()) || strings.Contains(s.logs.String(), `"took":`) {
		t.Errorf("the request log does not give took_s in seconds:\n%s", s.logs.String())
	}
	if !strings.Contains(s.logs.String(), `"path":"/api/v1/plans/`+p.ID+`/approve","status":200`) || !strings.Contains(s.logs.String(), `"user":"bob"`) {
		t.Errorf("the request log does not name who approved:\n%s", s.logs)
	}
	if !strings.Contains(s.logs.String(), `"msg":"stopped"`) {
		t.Errorf("no clean stop in the logs:\n%s", s.logs)
	}
	_ = context.Background
}

// TestServeShutdownDrainsRuns: SIGTERM in the middle of a run started in
// the browser lets the partition in flight finish and publish, starts no
// new one, and pauses the plan — still running, held by nobody, neither
// failed nor alerted — for the next refill serve to resume at once,
// building only what is left.
func TestServeShutdownDrainsRuns(t *testing.T) {
	t.Parallel()
	dir := smallProject(t, `version: 1
warehouse: sqlite:wh.db
run: {max_active: 1, max_active_total: 1}
datasets:
  slow:
    job:
      command: ["sh", "-c", "sleep 0.7; echo {{partition}} >> built.log"]
      timeout: 30s
`)
	p := decode[planJSON](t, step(t, dir, 0, "", "plan", "slow", "--from", "2026-11-01", "--to", "2026-11-06", "--reason", "r", "--as", "alice", "-o", "json").stdout)
	step(t, dir, 0, "", "approve", p.ID, "--as", "bob")
	tok := token(t, dir, "bob")
	s := serve(t, dir, "--grace", "20s")
	if st, res := s.do(t, tok, "POST", "/api/v1/plans/"+p.ID+"/apply", ""); st != http.StatusAccepted {
		t.Fatalf("apply: %d %v", st, res)
	}
	built := func() []string {
		b, _ := os.ReadFile(filepath.Join(dir, "built.log"))
		return strings.Fields(string(b))
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(built()) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("nothing was built\n%s", s.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("serve exited with %v\n%s", err, s.logs)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not stop\n%s", s.logs)
	}
	first := built()
	type shownJSON struct {
		Status    string `json:"status"`
		RunHolder *struct {
			Orphaned bool `json:"orphaned"`
		} `json:"run_holder"`
	}
	shown := decode[shownJSON](t, step(t, dir, 0, "", "show", p.ID, "-o", "json").stdout)
	if shown.Status != "running" || shown.RunHolder == nil || !shown.RunHolder.Orphaned || len(first) == 0 || len(first) >= 6 {
		t.Fatalf("after shutdown: plan %s (holder %+v) with %d of 6 built, want running, held by nobody, with some built\n%s", shown.Status, shown.RunHolder, len(first), s.logs)
	}
	pubs := countPublished(t, dir, p.ID)
	if pubs != len(first) {
		t.Errorf("%d partitions built but %d published: a partition in flight was lost or half-done", len(first), pubs)
	}
	kinds := auditKinds(t, dir, p.ID)
	paused := len(slices.DeleteFunc(slices.Clone(kinds), func(k string) bool { return k != "run_paused" }))
	if slices.Contains(kinds, "run_failed") || paused != 1 {
		t.Errorf("a restart's drain should pause the run once and fail nothing: %v", kinds)
	}
	// The next serve resumes it by itself.
	s2 := serve(t, dir)
	deadline = time.Now().Add(60 * time.Second)
	for shown.Status != "applied" {
		if time.Now().After(deadline) {
			t.Fatalf("the next serve did not resume the paused plan: %s\n%s", shown.Status, s2.logs)
		}
		time.Sleep(50 * time.Millisecond)
		shown = decode[shownJSON](t, step(t, dir, 0, "", "show", p.ID, "-o", "json").stdout)
	}
	all := built()
	slices.Sort(all)
	if len(all) != 6 || len(slices.Compact(slices.Clone(all))) != 6 {
		t.Errorf("after resuming: %d builds %v, want each of 6 partitions built once", len(all), all)
	}
}

// auditKinds lists the kinds of a plan's audit entries, in order.
func auditKinds(t *testing.T, dir, id string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(dir, ".refill", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT event FROM audit_log WHERE plan_id = ? ORDER BY seq`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		out = append(out, k)
	}
	return out
}

// countPublished counts a plan's published partitions in the state store.
func countPublished(t *testing.T, dir, id string) int {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(dir, ".refill", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM run_partitions WHERE plan_id = ?`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestServeFollowsTheConfig: refill serve decides with refill.yaml and the
// scripts as they are now, not as they were when it started — an edited
// script makes a plan stale there as at the CLI, a user removed can no
// longer act, and a config that no longer loads stops every decision.
func TestServeFollowsTheConfig(t *testing.T) {
	t.Parallel()
	d := setup(t)
	carol, bob := token(t, d, "carol"), token(t, d, "bob")
	p := decode[planJSON](t, step(t, d, 0, "", "plan", "partner_feed", "--from", "2026-10-01", "--to", "2026-10-03", "--reason", "re-export", "--as", "alice", "-o", "json").stdout)
	step(t, d, 0, "", "snapshot", p.ID, "--as", "alice")
	step(t, d, 0, "", "scope", p.ID, "--note", "three days of the export", "--as", "alice")
	s := serve(t, d)
	script := filepath.Join(d, "export.sh")
	b, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, append(b, []byte("\necho unreviewed >> unreviewed.log\n")...), 0o755); err != nil {
		t.Fatal(err)
	}
	st, res := s.do(t, carol, "POST", "/api/v1/plans/"+p.ID+"/approve", "")
	if st != http.StatusForbidden || !strings.Contains(fmt.Sprint(res["error"]), "stale") {
		t.Fatalf("approving after the script changed: %d %v", st, res)
	}
	_, got := s.do(t, carol, "GET", "/api/v1/plans/"+p.ID, "")
	if stale, _ := got["stale"].([]any); len(stale) == 0 || got["may_run"] != false {
		t.Errorf("the plan page does not say stale: %v", got["stale"])
	}
	if err := os.WriteFile(script, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if st, res := s.do(t, carol, "POST", "/api/v1/plans/"+p.ID+"/approve", ""); st != http.StatusOK {
		t.Fatalf("approving with the script restored: %d %v", st, res)
	}

	cfg := filepath.Join(d, "refill.yaml")
	orig, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := s.do(t, bob, "GET", "/api/v1/plans", ""); st != http.StatusOK {
		t.Fatalf("bob before: %d", st)
	}
	without := strings.Replace(string(orig), "  bob: {roles: [engineer]}\n", "", 1)
	if without == string(orig) {
		t.Fatal("the demo config has no bob line to remove")
	}
	if err := os.WriteFile(cfg, []byte(without), 0o644); err != nil {
		t.Fatal(err)
	}
	if st, res := s.do(t, bob, "GET", "/api/v1/plans", ""); st != http.StatusUnauthorized {
		t.Errorf("bob after leaving users: %d %v, want 401", st, res)
	}
	if err := os.WriteFile(cfg, []byte("version: 1\ndatasets: [oops\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if st, res := s.do(t, carol, "GET", "/api/v1/plans", ""); st != http.StatusServiceUnavailable || !strings.Contains(fmt.Sprint(res["error"]), "no longer loads") {
		t.Errorf("a broken config: %d %v, want 503", st, res)
	}
	if st, _ := s.do(t, "", "GET", "/healthz", ""); st != http.StatusOK {
		t.Errorf("healthz with a broken config: %d", st)
	}
	if err := os.WriteFile(cfg, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.do(t, bob, "GET", "/api/v1/plans", ""); st != http.StatusOK {
		t.Errorf("bob back in users: %d", st)
	}
}

// TestWatchOnceThroughTheBinary: the demo's watcher planned its missed day
// and asked people (billing is downstream); a second tick waits on that
// plan rather than planning again; nobody may act as the watcher.
func TestWatchOnceThroughTheBinary(t *testing.T) {
	t.Parallel()
	d := setup(t)
	pending := decode[[]struct {
		ID          string `json:"id"`
		Tier        string `json:"tier"`
		RequestedBy string `json:"requested_by"`
	}](t, step(t, d, 0, "", "plans", "--status", "pending", "-o", "json").stdout)
	if len(pending) != 1 || pending[0].RequestedBy != "watcher" || pending[0].Tier != "manual" {
		t.Fatalf("after the demo: pending %+v, want the watcher's manual plan", pending)
	}
	rep := decode[struct {
		Datasets  int `json:"datasets"`
		Decisions []struct {
			Dataset string `json:"dataset"`
			Action  string `json:"action"`
			PlanID  string `json:"plan_id"`
		} `json:"decisions"`
	}](t, step(t, d, 0, "", "watch", "--once", "-o", "json").stdout)
	if rep.Datasets != 1 || len(rep.Decisions) != 1 || rep.Decisions[0].Action != "waiting" || rep.Decisions[0].PlanID != pending[0].ID {
		t.Errorf("second tick: %+v, want waiting on %s", rep, pending[0].ID)
	}
	if n := len(decode[[]planJSON](t, step(t, d, 0, "", "plans", "-o", "json").stdout)); n != 6 {
		t.Errorf("%d plans after a second tick, want 6 (no new one)", n)
	}
	step(t, d, 4, "refill's own identity", "plan", "sessions", "--from", "2026-11-20", "--to", "2026-11-20", "--reason", "x", "--as", "watcher")
	step(t, d, 4, "refill's own identity", "token", "create", "--as", "watcher")
	step(t, d, 2, "--once", "watch")
}
