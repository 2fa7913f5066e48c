package control_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/planner"
	"github.com/refill-dev/refill/store"
)

// TestHumanTextsAreBounded: every text a person gives, through every
// decision control takes, keeps one rule (refill.CheckText): a text too
// long, with a control character or a bidirectional override, or not
// UTF-8, is bad input naming its field, and nothing is recorded — no plan,
// no decision, no audit entry.
func TestHumanTextsAreBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	semi := b.plan(t, "alice", "sessions", 14, 12, refill.TierSemiAuto)
	manual := b.plan(t, "alice", "revenue_daily", 20, 19, refill.TierManual)
	ctx := b.ctx

	bad := map[string]string{
		"900 KB":         strings.Repeat("x", 900<<10),
		"1001 chars":     strings.Repeat("é", refill.MaxText+1),
		"escapes":        "\x1b[2J\x1b[H\x1b[32mApproved by carol (lead)",
		"a newline":      "ok\n  2026-11-30 12:00  approve  by carol",
		"an override":    "approved \u202eeton",
		"not UTF-8":      "ok \xff\xfe",
		"a NUL":          "ok\x00",
		"a C1 control":   "ok \u009b2J",
		"an isolate":     "\u2067ok\u2069",
		"a bare tab":     "a\tb",
		"DEL":            "ok\x7f",
		"ESC at the end": "reviewed\x1b",
	}
	acceptReq := func(reason string) control.AcceptRequest {
		return control.AcceptRequest{Dataset: "events_raw", Partition: b.sc.Day(5), Check: "volume", Reason: reason}
	}
	for _, c := range []struct {
		field string
		do    func(text string) error
	}{
		{"--reason", func(s string) error {
			_, err := b.c.Plan(ctx, "alice", planner.Request{Targets: []string{"sessions"}, From: b.sc.Day(9), To: b.sc.Day(8), Reason: s})
			return err
		}},
		{"--note", func(s string) error { _, err := b.c.Approve(ctx, semi.ID, "bob", s); return err }},
		{"--note", func(s string) error { _, err := b.c.Reject(ctx, semi.ID, "bob", s); return err }},
		{"--note", func(s string) error { _, err := b.c.Scope(ctx, manual.ID, "alice", s); return err }},
		{"--note", func(s string) error { _, err := b.c.Signoff(ctx, semi.ID, "bob", s); return err }},
		{"--reason", func(s string) error { _, err := b.c.Cancel(ctx, semi.ID, "alice", s); return err }},
		{"--reason", func(s string) error { _, err := b.c.Freeze(ctx, "carol", s); return err }},
		{"--reason", func(s string) error { _, err := b.c.Unfreeze(ctx, "carol", s); return err }},
		{"--reason", func(s string) error { _, err := b.c.AcceptSchema(ctx, "events_raw", "alice", s); return err }},
		{"--reason", func(s string) error { _, err := b.c.Accept(ctx, acceptReq(s), "alice"); return err }},
		{"--reason", func(s string) error { _, err := b.c.Revoke(ctx, acceptReq(s), "carol"); return err }},
		{"--reason", func(s string) error {
			_, _, err := b.c.Rollback(ctx, semi.ID, "carol", control.RollbackOptions{Force: true, Reason: s})
			return err
		}},
		{"--reason", func(s string) error { _, err := b.c.DropSnapshot(ctx, manual.ID, "carol", s); return err }},
	} {
		for what, text := range bad {
			before := b.snapshotOfState(t)
			err := c.do(text)
			var te *refill.TextError
			if !errors.As(err, &te) || te.Field != c.field || refill.ExitCode(err) != refill.ExitBadInput ||
				!strings.HasPrefix(err.Error(), c.field+" ") {
				t.Errorf("%s: %s: err = %v, want bad input naming %s", c.field, what, err, c.field)
				continue
			}
			if strings.Contains(err.Error(), "\x1b") || len(err.Error()) > 300 {
				t.Errorf("%s: %s: the error echoes the text: %q", c.field, what, err)
			}
			if after := b.snapshotOfState(t); !reflect.DeepEqual(before, after) {
				t.Errorf("%s: %s: refused text changed the state store:\nbefore %+v\nafter  %+v", c.field, what, before, after)
			}
		}
	}

	// A good text passes the same calls: the rule refuses only what it
	// says. (The freeze is a lead's, and lifts again.)
	if _, err := b.c.Freeze(ctx, "carol", "INC-4711: the vendor re-delivers — hold automatic runs"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.c.Unfreeze(ctx, "carol", ""); err != nil {
		t.Fatal(err)
	}
	// The watcher's reasons are refill's own words, not a person's: they
	// are not held to the rule.
	if _, err := b.c.Plan(ctx, refill.Watcher, planner.Request{Targets: []string{"sessions"}, From: b.sc.Day(40), To: b.sc.Day(40),
		Reason: strings.Repeat("1 partition missing ", 60)}); err != nil {
		t.Errorf("the watcher's long reason was refused: %v", err)
	}
}

// stateOfStore is what a refused request must leave as it was.
type stateOfStore struct {
	Audit    int
	Plans    []refill.PlanSummary
	Freeze   bool
	Accepted int
}

func (b *bundle) snapshotOfState(t *testing.T) stateOfStore {
	t.Helper()
	var s stateOfStore
	s.Audit = len(b.entries(t, store.AuditFilter{}))
	var err error
	if s.Plans, err = b.st.Plans(b.ctx, refill.PlanFilter{}); err != nil {
		t.Fatal(err)
	}
	if _, s.Freeze, err = b.st.Freeze(b.ctx); err != nil {
		t.Fatal(err)
	}
	acc, err := b.c.Acceptances(b.ctx, "events_raw", b.sc.Day(5))
	if err != nil {
		t.Fatal(err)
	}
	s.Accepted = len(acc)
	return s
}
