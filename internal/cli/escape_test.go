package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/demo"
	"github.com/refill-dev/refill/planner"
	"github.com/refill-dev/refill/project"
	"github.com/refill-dev/refill/store"
	"github.com/refill-dev/refill/store/storetest"
)

func TestEscaper(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"plain text\twith a tab\n", "plain text\twith a tab\n"},
		{"é, 日本, …, ≥ 740", "é, 日本, …, ≥ 740"},
		{"\x1b[2J\x1b[H\x1b[32mApproved by carol (lead)", `\u001b[2J\u001b[H\u001b[32mApproved by carol (lead)`},
		{"a\rb\x00c\x7fd", `a\u000db\u0000c\u007fd`},
		{"csi \u009b2J", `csi \u009b2J`},
		{"\u202eevil\u202c \u2066x\u2069", `\u202eevil\u202c \u2066x\u2069`},
		{"bad \xff\xfe byte", `bad \xff\xfe byte`},
		{"\u200f right-to-left mark stays", "\u200f right-to-left mark stays"},
	} {
		// Whole, and cut into one-byte writes: a character split across
		// writes is held, not escaped as a broken byte.
		for _, split := range []bool{false, true} {
			var b bytes.Buffer
			e := newEscaper(&b)
			if split {
				for i := range len(c.in) {
					if n, err := e.Write([]byte{c.in[i]}); n != 1 || err != nil {
						t.Fatalf("%q: write byte %d: %d, %v", c.in, i, n, err)
					}
				}
			} else if n, err := e.Write([]byte(c.in)); n != len(c.in) || err != nil {
				t.Fatalf("%q: wrote %d of %d: %v", c.in, n, len(c.in), err)
			}
			if err := e.Flush(); err != nil {
				t.Fatal(err)
			}
			if b.String() != c.want {
				t.Errorf("%q (split %v): %q, want %q", c.in, split, b.String(), c.want)
			}
		}
	}
	// A character cut at the very end is written escaped when the output
	// ends.
	var b bytes.Buffer
	e := newEscaper(&b)
	e.Write([]byte("ok \xe2\x80"))
	e.Flush()
	if b.String() != `ok \xe2\x80` {
		t.Errorf("a cut character at the end: %q", b.String())
	}

	// JSON: what encoding/json writes comes out unchanged, and where it
	// leaves a character raw (C1, DEL, an override), the escape is JSON's
	// own and decodes to the same string.
	reason := "\x1b[2J \u009b2J \x7f \u202eevil\n\t“quoted” é"
	doc, err := json.MarshalIndent(map[string]any{"reason": reason, "rows": 12}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	e = newEscaper(&b)
	e.Write(doc)
	var back map[string]any
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || back["reason"] != reason {
		t.Errorf("escaped JSON %s decodes to %q (%v), want %q", b.Bytes(), back["reason"], err, reason)
	}
	plainDoc, _ := json.MarshalIndent(map[string]any{"reason": "late sessions — INC-4711 <b>", "rows": 12}, "", "  ")
	b.Reset()
	newEscaper(&b).Write(plainDoc)
	if !bytes.Equal(b.Bytes(), plainDoc) {
		t.Errorf("JSON without control characters changed:\n%s\n%s", plainDoc, b.Bytes())
	}
}

