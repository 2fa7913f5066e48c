package cli

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/refill-dev/refill"
)

// escaper is what everything refill prints passes through on its way to
// stdout and stderr: text, JSON and error messages alike, so no command can
// forget it. Whoever stored a text — a person before refill bounded texts,
// or someone editing the state store by hand — it cannot clear the screen,
// move the cursor, recolour or reorder what follows: every control
// character but a newline and a tab, and every bidirectional override or
// isolate (refill.Unprintable), is written as a visible \u escape
// (ESC as \u001b), and a byte that is not UTF-8 as \xff.
//
// The \u escapes are JSON's own: -o json, whose encoder already escapes
// C0 controls, comes out byte for byte as it went in, and where it held a
// C1 control, a DEL or an override raw, it now holds the escape of the same
// character, which decodes to the same string.
//
// Writes may come from several goroutines (a run's log lines) and may cut
// a character in two; the piece is held for the next write, and Flush
// writes what is left when the command ends.
type escaper struct {
	mu   sync.Mutex
	w    io.Writer
	held []byte // the start of a character cut by the end of a write
	buf  []byte
}

func newEscaper(w io.Writer) *escaper { return &escaper{w: w} }

// Write writes p, escaped. It reports len(p) written when the underlying
// writer took everything.
func (e *escaper) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	in := p
	if len(e.held) > 0 {
		in = append(e.held, p...)
		e.held = nil
	}
	out, changed := e.buf[:0], false
	start := 0 // where the bytes not yet copied to out begin
	for i := 0; i < len(in); {
		c := in[i]
		if c >= 0x20 && c < 0x7f || c == '\n' || c == '\t' {
			i++
			continue
		}
		if c >= utf8.RuneSelf && !utf8.FullRune(in[i:]) {
			out, changed = append(out, in[start:i]...), true
			e.held = append([]byte(nil), in[i:]...)
			start = len(in)
			break
		}
		r, size := utf8.DecodeRune(in[i:])
		var esc string
		switch {
		case r == utf8.RuneError && size == 1:
			esc = fmt.Sprintf(`\x%02x`, c)
		case refill.Unprintable(r):
			esc = fmt.Sprintf(`\u%04x`, r)
		default:
			i += size
			continue
		}
		out, changed = append(append(out, in[start:i]...), esc...), true
		i += size
		start = i
	}
	if !changed {
		if _, err := e.w.Write(in); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	out = append(out, in[start:]...)
	if cap(out) <= 64<<10 {
		e.buf = out // kept for the next write; a large one is let go
	}
	if len(out) > 0 {
		if _, err := e.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush writes a character left cut at the end of the last write, escaped
// byte by byte: nothing more is coming to complete it.
func (e *escaper) Flush() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.held) == 0 {
		return nil
	}
	var b strings.Builder
	for _, c := range e.held {
		fmt.Fprintf(&b, `\x%02x`, c)
	}
	e.held = nil
	_, err := io.WriteString(e.w, b.String())
	return err
}

// raw is the writer beneath w's escaper, for what must reach a terminal
// as it is: the progress display, which draws with escape sequences of its
// own.
func raw(w io.Writer) io.Writer {
	if e, ok := w.(*escaper); ok {
		return e.w
	}
	return w
}
