package notify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/notify"
	"github.com/refill-dev/refill/store"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func n64(v int64) *int64 { return &v }

// fixedPlan is a representative plan with fixed IDs and counts: two
// datasets in run order, one partition of unknown expectation, more
// partitions than a message lists, and a gate warning — and a reason that
// tries to ping the channel.
func fixedPlan(status refill.Status, tier refill.Tier) *control.State {
	day := func(d int) string { return time.Date(2026, 11, d, 0, 0, 0, 0, time.UTC).Format("2006-01-02") }
	var daily []refill.PartitionPlan
	for d := 1; d <= 7; d++ {
		daily = append(daily, refill.PartitionPlan{Partition: day(d), CurrentRows: n64(int64(1000 + d)), ExpectedRows: n64(int64(1100 + d)), ExpectedMethod: refill.ExpectedQuery})
	}
	daily[6].CurrentRows = nil
	revenue := []refill.PartitionPlan{
		{Partition: day(1), CurrentRows: n64(1), ExpectedRows: n64(1), ExpectedMethod: refill.ExpectedHistory},
		{Partition: day(2), CurrentRows: n64(1), ExpectedRows: nil, ExpectedMethod: refill.ExpectedUnknown},
	}
	p := &refill.Plan{
		ID: "3fa9c2d1", Hash: "sha256:00", Status: status, Tier: tier,
		Reasons: []string{"orders_daily is tagged aggregate", "revenue_daily is tagged billing"},
		Request: refill.Request{Targets: []string{"orders"}, From: day(1), To: day(7), Days: 7,
			Reason: "late orders <!channel> & friends", RequestedBy: "alice"},
		Steps: []refill.Step{
			{Dataset: "orders_daily", Order: 1, Kind: refill.JobQuery, Partitions: daily},
			{Dataset: "revenue_daily", Order: 2, Kind: refill.JobSQL, Partitions: revenue},
		},
		Sources: []string{"orders"},
		Gate: refill.GateVerdict{Passed: true, Checked: []string{"orders"}, Findings: []refill.Finding{
			{Dataset: "orders", Partition: day(3), Check: "volume", Passed: true, Warning: true, Message: "insufficient history: 2 same-weekday points"},
		}},
	}
	s := &control.State{Plan: p, FourEyes: true}
	offer(s)
	return s
}

// offer fills a state's offers as control does for a channel: alice,
// bob and the lead carol are the configured users.
func offer(s *control.State) {
	cfg := &refill.Config{Users: map[string]refill.User{"alice": {Name: "alice"}, "bob": {Name: "bob"},
		"carol": {Name: "carol", Roles: []string{refill.RoleLead}}}}
	if err := (&control.Control{Config: cfg}).Offer(context.Background(), s); err != nil {
		panic(err)
	}
}

func golden(t *testing.T, name string, blocks []slack.Block) {
	t.Helper()
	// Unescaped, so the golden shows <links> and &amp; as Slack gets them.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(map[string]any{"blocks": blocks}); err != nil {
		t.Fatal(err)
	}
	got := buf.Bytes()
	// Slack's own types read the message back: it is well-formed Block Kit.
	var back struct {
		Blocks slack.Blocks `json:"blocks"`
	}
	if err := json.Unmarshal(got, &back); err != nil || len(back.Blocks.BlockSet) != len(blocks) {
		t.Errorf("%s: slack-go reads back %d of %d blocks: %v", name, len(back.Blocks.BlockSet), len(blocks), err)
	}
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./notify -run Golden -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s (go test ./notify -run Golden -update rewrites it):\n%s", name, path, got)
	}
}

