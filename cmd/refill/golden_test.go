package main

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// started is when the test process began: a run that crosses midnight UTC
// prints real-clock times of two dates.
var started = time.Now().UTC()

// normalise makes a command's output repeatable, by one rule: what the
// fixed REFILL_NOW decides stays as printed; what cannot repeat is
// replaced. Plan IDs are random: each becomes PLAN1, PLAN2… in order of
// first appearance. Plan hashes and the audit chain's hashes depend on
// them: sha256:… becomes sha256:HASH. Times on the real clock (today's
// date, UTC, or the date the tests started on) become REAL-TIME; the plans' own times come from REFILL_NOW
// and stay. Absolute paths of the test's directory become DIR. The entry
// at which the warehouse anchored the audit log depends on how concurrent
// publishes interleaved: "anchor at entry N", and so do the audit
// entries' sequence numbers in JSON ("seq": N). A worker is named by its
// host and process: "worker": "HOST:PID".
func normalise(out, dir string, ids []string) string {
	out = strings.ReplaceAll(out, dir, "DIR")
	for i, id := range ids {
		out = strings.ReplaceAll(out, id, "PLAN"+strconv.Itoa(i+1))
	}
	out = regexp.MustCompile(`(sha256|hmac-sha256):[0-9a-f]{8,64}…?`).ReplaceAllString(out, "$1:HASH")
	out = regexp.MustCompile(`anchor at entry \d+`).ReplaceAllString(out, "anchor at entry N")
	out = regexp.MustCompile(`"seq": \d+`).ReplaceAllString(out, `"seq": N`)
	out = regexp.MustCompile(`"anchor": \d+`).ReplaceAllString(out, `"anchor": N`)
	out = regexp.MustCompile(`"(worker|holder)": "[^"]*:\d+"`).ReplaceAllString(out, `"$1": "HOST:PID"`)
	for _, day := range []time.Time{started, time.Now().UTC()} {
		out = regexp.MustCompile(day.Format("2006-01-02")+`[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?( UTC|Z)?`).ReplaceAllString(out, "REAL-TIME")
	}
	return out
}

// TestGoldenOutput pins what a person reads from each command, run on the
// demo's state: plan, show, plans, report, history, check, prove, lineage
// and audit verify. `go test ./cmd/refill -run Golden -update` rewrites
// the files when the output really changed; review the diff.
func TestGoldenOutput(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	r := run(t, root, nil, "demo", "d", "-o", "json")
	if r.code != 0 {
		t.Fatalf("demo: %s", r.stderr)
	}
	demo := decode[struct {
		Blocked struct {
			ID string `json:"id"`
		} `json:"blocked"`
		Plans []struct {
			ID string `json:"id"`
		} `json:"plans"`
		RolledBack string `json:"rolled_back"`
		Redo       string `json:"redo"`
		Watch      struct {
			Decisions []struct {
				PlanID string `json:"plan_id"`
			} `json:"decisions"`
		} `json:"watch"`
	}](t, r.stdout)
	d := filepath.Join(root, "d")
	ids := []string{demo.Blocked.ID}
	for _, p := range demo.Plans {
		ids = append(ids, p.ID)
	}
	ids = append(ids, demo.Redo)
	// The plan command's own output, as a person reads it when planning.
	planned := step(t, d, 0, "", "plan", "sessions", "--from", "2026-11-25", "--to", "2026-11-27", "--reason", "golden", "--as", "alice").stdout
	m := regexp.MustCompile(`^Plan ([0-9a-f]+) `).FindStringSubmatch(planned)
	if m == nil {
		t.Fatalf("refill plan printed no plan ID first:\n%s", planned)
	}
	newPlan := m[1]
	ids = append(ids, newPlan)
	for _, dec := range demo.Watch.Decisions {
		ids = append(ids, dec.PlanID)
	}

	golden(t, "plan", normalise(planned, root, ids))
	for _, c := range []struct {
		name string
		args []string
	}{
		{"plan-show", []string{"show", newPlan}},
		{"plan-json", []string{"show", newPlan, "-o", "json"}},
		{"report-json", []string{"report", demo.Redo, "-o", "json"}},
		{"history-json", []string{"history", "revenue_daily", "--partition", "2026-11-23", "-o", "json"}},
		{"show", []string{"show", demo.Redo}},
		{"plans", []string{"plans"}},
		{"report", []string{"report", demo.Redo}},
		{"history", []string{"history", "revenue_daily", "--partition", "2026-11-23"}},
		{"check", []string{"check", "events_raw", "--from", "2026-11-17", "--to", "2026-11-30"}},
		{"prove", []string{"prove", "sessions", "--partition", "2026-11-28", "--as", "alice"}},
		{"lineage", []string{"lineage"}},
		{"lineage-mermaid", []string{"lineage", "--format", "mermaid"}},
		{"audit-verify", []string{"audit", "verify"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := run(t, d, nil, c.args...)
			got := normalise(r.stdout, root, ids)
			if r.code != 0 && r.code != 3 {
				t.Fatalf("%v: exit %d\n%s", c.args, r.code, r.stderr)
			}
			golden(t, c.name, got)
		})
	}
}

