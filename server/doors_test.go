package server_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/internal/apitest"
	"github.com/refill-dev/refill/notify"
)

// TestEveryDoorFollowsRequirements changes one requirement — approving
// now also needs the change board, by an extra rule in control — and
// sees every door follow at once: the web page stops offering the
// button, Slack's message drops it, the API's plan says why and its
// approve answers 403 with the rule's words, and control itself refuses.
// Then rejecting gets the same treatment, and the plan's apply
// requirements (what show prints) carry the rule too.
func TestEveryDoorFollowsRequirements(t *testing.T) {
	e := webSetup(t)
	p := e.semiAuto(t)
	const board = "the change board has not met this week"

	doors := func(t *testing.T) (web, slackBtn, apiOffer bool, apiWhy []string) {
		t.Helper()
		page := e.get(t, "/plans/"+p.ID, "bob")
		web = has(page.body, "approve")
		st, err := e.ctl.Load(e.ctx, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range notify.Message(st, "") {
			if a, ok := b.(*slack.ActionBlock); ok {
				for _, el := range a.Elements.ElementSet {
					slackBtn = slackBtn || el.(*slack.ButtonBlockElement).ActionID == notify.ActionApprove
				}
			}
		}
		req, _ := http.NewRequestWithContext(e.ctx, http.MethodGet, e.ts.URL+"/api/v1/plans/"+p.ID, nil)
		req.Header.Set("Authorization", "Bearer "+e.tokens["bob"])
		_, _, body := apitest.Do(t, req, nil)
		var got struct {
			Offers       map[string]bool     `json:"offers"`
			Requirements map[string][]string `json:"requirements"`
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		return web, slackBtn, got.Offers["approve"], got.Requirements["approve"]
	}

	web, btn, offer, why := doors(t)
	if !web || !btn || !offer || len(why) != 0 {
		t.Fatalf("before the rule: web %v, slack %v, api offer %v, api requirements %q: want every door to offer approval", web, btn, offer, why)
	}

	e.ctl.Extra = func(act control.Action, sub control.Subject, user string) []control.Unmet {
		if act == control.ActApprove || act == control.ActReject || act == control.ActApply {
			return []control.Unmet{{Why: board, Class: refill.ErrNotPermitted}}
		}
		return nil
	}
	t.Cleanup(func() { e.ctl.Extra = nil })

	web, btn, offer, why = doors(t)
	if web || btn || offer || !slices.Contains(why, board) {
		t.Errorf("after the rule: web %v, slack %v, api offer %v, api requirements %q: every door must stop offering approval, and the API say why", web, btn, offer, why)
	}
	// The API and the page refuse with the rule's words; control too.
	req, _ := http.NewRequestWithContext(e.ctx, http.MethodPost, e.ts.URL+"/api/v1/plans/"+p.ID+"/approve", nil)
	req.Header.Set("Authorization", "Bearer "+e.tokens["bob"])
	req.Header.Set("Content-Type", "application/json")
	status, _, body := apitest.Do(t, req, []byte(`{"note": "ok"}`))
	var apiErr struct {
		Error string `json:"error"`
		Code  int    `json:"code"`
	}
	_ = json.Unmarshal(body, &apiErr)
	if status != http.StatusForbidden || apiErr.Code != refill.ExitNotPermitted || !strings.Contains(apiErr.Error, board) {
		t.Errorf("API approve under the rule: %d %+v", status, apiErr)
	}
	r := e.post(t, "/plans/"+p.ID+"/reject", "bob", url.Values{"csrf": {e.csrf(t, "bob")}, "note": {"no"}})
	if r.StatusCode != http.StatusForbidden || !strings.Contains(r.body, board) {
		t.Errorf("web reject under the rule: %d", r.StatusCode)
	}
	if _, err := e.ctl.Approve(e.ctx, p.ID, "bob", ""); !errors.Is(err, refill.ErrNotPermitted) || !strings.Contains(err.Error(), board) {
		t.Errorf("control approve under the rule: %v", err)
	}
	st, err := e.ctl.Load(e.ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(st.Unmet, board) || st.JSON().MayRun {
		t.Errorf("show's list does not carry the rule: %q", st.Unmet)
	}
	if st.Plan.Status != refill.StatusPending || e.approvals(t, p.ID) != 0 {
		t.Errorf("a refused door changed the plan: %s, %d approvals", st.Plan.Status, e.approvals(t, p.ID))
	}
}
