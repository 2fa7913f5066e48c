package cli

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
)

var update = flag.Bool("update", false, "rewrite golden files")

func n(v int64) *int64 { return &v }

func goldenPlan() *refill.Plan {
	var parts []refill.PartitionPlan
	start := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 20; i++ {
		parts = append(parts, refill.PartitionPlan{Partition: start.AddDate(0, 0, i).Format("2006-01-02"),
			CurrentRows: n(int64(1000 + i)), ExpectedRows: n(int64(1000 + i)), ExpectedMethod: refill.ExpectedQuery})
	}
	parts[3].ExpectedRows = n(1400) // +39%: marked
	// Content diffs: most partitions unchanged, one whose amounts change
	// with the row count the same (the demo's incident), one whose rows
	// grow, and the last over the budget.
	amount := func(old, new string, changed int64) map[string]refill.ColumnDiff {
		o, nw := json.Number(old), json.Number(new)
		return map[string]refill.ColumnDiff{"amount": {OldSum: &o, NewSum: &nw, Changed: n(changed)}}
	}
	for i := range parts {
		parts[i].Diff = &refill.PartitionDiff{Changed: n(0), Unchanged: *parts[i].CurrentRows, Key: []string{"event_type"},
			Columns: amount("100", "100", 0)}
	}
	v := func(s string) *string { return &s }
	parts[1].Diff = &refill.PartitionDiff{Changed: n(2), Unchanged: 999, Key: []string{"event_type"}, Columns: amount("0", "41230.50", 2),
		Sample: []refill.DiffRow{
			{Old: map[string]*string{"event_type": v("purchase"), "amount": v("0")}, New: map[string]*string{"event_type": v("purchase"), "amount": v("41230.50")}},
			{Old: map[string]*string{"event_type": v("refund\x1b[31m"), "amount": nil}, New: map[string]*string{"event_type": v("refund\x1b[31m"), "amount": v("-3.10")}},
		}}
	parts[3].Diff = &refill.PartitionDiff{OnlyNew: 397, Changed: n(0), Unchanged: 1003, Key: []string{"event_type"}, Columns: amount("100", "497", 0),
		Sample: []refill.DiffRow{{New: map[string]*string{"event_type": v("view"), "amount": v("1")}}}}
	parts[12].ExpectedRows = n(1011)
	parts[12].Diff = &refill.PartitionDiff{OnlyOld: 1, Changed: n(0), Unchanged: 1011, Key: []string{"event_type"}, Columns: amount("100", "90", 0)}
	parts[19].Diff = refill.SkippedDiff("over plan.diff_budget: the plan's diffs compared 40,000 rows of the 40,000 allowed, in 19 of 21 partitions")
	p := &refill.Plan{
		ID: "0a1b2c3d", Status: refill.StatusBlocked, Tier: refill.TierManual,
		Reasons: []string{"revenue_daily is tagged billing (manual_tags)", "range is 31 days, over the manual limit of 30"},
		Attention: []string{refill.FailedProofReason("revenue_daily", "a second build of 2026-10-02 differed from the first (checksum 1a2b -> 3c4d)"),
			"range is 31 days, over the auto limit of 7"},
		Request: refill.Request{Targets: []string{"events_raw"}, From: "2026-10-01", To: "2026-10-31", Reason: "INC-4711", RequestedBy: "alice", Days: 31},
		Steps: []refill.Step{
			{Dataset: "events_daily", Order: 1, Kind: refill.JobQuery, Table: "events_daily", Tags: []string{"aggregate"}, Partitions: parts},
			{Dataset: "revenue_daily", Order: 2, Kind: refill.JobSQL, Table: "revenue_daily", Tags: []string{"billing"}, Partitions: []refill.PartitionPlan{
				{Partition: "2026-10-01", CurrentRows: n(0), ExpectedRows: n(1), ExpectedMethod: refill.ExpectedHistory,
					Diff: refill.SkippedDiff("over plan.diff_budget: the plan's diffs compared 40,000 rows of the 40,000 allowed, in 19 of 21 partitions")},
			}},
			{Dataset: "partner_feed", Order: 2, Kind: refill.JobCommand, Partitions: []refill.PartitionPlan{
				{Partition: "2026-10-01", ExpectedMethod: refill.ExpectedUnknown, Diff: refill.SkippedDiff("a command job writes outside the warehouse's transaction, so its rebuild cannot be rehearsed and compared")},
			}},
		},
		Sources: []string{"events_raw"},
		Gate: refill.GateVerdict{Passed: false, Checked: []string{"events_raw"}, Findings: []refill.Finding{
			{Dataset: "events_raw", Partition: "2026-10-04", Check: "not_null", Column: "amount", Observed: 0.97, Limit: 0.01},
			{Dataset: "events_raw", Partition: "2026-10-01", Check: "volume", Warning: true, Passed: true, Message: "insufficient history: 2 same-weekday partitions, need 4"},
			{Dataset: "events_raw", Partition: "2026-10-02", Check: "volume", Warning: true, Passed: true, Message: "insufficient history: 2 same-weekday partitions, need 4"},
			{Dataset: "events_raw", Partition: "2026-10-03", Check: "volume", Warning: true, Passed: true, Message: "insufficient history: 3 same-weekday partitions, need 4"},
			{Dataset: "events_raw", Partition: "2026-10-12", Check: "volume", Warning: true, Passed: true, Message: "on a calendar day: 12 rows against a median of 1,000"},
		}},
		CreatedAt: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
	}
	p.Hash = p.ComputeHash()
	return p
}