// TestGoldenMessages pins the Slack messages a person reads.
func TestGoldenMessages(t *testing.T) {
	pending := fixedPlan(refill.StatusPending, refill.TierSemiAuto)
	pending.Unmet = []string{"an approval by someone other than alice"}
	golden(t, "plan-pending", notify.Message(pending, "https://refill.example.com"))

	manual := fixedPlan(refill.StatusPending, refill.TierManual)
	manual.Plan.Attention = []string{refill.FailedProofReason("revenue_daily", "a second build of 2026-11-02 differed from the first"), "no idempotency proof for orders_daily (1 of 2 datasets): run `refill prove`"}
	golden(t, "plan-manual-failed-proof", notify.Message(manual, "https://refill.example.com"))
	for _, bl := range notify.Message(manual, "https://refill.example.com") {
		if a, ok := bl.(*slack.ActionBlock); ok {
			for _, el := range a.Elements.ElementSet {
				if b, ok := el.(*slack.ButtonBlockElement); ok && b.ActionID == notify.ActionApprove {
					t.Error("a manual plan before its snapshot and scope offers Approve")
				}
			}
		}
	}
	manual.Checklist = []refill.ChecklistStep{{PlanID: "3fa9c2d1", Step: refill.ChecklistSnapshot, Actor: "alice"}, {PlanID: "3fa9c2d1", Step: refill.ChecklistScope, Actor: "alice", Note: "the week only"}}
	offer(manual)
	golden(t, "plan-manual-checklist-done", notify.Message(manual, "https://refill.example.com"))

	semiFailed := fixedPlan(refill.StatusPending, refill.TierSemiAuto)
	semiFailed.Plan.Reasons = []string{refill.FailedProofReason("orders_daily", "a second build of 2026-11-02 differed"), "range is 9 days, over the auto limit of 7"}
	blocks := notify.Message(semiFailed, "https://refill.example.com")
	golden(t, "plan-semi-failed-proof", blocks)
	if b, _ := json.Marshal(blocks); strings.Count(string(b), "a second build of 2026-11-02 differed") != 1 {
		t.Errorf("the failed proof is not shown exactly once: %s", b)
	}

	// The rebuild's content diffs lead, after a failed proof: a changed
	// amount with the rows the same, an unchanged partition, one not
	// diffed; a sample value that tries to ping the channel and break out
	// of its code span.
	diffed := fixedPlan(refill.StatusPending, refill.TierSemiAuto)
	diffed.Plan.Reasons = semiFailed.Plan.Reasons
	o, nw := json.Number("0"), json.Number("41230.50")
	v := func(s string) *string { return &s }
	for i := range diffed.Plan.Steps[0].Partitions {
		diffed.Plan.Steps[0].Partitions[i].Diff = &refill.PartitionDiff{Changed: n64(0), Unchanged: 1000, Key: []string{"order_id"}}
	}
	diffed.Plan.Steps[0].Partitions[1].Diff = &refill.PartitionDiff{Changed: n64(5), Unchanged: 995, Key: []string{"order_id"},
		Columns: map[string]refill.ColumnDiff{"amount": {OldSum: &o, NewSum: &nw, Changed: n64(5)}},
		Sample: []refill.DiffRow{{Old: map[string]*string{"order_id": v("7"), "amount": v("0")}, New: map[string]*string{"order_id": v("7"), "amount": v("41230.50")}},
			{Old: map[string]*string{"order_id": v("8"), "note": v("a")}, New: map[string]*string{"order_id": v("8"), "note": v("<!channel> `x`")}}}}
	for i := range diffed.Plan.Steps[1].Partitions {
		diffed.Plan.Steps[1].Partitions[i].Diff = refill.SkippedDiff("over plan.diff_budget")
	}
	blocks = notify.Message(diffed, "https://refill.example.com")
	golden(t, "plan-content-diff", blocks)
	var raw bytes.Buffer
	enc := json.NewEncoder(&raw)
	enc.SetEscapeHTML(false) // as Slack reads it: a "<" here would be one in the message
	if err := enc.Encode(blocks); err != nil {
		t.Fatal(err)
	}
	text := raw.String()
	failedAt, changeAt, impactAt := strings.Index(text, "Failed proof"), strings.Index(text, "orders_daily* 1 of 7 partitions changes (5 rows changed, amount 0.00 → 41,230.50)"), strings.Index(text, "Rebuild orders_daily")
	if failedAt < 0 || changeAt < 0 || impactAt < 0 || !(failedAt < changeAt && changeAt < impactAt) {
		t.Errorf("want the failed proof (%d), then the change (%d), then the impact (%d):\n%s", failedAt, changeAt, impactAt, text)
	}
	if strings.Contains(text, "<!channel>") {
		t.Errorf("a sample value pings the channel: %s", text)
	}

	running := fixedPlan(refill.StatusRunning, refill.TierManual)
	running.Approvals = []refill.Approval{{Actor: "carol", Decision: refill.DecisionApprove, Note: "checked with finance"}}
	golden(t, "plan-running-no-public-url", notify.Message(running, ""))

	blocked := fixedPlan(refill.StatusBlocked, refill.TierSemiAuto)
	blocked.Plan.Gate = refill.GateVerdict{Passed: false, Checked: []string{"orders"}, Findings: []refill.Finding{
		{Dataset: "orders", Partition: "2026-11-02", Check: "not_null", Column: "amount", Observed: 0.4, Limit: 0.01},
		{Dataset: "orders", Partition: "2026-11-03", Check: "volume", Message: "0 rows against a median of 1,000"},
	}}
	golden(t, "plan-blocked", notify.Message(blocked, "https://refill.example.com"))

	approved := fixedPlan(refill.StatusApproved, refill.TierSemiAuto)
	golden(t, "outcome-approved", notify.Outcome(&refill.Event{Kind: refill.EventApproval, Actor: "bob", PlanID: "3fa9c2d1",
		Detail: refill.Detail(map[string]any{"note": "approved via Slack"})}, approved, "https://refill.example.com"))

	golden(t, "alert-blocked-at-apply", notify.Alert(&refill.Event{Kind: refill.EventGateResult, Actor: "alice", PlanID: "3fa9c2d1",
		Detail: refill.Detail(map[string]any{"passed": false, "at": "apply", "failed": 1, "findings": blocked.Plan.Gate.Findings[:1]})},
		fixedPlan(refill.StatusBlocked, refill.TierSemiAuto), nil, "https://refill.example.com"))

	dev := 0.3
	rep := &control.Report{PlanID: "3fa9c2d1", Status: refill.StatusApplied, Tolerance: 0.1, Total: 9, Published: 9, Flagged: 1,
		Partitions: []control.PartitionReport{{Dataset: "orders_daily", Partition: "2026-11-02", Expected: n64(1102),
			After: &refill.Digest{Rows: 1433}, Published: true, Deviation: &dev, Flagged: true}}}
	golden(t, "alert-off-tolerance", notify.Alert(&refill.Event{Kind: refill.EventRunFinished, Actor: "alice", PlanID: "3fa9c2d1"},
		fixedPlan(refill.StatusApplied, refill.TierSemiAuto), rep, "https://refill.example.com"))

	review := fixedPlan(refill.StatusNeedsReview, refill.TierManual)
	review.Reviews = []store.Review{{Dataset: "partner_feed", Partition: "2026-11-02", Why: "an attempt of run 1 ended with its outcome unknown"}}
	golden(t, "alert-needs-review", notify.Alert(&refill.Event{Kind: refill.EventNeedsReview, Actor: "refill", PlanID: "3fa9c2d1", Dataset: "partner_feed", Partition: "2026-11-02",
		Detail: refill.Detail(map[string]any{"why": "an attempt of run 1 ended with its outcome unknown"})}, review, nil, "https://refill.example.com"))
	golden(t, "plan-needs-review", notify.Message(review, "https://refill.example.com"))
	golden(t, "alert-waiting", notify.Alert(&refill.Event{Kind: refill.EventRunWaiting, Actor: "refill", PlanID: "3fa9c2d1", Dataset: "orders_daily", Partition: "2026-11-03",
		Detail: refill.Detail(map[string]any{"waiting_for": "warehouse", "since": "2026-11-30T12:03:11Z", "error": "dial tcp 10.0.0.5:5432: connect: connection refused"})},
		fixedPlan(refill.StatusRunning, refill.TierSemiAuto), nil, "https://refill.example.com"))
	golden(t, "outcome-paused", notify.Outcome(&refill.Event{Kind: refill.EventRunPaused, Actor: "refill", PlanID: "3fa9c2d1"},
		fixedPlan(refill.StatusRunning, refill.TierSemiAuto), "https://refill.example.com"))
	golden(t, "outcome-resolved", notify.Outcome(&refill.Event{Kind: refill.EventResolved, Actor: "carol", PlanID: "3fa9c2d1", Dataset: "partner_feed", Partition: "2026-11-02",
		Detail: refill.Detail(map[string]any{"ran": true, "reason": "the partner's receipt 8812"})}, review, "https://refill.example.com"))

	golden(t, "alert-freeze", notify.Alert(&refill.Event{Kind: refill.EventFreeze, Actor: "carol",
		Detail: refill.Detail(map[string]any{"reason": "warehouse migration"})}, nil, nil, ""))
}

