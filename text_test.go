package refill

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCheckText(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		what, text, want string
	}{
		{"empty", "", ""},
		{"a sentence", "INC-4711: events_raw re-delivered by the vendor — rebuild", ""},
		{"exactly the limit", strings.Repeat("é", MaxText), ""},
		{"one over", strings.Repeat("x", MaxText+1), "--reason is 1001 characters long: at most 1000 characters are allowed"},
		{"900 KB", strings.Repeat("x", 900<<10), "--reason is 921600 characters long"},
		{"an escape sequence", "\x1b[2J\x1b[H\x1b[32mApproved by carol (lead)", "--reason holds a control character (U+001B at character 1): write it on one line without control characters"},
		{"a newline", "fine\nApproved by carol", "--reason holds a line break (U+000A at character 5): write it on one line without control characters"},
		{"a carriage return", "fine\rApproved", "--reason holds a line break (U+000D at character 5)"},
		{"a tab", "a\tb", "--reason holds a control character (U+0009 at character 2)"},
		{"DEL", "a\x7f", "(U+007F at character 2)"},
		{"a C1 CSI", "a\u009b2J", "--reason holds a control character (U+009B at character 2)"},
		{"a right-to-left override", "approve \u202eevil", "--reason holds a bidirectional control character (U+202E at character 9), which can make text read differently from what it says"},
		{"an isolate", "\u2066x\u2069", "(U+2066 at character 1)"},
		{"not UTF-8", "ok \xff", "--reason is not valid UTF-8 (byte 0xFF at byte 4)"},
	} {
		err := CheckText("--reason", c.text)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.what, err)
		case c.want != "" && err == nil:
			t.Errorf("%s: accepted", c.what)
		case c.want != "" && !strings.Contains(err.Error(), c.want):
			t.Errorf("%s: %q, want it to hold %q", c.what, err, c.want)
		case c.want != "" && (!errors.Is(err, ErrBadInput) || ExitCode(err) != ExitBadInput):
			t.Errorf("%s: %v is not bad input", c.what, err)
		}
	}
	var te *TextError
	if err := CheckText("note", "a\x00b"); !errors.As(err, &te) || te.Field != "note" {
		t.Errorf("%v: want a *TextError for field note", err)
	}
}

func TestClipText(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "short", strings.Repeat("ü", MaxText), strings.Repeat("x", MaxText+1), strings.Repeat("日本", 900<<9)} {
		got := ClipText(s)
		n := utf8.RuneCountInString(s)
		switch {
		case n <= MaxText && got != s:
			t.Errorf("%d characters: clipped to %q", n, got)
		case n > MaxText && (utf8.RuneCountInString(got) != MaxText || !strings.HasSuffix(got, "…") || !strings.HasPrefix(s, strings.TrimSuffix(got, "…"))):
			t.Errorf("%d characters: clipped to %d characters %q…", n, utf8.RuneCountInString(got), got[:20])
		}
	}
}

func TestUnprintable(t *testing.T) {
	t.Parallel()
	for r, want := range map[rune]bool{'a': false, '\n': false, '\t': false, 'é': false, '…': false,
		0x1b: true, '\r': true, 0x7f: true, 0x9b: true, 0x202e: true, 0x2069: true, 0x200f: false} {
		if Unprintable(r) != want {
			t.Errorf("Unprintable(%U) = %v, want %v", r, !want, want)
		}
	}
}

func TestOneLine(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"late sessions — INC-4711":      "late sessions — INC-4711",
		"ok\n  approve by carol\tlead":  `ok\u000a  approve by carol\u0009lead`,
		"\x1b[2J\u009b\u202eevil\x7f\r": `\u001b[2J\u009b\u202eevil\u007f\u000d`,
		"":                              "",
	} {
		if got := OneLine(in); got != want {
			t.Errorf("OneLine(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestVisible(t *testing.T) {
	t.Parallel()
	if got, want := Visible("line one\n\tline two \x1b[2J\u202e"), "line one\n\tline two \\u001b[2J\\u202e"; got != want {
		t.Errorf("Visible: %q, want %q", got, want)
	}
}