func TestRenderPlanGolden(t *testing.T) {
	got := paint(renderPlan(goldenPlan(), &refill.Config{}), false)
	path := filepath.Join("testdata", "plan.txt")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./internal/cli -update creates it)", err)
	}
	if got != string(want) {
		t.Errorf("plan text differs from %s:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// TestFailedProofIsRedOnATerminal: the failed proof leads the plan, red on
// a terminal and unmarked elsewhere.
func TestFailedProofIsRedOnATerminal(t *testing.T) {
	out := renderPlan(goldenPlan(), &refill.Config{})
	want := "  FAILED PROOF  the idempotency proof of revenue_daily failed"
	if i, j := strings.Index(paint(out, false), want), strings.Index(paint(out, false), "Source gate:"); i < 0 || j < 0 || i > j {
		t.Errorf("the failed proof does not come before the gate:\n%s", paint(out, false))
	}
	if !strings.Contains(paint(out, true), "\x1b[1;31m"+want) {
		t.Errorf("on a terminal the failed proof is not red:\n%q", paint(out, true))
	}
	if strings.ContainsRune(paint(out, false), 0) || strings.Contains(paint(out, false), "\x1b[") {
		t.Errorf("off a terminal, marks or colours remain:\n%q", paint(out, false))
	}
}

// TestPaintedThroughTheEscaper: on a terminal only red's colour codes
// reach it raw; a control character in the text (a proof may quote
// warehouse data) is shown, never run, and a planted mark is text.
func TestPaintedThroughTheEscaper(t *testing.T) {
	var out strings.Builder
	p := goldenPlan()
	p.Attention = []string{refill.FailedProofReason("revenue_daily", "row 2026-10-02\x00</red>\x1b[2J\n  - approved by carol")}
	if err := printPainted(newEscaper(&out), renderPlan(p, &refill.Config{}), true); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if !strings.Contains(got, "\x1b[1;31m  FAILED PROOF  the idempotency proof of revenue_daily failed") || !strings.Contains(got, "\x1b[0m") {
		t.Errorf("no red on the terminal:\n%q", got)
	}
	if strings.Contains(got, "\x1b[2J") || strings.Contains(got, "\n  - approved by carol") || strings.ContainsRune(got, 0) {
		t.Errorf("the reason's control characters reached the terminal:\n%q", got)
	}
}