// TestStoredTextsPrintSafely: a plan reason, a freeze reason and a token's
// user written into the state store by hand — escape sequences that would clear the
// screen and print "Approved by carol (lead)" in green, a C1 control, a
// right-to-left override and a line of its own — reach neither stdout nor
// an error on stderr raw, in text or in JSON.
func TestStoredTextsPrintSafely(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sc, err := demo.Write(ctx, filepath.Join(t.TempDir(), "demo"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	p, err := project.Open(ctx, project.Options{Config: sc.Config, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	good, err := p.Control.Plan(ctx, "alice", planner.Request{Targets: []string{"sessions"}, From: sc.Day(14), To: sc.Day(12), Reason: "late sessions"})
	if err != nil {
		t.Fatal(err)
	}
	// Written by an older refill, before texts were bounded, with their
	// audit entries (so that they count): a plan, a freeze and a token.
	const evil = "\x1b[2J\x1b[H\x1b[32mApproved by carol (lead)\x1b[0m \u009b2J \u202eevil\n  2026-11-30 12:00  approve   by carol"
	old := *good
	old.ID, old.Request.Reason = "0ld0ld0l", evil
	old.Hash = old.ComputeHash()
	plan := &old
	if _, err := p.Store.RecordPlan(ctx, refill.PlanRecord{Plan: plan}); err != nil {
		t.Fatal(err)
	}
	if err := p.Store.Update(ctx, func(tx *store.Tx) error {
		if _, _, err := storetest.RecordFreeze(ctx, tx, &refill.Freeze{By: "carol", Reason: evil, At: time.Now()}, ""); err != nil {
			return err
		}
		// Nothing renders a token's user as a text of its own: only the
		// escaper stands between it and the terminal.
		return storetest.RecordToken(ctx, tx, refill.Token{ID: "tok-evil", User: "bob\x1b[2J\x1b[32m", CreatedBy: "bob", CreatedAt: time.Now()}, "sha256:evil")
	}); err != nil {
		t.Fatal(err)
	}
	p.Close()

	run := func(code int, args ...string) (string, string) {
		t.Helper()
		var out, errs bytes.Buffer
		if got := Main(append([]string{"--config", sc.Config}, args...), &out, &errs); got != code {
			t.Fatalf("refill %s: exit %d, want %d\n%s", strings.Join(args, " "), got, code, errs.String())
		}
		return out.String(), errs.String()
	}
	safe := func(what, s string) {
		t.Helper()
		for _, bad := range []string{"\x1b", "\u009b", "\u202e", "\n  2026-11-30 12:00  approve"} {
			if strings.Contains(s, bad) {
				t.Errorf("%s prints %q raw:\n%s", what, bad, s)
			}
		}
	}
	out, _ := run(0, "show", plan.ID)
	safe("show", out)
	if !strings.Contains(out, `reason    \u001b[2J\u001b[H\u001b[32mApproved by carol (lead)\u001b[0m \u009b2J \u202eevil\u000a  2026-11-30`) {
		t.Errorf("show does not print the reason escaped:\n%s", out)
	}
	out, _ = run(0, "plans")
	safe("plans", out)
	if !strings.Contains(out, `\u001b[2J`) {
		t.Errorf("plans does not show the escapes:\n%s", out)
	}
	out, _ = run(0, "history", "sessions", "--partition", sc.Day(13))
	safe("history", out)
	if !strings.Contains(out, `why        \u001b[2J`) {
		t.Errorf("history does not print the reason escaped:\n%s", out)
	}
	out, _ = run(0, "token", "list")
	safe("token list", out)
	if !strings.Contains(out, `bob\u001b[2J\u001b[32m`) {
		t.Errorf("token list does not show the escapes:\n%s", out)
	}
	_, errs := run(refill.ExitNotPermitted, "freeze", "--reason", "again", "--as", "carol")
	safe("an error on stderr", errs)
	if !strings.Contains(errs, "refill: refill is frozen already") || !strings.Contains(errs, `\u001b[32mApproved`) {
		t.Errorf("the refusal on stderr: %s", errs)
	}

	// JSON says exactly what is stored, with nothing raw.
	out, _ = run(0, "-o", "json", "show", plan.ID)
	safe("show -o json", out)
	var doc struct {
		Request struct {
			Reason string `json:"reason"`
		} `json:"request"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Request.Reason != evil {
		t.Errorf("show -o json: reason %q (%v), want the stored text exactly", doc.Request.Reason, err)
	}
}