// golden compares got with testdata/golden/NAME.txt, or writes it under
// -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".txt")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./cmd/refill -run Golden -update writes it)", err)
	}
	if got != string(want) {
		t.Errorf("output changed from %s (go test ./cmd/refill -run Golden -update, then review the diff)\n--- got ---\n%s", path, got)
	}
}

// TestManualPlanNamesItsFailedProof: the demo's manual plan, decided by
// its tags, still tells the lead that billing's proof failed — first, in
// the text, and in -o json's attention.
func TestManualPlanNamesItsFailedProof(t *testing.T) {
	t.Parallel()
	d := setup(t)
	var manual string
	for _, p := range decode[struct {
		Plans []planJSON `json:"plans"`
	}](t, demoOut).Plans {
		if p.Tier == "manual" && manual == "" {
			manual = p.ID // the first, made while billing's proof failed
		}
	}
	if manual == "" {
		t.Fatal("the demo made no manual plan")
	}
	js := decode[struct {
		Reasons   []string `json:"reasons"`
		Attention []string `json:"attention"`
	}](t, step(t, d, 0, "", "show", manual, "-o", "json").stdout)
	if len(js.Attention) == 0 || !strings.HasPrefix(js.Attention[0], "the idempotency proof of revenue_daily failed: ") {
		t.Errorf("attention of the manual plan: %q (reasons %q)", js.Attention, js.Reasons)
	}
	text := step(t, d, 0, "", "show", manual).stdout
	i, j := strings.Index(text, "FAILED PROOF  the idempotency proof of revenue_daily failed"), strings.Index(text, "Source gate:")
	if i < 0 || j < 0 || i > j {
		t.Errorf("show does not lead with the failed proof:\n%s", text)
	}
	if strings.ContainsRune(text, 0) || strings.Contains(text, "\x1b[") {
		t.Errorf("show to a pipe carries colour or marks: %q", text[:min(len(text), 400)])
	}
	// The demo rolled this plan back: show and report say so.
	if rolled := decode[struct {
		RolledBack string `json:"rolled_back"`
	}](t, demoOut).RolledBack; rolled == manual {
		if !strings.Contains(text, "(it was applied and rolled back: the partitions hold what they held before)") {
			t.Errorf("show of a rolled-back plan does not say so:\n%s", text)
		}
		if r := step(t, d, 0, "", "report", manual); !strings.Contains(r.stdout, "It was rolled back") {
			t.Errorf("report of a rolled-back plan does not say so:\n%s", r.stdout)
		}
	} else {
		t.Errorf("the demo rolled back %q, not its first manual plan %s", rolled, manual)
	}
}
