package refill

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxText bounds every free text a person gives refill: a sentence or two
// and a ticket link, not a document. A reason of hundreds of kilobytes
// costs every reader of every list that shows it.
const MaxText = 1000

// TextError is a person's text refused by CheckText. It is bad input.
type TextError struct {
	// Field names the text as the person gave it: "--reason", "--note".
	// A door that spells its fields otherwise may rename it.
	Field string
	// Problem says what is wrong and what to do, after the field's name.
	Problem string
}

func (e *TextError) Error() string { return e.Field + " " + e.Problem }

// Unwrap classifies the error as bad input (exit 2, HTTP 400).
func (e *TextError) Unwrap() error { return ErrBadInput }

// CheckText is the one rule for every free text a person gives refill — a
// plan's reason, a decision's or a checklist step's note, the reason of a
// cancel, a freeze, an acceptance, a schema baseline, a forced rollback or
// a dropped snapshot: at most MaxText characters of valid UTF-8, with no
// control character (Unicode Cc, line breaks and tabs included) and no
// bidirectional override or isolate (U+202A–U+202E, U+2066–U+2069), which
// make text read differently from what it says. Such text is stored,
// hashed into plans, posted to Slack and printed on terminals, so it is
// refused where it comes in, not cleaned where it goes out.
//
// An empty text passes: whether one is required is the caller's rule.
// The error names field and what is wrong, never echoes the text, and
// wraps ErrBadInput.
func CheckText(field, text string) error {
	if !utf8.ValidString(text) {
		at := 0
		for i, r := range text {
			if r == utf8.RuneError {
				if _, size := utf8.DecodeRuneInString(text[i:]); size == 1 {
					at = i
					break
				}
			}
		}
		return &TextError{field, fmt.Sprintf("is not valid UTF-8 (byte 0x%02X at byte %d): send it as UTF-8 text", text[at], at+1)}
	}
	if n := utf8.RuneCountInString(text); n > MaxText {
		return &TextError{field, fmt.Sprintf("is %d characters long: at most %d characters are allowed; say it in a sentence or two and link a ticket for the rest", n, MaxText)}
	}
	n := 0
	for _, r := range text {
		n++
		switch {
		case r == '\n' || r == '\r':
			return &TextError{field, fmt.Sprintf("holds a line break (U+%04X at character %d): write it on one line without control characters", r, n)}
		case unicode.IsControl(r):
			return &TextError{field, fmt.Sprintf("holds a control character (U+%04X at character %d): write it on one line without control characters", r, n)}
		case Bidi(r):
			return &TextError{field, fmt.Sprintf("holds a bidirectional control character (U+%04X at character %d), which can make text read differently from what it says: remove it", r, n)}
		}
	}
	return nil
}

// Bidi reports whether r is a bidirectional embedding, override or
// isolate (U+202A–U+202E, U+2066–U+2069): characters that reorder the
// text around them on screen.
func Bidi(r rune) bool {
	return r >= 0x202A && r <= 0x202E || r >= 0x2066 && r <= 0x2069
}

// Unprintable reports whether r must never reach a terminal or a page
// as it is: a control character (Unicode Cc) other than a newline or a
// tab, or a bidirectional control (Bidi). Whatever prints stored text
// shows such a rune escaped instead.
func Unprintable(r rune) bool {
	return (unicode.IsControl(r) && r != '\n' && r != '\t') || Bidi(r)
}

// OneLine shows a stored text inside a line of refill's own — an error, an
// unmet requirement, a row of a list, a Slack message — with every
// Unprintable rune and every line break and tab written as its \u escape
// (ESC as \u001b, a newline as \u000a). A text stored before CheckText
// bounded it, or written into the state store by hand, then cannot draw
// lines of its own ("approve by carol") under the ones refill prints, nor
// reorder them.
func OneLine(s string) string {
	return escapeRunes(s, func(r rune) bool { return r == '\n' || r == '\t' || Unprintable(r) })
}

// Visible is OneLine keeping line breaks and tabs: for text of several
// lines that refill shows where nothing escapes it on the way out (a run's
// error, which may quote a job's output, in a Slack message).
func Visible(s string) string { return escapeRunes(s, Unprintable) }

// escapeRunes writes each rune of s that escape selects as its \u escape.
func escapeRunes(s string, escape func(rune) bool) string {
	if !strings.ContainsFunc(s, escape) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if escape(r) {
			fmt.Fprintf(&b, `\u%04x`, r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// ClipText shortens a stored text to at most MaxText characters, the last
// of them an ellipsis, for lists: a text stored before CheckText bounded
// it (or written into the state store by hand) may be any length.
func ClipText(s string) string {
	if len(s) <= MaxText { // bytes ≥ characters
		return s
	}
	n := 0
	for i := range s {
		if n == MaxText-1 {
			if utf8.RuneCountInString(s[i:]) <= 1 {
				return s
			}
			return s[:i] + "…"
		}
		n++
	}
	return s
}

// Known formats the valid names for an "unknown X" message, closest to got
// first so that a typo's fix is the first thing read: (known: a, b, c, ...).
func Known(got string, names []string, limit int) string {
	if len(names) == 0 {
		return "(no others are defined)"
	}
	names = slices.Clone(names)
	slices.SortStableFunc(names, func(a, b string) int { return editDistance(got, a) - editDistance(got, b) })
	more := ""
	if len(names) > limit {
		names, more = names[:limit], ", ..."
	}
	return "(known: " + strings.Join(names, ", ") + more + ")"
}

// editDistance is the Levenshtein distance between a and b, used only to
// order suggestions.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
