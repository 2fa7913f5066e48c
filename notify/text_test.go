package notify_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/notify"
)

// hostile is a stored text that tries everything Slack's mrkdwn would
// act on: a mention of the channel and of a person, a link that reads as
// a button, an entity, a line of its own and a right-to-left override.
const hostile = "<!channel> <@U0BOSS> <https://evil.example/approve|Approve here> &amp; \n:white_check_mark: Approved by *carol*\u202e"

// TestStoredTextsInSlack: whatever a stored text holds — in a reason, a
// note, a name, a status or a finding edited in the state store by hand —
// Slack receives no mention, no link but refill's own and no line of the
// text's own making.
func TestStoredTextsInSlack(t *testing.T) {
	s := fixedPlan(refill.StatusPending, refill.TierSemiAuto)
	p := s.Plan
	p.Request.Reason, p.Request.RequestedBy = hostile, "alice"+hostile
	p.Status, p.Tier = refill.Status("pending"+hostile), refill.Tier("semi-auto"+hostile)
	p.Reasons = append(p.Reasons, hostile)
	p.Steps[0].Dataset, p.Steps[0].Partitions[0].Partition = hostile, hostile
	p.Steps[1].Partitions[0].ExpectedMethod = refill.ExpectedMethod(hostile)
	p.Gate.Checked = []string{hostile}
	p.Gate.Findings[0].Message, p.Gate.Findings[0].Column = hostile, hostile
	s.Approvals = []refill.Approval{{Actor: hostile, Decision: refill.DecisionApprove, Note: hostile}, {Actor: "bob", Decision: refill.DecisionReject, Note: hostile}}
	s.Cancel = &refill.CancelRequest{Actor: hostile, Reason: hostile}
	s.Freeze = &refill.Freeze{By: hostile, Reason: hostile}
	s.Unmet = []string{"needs one approval: " + hostile}
	pAuto := *s
	pAuto.Plan = &refill.Plan{}
	*pAuto.Plan = *p
	pAuto.Plan.Status, pAuto.Plan.Tier = refill.StatusReady, refill.TierAuto

	note := refill.Detail(map[string]any{"note": hostile, "reason": hostile, "error": hostile})
	messages := map[string][]slack.Block{
		"plan":   notify.Message(s, "https://refill.example.com"),
		"frozen": notify.Message(&pAuto, "https://refill.example.com"),
	}
	for _, k := range []refill.EventKind{refill.EventApproval, refill.EventRejection, refill.EventCancelRequested, refill.EventRunCancelled, refill.EventRunStarted, refill.EventKind("custom" + hostile)} {
		messages["outcome "+string(k)] = notify.Outcome(&refill.Event{Kind: k, Actor: hostile, PlanID: "3fa9c2d1", Detail: note}, s, "https://refill.example.com")
	}
	for _, k := range []refill.EventKind{refill.EventFreeze, refill.EventUnfreeze, refill.EventRunFailed, refill.EventGateResult, refill.EventKind("other")} {
		messages["alert "+string(k)] = notify.Alert(&refill.Event{Kind: k, Actor: hostile, PlanID: "3fa9c2d1", Detail: note}, s, nil, "https://refill.example.com")
	}
	own := regexp.MustCompile(`<https://refill\.example\.com/[^|<>\s]*\|[^<>]*>`)
	for what, blocks := range messages {
		for _, text := range mrkdwnTexts(t, blocks) {
			rest := own.ReplaceAllString(text, "")
			if strings.ContainsAny(rest, "<>") {
				t.Errorf("%s: Slack would read a mention or a link in %q", what, text)
			}
			// A run's error is refill's own text of several lines, in a
			// code block, where Slack formats nothing.
			outside := regexp.MustCompile("(?s)```.*?```").ReplaceAllString(text, "")
			if strings.Contains(outside, "\n:white_check_mark: Approved by *carol*") {
				t.Errorf("%s: a stored text draws a line of its own in %q", what, text)
			}
			if strings.ContainsRune(text, '\u202e') {
				t.Errorf("%s: an override reaches Slack in %q", what, text)
			}
		}
	}
}

// mrkdwnTexts are the texts of blocks that Slack reads as mrkdwn.
func mrkdwnTexts(t *testing.T, blocks []slack.Block) []string {
	t.Helper()
	b, err := json.Marshal(blocks)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if v["type"] == slack.MarkdownType {
				if s, ok := v["text"].(string); ok {
					texts = append(texts, s)
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	walk(doc)
	if len(texts) == 0 {
		t.Fatal("no mrkdwn text in the message")
	}
	return texts
}
