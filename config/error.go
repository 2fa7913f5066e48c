package config

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/refill-dev/refill"
)

// Error is one problem in a configuration file. It carries the file, line and
// key separately so that an editor integration or a web form can point at the
// spot, and it prints as "file:line: key: message" so that a person at a
// terminal can jump there.
//
// Every Error is bad input: errors.Is(err, refill.ErrBadInput) holds, which is
// how the command line maps a broken config to exit code 2.
type Error struct {
	// File is the name the caller gave Parse or Load, as it was given.
	File string
	// Line is 1-based; 0 means the problem has no position (the file could
	// not be read at all).
	Line int
	// Key is the dotted path of the offending key, such as
	// datasets.events_daily.upstream, or empty when the whole file is meant.
	Key string
	// Msg says what is wrong and, where it can, what would be right.
	Msg string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap classifies every configuration problem as bad input.
func (e *Error) Unwrap() error { return refill.ErrBadInput }

// Errors is every problem found in one file, sorted by line. Reporting them
// together spares the user a fix-one-rerun loop; Error prints one per line.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap exposes each problem, so errors.As finds the first *Error and
// errors.Is finds refill.ErrBadInput.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// errorList collects problems while a file is checked.
type errorList struct {
	file string
	errs []*Error
}

func (l *errorList) add(line int, key, format string, args ...any) {
	l.errs = append(l.errs, &Error{File: l.file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
}

// err returns the collected problems sorted by line (ties keep the order they
// were found in), or nil when there are none. The result is a nil error, not a
// nil Errors, so callers can compare it with nil safely.
func (l *errorList) err() error {
	if len(l.errs) == 0 {
		return nil
	}
	es := slices.Clone(l.errs)
	slices.SortStableFunc(es, func(a, b *Error) int { return cmp.Compare(a.Line, b.Line) })
	es = slices.CompactFunc(es, func(a, b *Error) bool { return *a == *b })
	return Errors(es)
}

// fromYAML turns an error from goccy/go-yaml into an Error at the same line.
// goccy's own text prints the source around the problem over several lines;
// the message alone fits the one-line "file:line: key: message" shape, and the
// key comes from ix when the token sits where a key or value was indexed, or
// else from the tokens before the error.
func fromYAML(file string, err error, ix *index, data []byte) *Error {
	// Line 1 stands in when goccy gives no position, so that every message
	// keeps the file:line: shape editors and scripts look for.
	e := &Error{File: file, Line: 1, Msg: firstLine(err.Error())}
	var ye yaml.Error
	if !errors.As(err, &ye) {
		return e
	}
	e.Msg = firstLine(ye.GetMessage())
	var te *yaml.TypeError
	if errors.As(err, &te) {
		// goccy names the Go struct field and type, which mean nothing to
		// someone editing YAML.
		e.Msg = fmt.Sprintf("want %s, got a %s", describeType(te.DstType), te.SrcType)
	}
	var oe *yaml.OverflowError
	if errors.As(err, &oe) {
		e.Msg = fmt.Sprintf("the number %s is too large", clip(oe.SrcNum))
	}
	e.Msg = goccyPosition.ReplaceAllString(e.Msg, "line $1")
	if tk := ye.GetToken(); tk != nil && tk.Position != nil {
		e.Line = tk.Position.Line
		if ix != nil {
			e.Key = ix.pathAt(tk.Position.Line, tk.Position.Column)
		}
		if e.Key == "" {
			e.Key = keyBefore(data, tk.Position.Line, tk.Position.Column)
		}
	}
	return e
}

// goccyPosition matches the "[line:col]" goccy writes inside some messages,
// such as `mapping key "table" already defined at [5:5]`.
var goccyPosition = regexp.MustCompile(`\[(\d+):\d+\]`)

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	// goccy prefixes messages with "[line:col] " when it prints them whole.
	if strings.HasPrefix(s, "[") {
		if i := strings.Index(s, "] "); i > 0 && !strings.ContainsAny(s[:i], " \n") {
			s = s[i+2:]
		}
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	// goccy quotes an offending tab or control character raw.
	s = strings.ReplaceAll(s, "\t", `\t`)
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return '?'
		}
		return r
	}, strings.TrimSpace(s))
}