// TestMessageButtons checks the buttons follow the plan's status, and
// carry the plan's ID.
func TestMessageButtons(t *testing.T) {
	for _, c := range []struct {
		status refill.Status
		stale  bool
		want   []string
	}{
		{refill.StatusPending, false, []string{notify.ActionApprove, notify.ActionReject}},
		{refill.StatusPending, true, []string{notify.ActionReject}},
		{refill.StatusRunning, false, []string{notify.ActionCancel}},
		{refill.StatusApproved, false, []string{notify.ActionReject}}, // not started: a reviewer may still reject it
		{refill.StatusApplied, false, nil},
		{refill.StatusBlocked, false, nil},
	} {
		s := fixedPlan(c.status, refill.TierSemiAuto)
		if c.stale {
			s.Stale = []string{"orders_daily: the job changed"}
		}
		offer(s) // again: the buttons are control's answer for the channel, as the plan is now
		var got []string
		for _, b := range notify.Message(s, "") {
			a, ok := b.(*slack.ActionBlock)
			if !ok {
				continue
			}
			for _, el := range a.Elements.ElementSet {
				btn := el.(*slack.ButtonBlockElement)
				if btn.Value != s.Plan.ID {
					t.Errorf("%s: button %s has value %q, want the plan ID", c.status, btn.ActionID, btn.Value)
				}
				got = append(got, btn.ActionID)
			}
		}
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("%s (stale %v): buttons %v, want %v", c.status, c.stale, got, c.want)
		}
	}
}
