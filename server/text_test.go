package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
)

// TestAPIRefusesBadTexts: a person's text that breaks the rule is refused
// by every route that carries one — 400, code 2, the body's key named — and
// nothing is planned, decided or audited.
func TestAPIRefusesBadTexts(t *testing.T) {
	t.Parallel()
	e := apiServe(t, "")
	_, made := e.call("alice", "POST", "/api/v1/plans", `{"targets":["sessions"],"from":"`+e.sc.Day(12)+`","to":"`+e.sc.Day(10)+`","reason":"late sessions"}`)
	id, _ := made["id"].(string)
	if id == "" {
		t.Fatalf("plan: %v", made)
	}
	quote := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	huge := strings.Repeat("x", 900<<10)
	for _, c := range []struct {
		what, path, body, want string
	}{
		{"a reason with escapes", "/api/v1/plans", `{"targets":["sessions"],"from":"` + e.sc.Day(9) + `","to":"` + e.sc.Day(8) + `","reason":` + quote("\x1b[2J\x1b[H\x1b[32mApproved by carol (lead)") + `}`,
			"reason holds a control character (U+001B at character 1): write it on one line without control characters"},
		{"a 900 KB reason", "/api/v1/plans", `{"targets":["sessions"],"from":"` + e.sc.Day(9) + `","to":"` + e.sc.Day(8) + `","reason":"` + huge + `"}`,
			"reason is 921600 characters long: at most 1000 characters are allowed"},
		{"a DAG run's note with a newline", "/api/v1/dags/sessions/dagRuns", `{"conf":{"start_date":"` + e.sc.Day(9) + `","end_date":"` + e.sc.Day(8) + `"},"note":` + quote("late\nApproved by carol") + `}`,
			"note holds a line break (U+000A at character 5)"},
		{"a DAG run's 900 KB note", "/api/v1/dags/sessions/dagRuns", `{"conf":{"start_date":"` + e.sc.Day(9) + `","end_date":"` + e.sc.Day(8) + `"},"note":"` + huge + `"}`,
			"note is 921600 characters long"},
		{"an approval note with an override", "/api/v1/plans/" + id + "/approve", `{"note":` + quote("ok \u202eevil") + `}`,
			"note holds a bidirectional control character (U+202E at character 4)"},
		{"a rejection note with a C1 control", "/api/v1/plans/" + id + "/reject", `{"note":` + quote("no\u009b2J") + `}`,
			"note holds a control character (U+009B at character 3)"},
		{"a cancel reason with escapes", "/api/v1/plans/" + id + "/cancel", `{"reason":` + quote("stop\x1b[2J") + `}`,
			"reason holds a control character (U+001B at character 5)"},
		{"a freeze reason too long", "/api/v1/freeze", `{"reason":"` + strings.Repeat("y", 1001) + `"}`,
			"reason is 1001 characters long"},
		{"an acceptance reason with escapes", "/api/v1/datasets/events_raw/accept", `{"partition":"` + e.sc.Day(5) + `","check":"volume","reason":` + quote("real\x1b[31m") + `}`,
			"reason holds a control character (U+001B at character 5)"},
	} {
		before := e.auditLen()
		plans, _ := e.p.Store.Plans(context.Background(), refill.PlanFilter{})
		user := "bob"
		if strings.Contains(c.path, "freeze") {
			user = "carol"
		}
		st, res := e.call(user, "POST", c.path, c.body)
		wantError(t, c.what, st, res, http.StatusBadRequest, refill.ExitBadInput)
		if msg, _ := res["error"].(string); msg != "" && !strings.HasPrefix(msg, c.want) {
			t.Errorf("%s: error %q, want it to start %q", c.what, msg, c.want)
		}
		if n := e.auditLen(); n != before {
			t.Errorf("%s: the audit log grew from %d to %d entries", c.what, before, n)
		}
		if now, _ := e.p.Store.Plans(context.Background(), refill.PlanFilter{}); len(now) != len(plans) {
			t.Errorf("%s: %d plans became %d", c.what, len(plans), len(now))
		}
	}
	if s, err := e.p.Control.Load(context.Background(), id); err != nil || s.Plan.Status != refill.StatusPending || len(s.Approvals) != 0 || s.Cancel != nil {
		t.Errorf("the plan after refused decisions: %+v (%v)", s, err)
	}
}

// TestWebRefusesBadTexts: the web form's reason and a button's note keep
// the same rule, shown on the page with a 400, and nothing is recorded.
func TestWebRefusesBadTexts(t *testing.T) {
	t.Parallel()
	e := webSetup(t)
	p := e.semiAuto(t)
	csrf := e.csrf(t, "alice")
	list := func() int {
		l, err := e.ctl.Plans(e.ctx, refill.PlanFilter{})
		if err != nil {
			t.Fatal(err)
		}
		return len(l)
	}
	before := list()
	r := e.post(t, "/plans", "alice", url.Values{"csrf": {csrf}, "targets": {"sessions"}, "from": {e.sc.Day(9)}, "to": {e.sc.Day(8)},
		"reason": {"\x1b[2J\x1b[H\x1b[32mApproved by carol (lead)"}})
	if r.StatusCode != http.StatusBadRequest || !strings.Contains(text(r.body, "flash"), "reason holds a control character (U+001B at character 1)") {
		t.Errorf("new plan with escapes: %d, flash %q", r.StatusCode, text(r.body, "flash"))
	}
	if n := list(); n != before {
		t.Errorf("a refused reason stored a plan: %d -> %d", before, n)
	}
	r = e.post(t, "/plans/"+p.ID+"/approve", "bob", url.Values{"csrf": {e.csrf(t, "bob")}, "note": {"fine \u2066x\u2069"}})
	if r.StatusCode != http.StatusBadRequest || !strings.Contains(text(r.body, "flash"), "note holds a bidirectional control character") {
		t.Errorf("approve with an isolate: %d, flash %q", r.StatusCode, text(r.body, "flash"))
	}
	if e.approvals(t, p.ID) != 0 || e.status(t, p.ID) != refill.StatusPending {
		t.Error("a refused note approved the plan")
	}
}
