package notify_test

import (
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/notify"
)

// rawPress is a press of Approve whose payload is written out by hand, so
// that it can repeat a key or spell one in another case.
func rawPress(payload string) []byte {
	return []byte("payload=" + url.QueryEscape(payload))
}

// TestPayloadKeysOnceAndInRefillsCase: Slack's own fields stay allowed,
// but a key given twice anywhere in the payload, or one refill reads
// spelled in another case, is refused — naming it by its JSON pointer —
// through the handler too, with a 400 that changes nothing.
func TestPayloadKeysOnceAndInRefillsCase(t *testing.T) {
	t.Parallel()
	const head = `{"type":"block_actions","api_app_id":"A0REFILL","response_url":"","container":{"type":"message","message_ts":"1.2","channel_id":"C0BACKFILL"},`
	for _, c := range []struct{ what, payload, want string }{
		{"the plan twice", head + `"user":{"id":"U0BOB"},"actions":[{"action_id":"refill_approve","value":"p1","value":"p2"}]}`, "/actions/0/value: given twice"},
		{"the action in another case", head + `"user":{"id":"U0BOB"},"actions":[{"action_id":"refill_approve","ACTION_ID":"refill_reject","value":"p1"}]}`, `/actions/0/ACTION_ID: refill's key is "action_id"`},
		{"the user in another case", head + `"user":{"id":"U0BOB","ID":"U0CAROL"},"actions":[{"action_id":"refill_approve","value":"p1"}]}`, `/user/ID: refill's key is "id"`},
		{"the user twice", head + `"user":{"id":"U0BOB"},"user":{"id":"U0CAROL"},"actions":[{"action_id":"refill_approve","value":"p1"}]}`, "/user: given twice"},
		{"a key twice deep in Slack's message", head + `"user":{"id":"U0BOB"},"message":{"ts":"1.2","blocks":[{"type":"section","type":"header"}]},"actions":[{"action_id":"refill_approve","value":"p1"}]}`, "/message/blocks/0/type: given twice"},
		{"the team in another case", head + `"user":{"id":"U0BOB"},"team":{"id":"T0TEST","Id":"T0OTHER"},"actions":[{"action_id":"refill_approve","value":"p1"}]}`, `/team/Id: refill's key is "id"`},
	} {
		in, err := notify.ParseInteraction(rawPress(c.payload))
		if in != nil || !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %+v, %v; want an error saying %q", c.what, in, err, c.want)
		}
	}
	in, err := notify.ParseInteraction(rawPress(head + `"user":{"id":"U0BOB","name":"bob","team_id":"T0TEST"},"team":{"id":"T0TEST","domain":"acme"},"trigger_id":"1.2.3",` +
		`"message":{"ts":"1.2","blocks":[{"type":"section"}]},"state":{"values":{}},"actions":[{"action_id":"refill_approve","block_id":"b","value":"p1","type":"button"}]}`))
	if err != nil || in == nil || in.PlanID != "p1" || in.SlackUser != "U0BOB" || in.Team != "T0TEST" || in.UserTeam != "T0TEST" {
		t.Errorf("a press with Slack's other fields: %+v, %v", in, err)
	}

	e := setup(t, options{bot: true})
	plan := e.plan(t)
	h := e.n.Interactions(e.p.Control, slog.New(slog.DiscardHandler))
	before := auditLen(t, e.p.Store, plan.ID)
	body := rawPress(head + `"user":{"id":"U0ALICE","ID":"U0BOB"},"actions":[{"action_id":"refill_approve","value":"` + plan.ID + `"}]}`)
	if code, res := serve(t, h, signed(signing, time.Now(), body)); code != http.StatusBadRequest || !strings.Contains(res["error"].(string), "/user/ID") {
		t.Errorf("a signed press with the user in two cases: %d %v, want 400 naming /user/ID", code, res)
	}
	if s := status(t, e.p.Store, plan.ID); s != refill.StatusPending || auditLen(t, e.p.Store, plan.ID) != before || e.slack.count() != 0 {
		t.Errorf("a refused payload changed something: plan %s, audit %d -> %d, %d requests to Slack", s, before, auditLen(t, e.p.Store, plan.ID), e.slack.count())
	}
}

// TestInteractionsFromOneWorkspace: with notify.slack.team_id, a signed
// press whose team, or whose presser's team, is another workspace — or
// that names none — is refused with 401 and changes nothing; a press from
// the workspace decides as ever.
func TestInteractionsFromOneWorkspace(t *testing.T) {
	t.Parallel()
	e := setup(t, options{bot: true, team: "T0TEST"})
	plan := e.plan(t)
	h := e.n.Interactions(e.p.Control, slog.New(slog.DiscardHandler))
	before := auditLen(t, e.p.Store, plan.ID)
	for _, c := range []struct{ what, team, userTeam, want string }{
		{"another workspace", "T0OTHER", "T0OTHER", "comes from Slack workspace T0OTHER"},
		{"a presser of another workspace", "T0TEST", "T0OTHER", "the presser belongs to Slack workspace T0OTHER"},
		{"another workspace, the presser's own unsaid", "T0OTHER", "", "comes from Slack workspace T0OTHER"},
		{"no workspace at all", "", "", "names no Slack workspace"},
	} {
		code, res := serve(t, h, signed(signing, time.Now(), pressFrom(notify.ActionApprove, plan.ID, slackBob, "", c.team, c.userTeam)))
		if msg, _ := res["error"].(string); code != http.StatusUnauthorized || !strings.Contains(msg, c.want) || !strings.Contains(msg, "T0TEST alone (notify.slack.team_id)") {
			t.Errorf("%s: %d %v, want 401 saying %q", c.what, code, res, c.want)
		}
	}
	if s := status(t, e.p.Store, plan.ID); s != refill.StatusPending || auditLen(t, e.p.Store, plan.ID) != before || e.slack.count() != 0 {
		t.Fatalf("presses from other workspaces changed something: plan %s, audit %d -> %d, %d requests to Slack", s, before, auditLen(t, e.p.Store, plan.ID), e.slack.count())
	}
	code, res := serve(t, h, signed(signing, time.Now(), pressFrom(notify.ActionApprove, plan.ID, slackBob, "", "T0TEST", "T0TEST")))
	if code != http.StatusOK || res["ok"] != true || status(t, e.p.Store, plan.ID) != refill.StatusApproved {
		t.Errorf("a press from the workspace: %d %v, want the plan approved", code, res)
	}
}
