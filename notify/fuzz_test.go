package notify_test

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"testing"

	"github.com/refill-dev/refill/internal/fixtures"
	"github.com/refill-dev/refill/notify"
)

var planIDShape = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// FuzzInteractionPayload feeds the interactions parser what an attacker
// holding the signing secret, or a confused proxy, could send. It must
// never panic, and whatever it accepts is one of refill's three actions on
// a plan ID of the right shape, by a named user, that reads back the same.
func FuzzInteractionPayload(f *testing.F) {
	bolt, err := os.ReadFile(filepath.Join(fixtures.Dir(f, "slack"), "bolt_python_block_actions_form_body.txt"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(bolt)
	for _, a := range []string{notify.ActionApprove, notify.ActionReject, notify.ActionCancel, "another_apps_action"} {
		f.Add(pressTo(a, "3fa9c2d1", slackBob, "https://hooks.slack.com/actions/T0/1/x"))
	}
	f.Add(pressTo(notify.ActionApprove, "../../etc/passwd", slackBob, ""))
	f.Add(pressTo(notify.ActionApprove, "3fa9c2d1", "", ""))
	f.Add([]byte(`payload={"type":"block_actions","actions":[null,{"action_id":"refill_reject","value":"x"}],"user":{"id":"U1"}}`))
	f.Add([]byte(`payload={"type":"view_submission"}`))
	f.Add([]byte("payload="))
	f.Add([]byte("payload=%7B"))
	f.Add([]byte("%zz"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := notify.ParseInteraction(body)
		if err != nil {
			if in != nil {
				t.Fatalf("an error (%v) with an interaction %+v", err, in)
			}
			return
		}
		if in == nil {
			return
		}
		switch in.Action {
		case notify.ActionApprove, notify.ActionReject, notify.ActionCancel:
		default:
			t.Fatalf("accepted action %q", in.Action)
		}
		if !planIDShape.MatchString(in.PlanID) || in.SlackUser == "" {
			t.Fatalf("accepted plan %q by user %q", in.PlanID, in.SlackUser)
		}
		again, err := notify.ParseInteraction(pressTo(in.Action, in.PlanID, in.SlackUser, in.ResponseURL))
		if err != nil || again == nil || again.Action != in.Action || again.PlanID != in.PlanID ||
			again.SlackUser != in.SlackUser || again.ResponseURL != in.ResponseURL {
			t.Fatalf("%+v reads back as %+v, %v", in, again, err)
		}
		if second, _ := notify.ParseInteraction(body); !reflect.DeepEqual(second, in) {
			t.Fatalf("parsing twice gave %+v and %+v", in, second)
		}
	})
}
