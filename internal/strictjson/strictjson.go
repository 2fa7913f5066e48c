// Package strictjson reads the JSON that comes to refill from outside —
// API and web request bodies, Airflow-style triggers, OpenLineage events,
// Slack's interaction payloads — so that what refill acts on is what the
// sender's reader saw.
//
// encoding/json matches keys to fields without regard to case and lets a
// repeated key win: {"note":"reviewed","NOTE":"rubber stamp"}, or a DAG
// run whose conf holds both start_date and START_DATE, records what a
// person reading the request did not see. Here, at every depth:
//
//   - a key given twice in one object is refused (wherever it is, even in
//     parts refill never reads);
//   - a key that differs only in case from a key refill defines for that
//     object is refused, even in an object that allows other keys;
//   - in an object refill defines, a key it does not define is refused,
//     unless the object is open: its Go type inlines a map for the other
//     keys (a field tagged `json:",inline"`, the JSON package's inlined
//     fallback) — a DAG run's conf, an OpenLineage facet, Slack's payload
//     — where other keys are the sender's business.
//
// What refill defines is read from the Go type the JSON is decoded into
// (its fields' json names), so the rules cannot drift from the types. The
// walk is over github.com/go-json-experiment/json's tokens, and decoding is
// that package's: case-sensitive, with unknown members refused.
package strictjson

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/refill-dev/refill"
)

// Error is a document refused: where, as a JSON pointer (RFC 6901; "" for
// the document as a whole), and what is wrong. It is bad input.
type Error struct {
	Pointer string
	Problem string
}

func (e *Error) Error() string {
	if e.Pointer == "" {
		return e.Problem
	}
	return e.Pointer + ": " + e.Problem
}

// Unwrap classifies the error as bad input (exit 2, HTTP 400).
func (e *Error) Unwrap() error { return refill.ErrBadInput }

// Unmarshal reads data — exactly one JSON document — into v, a pointer,
// after Check has walked it against v's type.
func Unmarshal(data []byte, v any) error {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		return fmt.Errorf("strictjson: Unmarshal needs a pointer, not %T", v)
	}
	if err := Check(data, t.Elem()); err != nil {
		return err
	}
	err := jsonv2.Unmarshal(data, v, jsonv2.RejectUnknownMembers(true))
	var se *jsonv2.SemanticError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return &Error{Pointer: string(se.JSONPointer), Problem: mismatch(se)}
	}
	return &Error{Problem: err.Error()}
}

// Check reads data as exactly one JSON document of valid UTF-8 and walks
// it against shape, the Go type it is meant for (nil: any JSON, still
// with each key once per object). It refuses, naming the key by its JSON
// pointer, what the package documentation lists. It never complains of a
// value's type: decoding does that.
func Check(data []byte, shape reflect.Type) error {
	dec := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowDuplicateNames(true))
	w := walker{dec: dec}
	if err := w.value(shape, ""); err != nil {
		return err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			return syntax(err)
		}
		return &Error{Problem: "more than one JSON document"}
	}
	return nil
}

type walker struct {
	dec *jsontext.Decoder
}

func (w *walker) value(t reflect.Type, ptr string) error {
	t = deref(t)
	switch w.dec.PeekKind() {
	case '{':
		return w.object(t, ptr)
	case '[':
		if _, err := w.dec.ReadToken(); err != nil {
			return syntax(err)
		}
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; w.dec.PeekKind() != ']'; i++ {
			if w.dec.PeekKind() == 0 {
				break // the token read below says what is wrong
			}
			if err := w.value(elem, fmt.Sprintf("%s/%d", ptr, i)); err != nil {
				return err
			}
		}
		if _, err := w.dec.ReadToken(); err != nil {
			return syntax(err)
		}
		return nil
	}
	if _, err := w.dec.ReadToken(); err != nil {
		if err == io.EOF {
			return &Error{Problem: "empty; want a JSON document"}
		}
		return syntax(err)
	}
	return nil
}

func (w *walker) object(t reflect.Type, ptr string) error {
	if _, err := w.dec.ReadToken(); err != nil {
		return syntax(err)
	}
	var s *shape
	var elem reflect.Type
	switch {
	case t == nil:
	case t.Kind() == reflect.Struct && t != rawValue:
		s = shapeOf(t)
	case t.Kind() == reflect.Map:
		elem = t.Elem()
	}
	seen := map[string]bool{}
	for w.dec.PeekKind() != '}' {
		tok, err := w.dec.ReadToken()
		if err != nil {
			return syntax(err)
		}
		name := tok.String()
		at := ptr + "/" + escape(name)
		if seen[name] {
			return &Error{Pointer: at, Problem: "given twice: send each key once"}
		}
		seen[name] = true
		next := elem
		if s != nil {
			var ok bool
			if next, ok = s.fields[name]; !ok {
				if exact := s.fold(name); exact != "" {
					return &Error{Pointer: at, Problem: fmt.Sprintf("refill's key is %q: keys are matched exactly, case included", exact)}
				}
				if !s.open {
					return &Error{Pointer: at, Problem: fmt.Sprintf("unknown key (known: %s)", strings.Join(s.names, ", "))}
				}
			}
		}
		if err := w.value(next, at); err != nil {
			return err
		}
	}
	if _, err := w.dec.ReadToken(); err != nil {
		return syntax(err)
	}
	return nil
}

// rawValue is jsontext.Value: any JSON, kept as it is.
var rawValue = reflect.TypeFor[jsontext.Value]()

func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && t.Kind() == reflect.Interface {
		return nil
	}
	return t
}

// shape is what refill defines for an object: its keys, each with the Go
// type of its value, and whether other keys are allowed.
type shape struct {
	fields map[string]reflect.Type
	names  []string // sorted, for messages
	open   bool
}

// fold returns the key refill defines that name equals but for case, or
// "" when there is none.
func (s *shape) fold(name string) string {
	for _, n := range s.names {
		if strings.EqualFold(n, name) {
			return n
		}
	}
	return ""
}

var shapes sync.Map // reflect.Type → *shape

func shapeOf(t reflect.Type) *shape {
	if s, ok := shapes.Load(t); ok {
		return s.(*shape)
	}
	s := &shape{fields: map[string]reflect.Type{}}
	s.add(t)
	for n := range s.fields {
		s.names = append(s.names, n)
	}
	slices.Sort(s.names)
	shapes.Store(t, s)
	return s
}

// add takes in t's fields as the JSON package names them: by their json
// tag, else their Go name; embedded structs without a name, and struct
// fields tagged inline, lend theirs; a map (or jsontext.Value) tagged
// inline or unknown opens the object.
func (s *shape) add(t reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, hasTag := f.Tag.Lookup("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" && opts == "" {
			continue
		}
		ft := deref(f.Type)
		inline := hasOption(opts, "inline") || hasOption(opts, "unknown")
		switch {
		case inline && (f.Type == rawValue || f.Type.Kind() == reflect.Map):
			s.open = true
			continue
		case inline || (f.Anonymous && name == "" && ft != nil && ft.Kind() == reflect.Struct):
			s.add(ft)
			continue
		case !f.IsExported():
			continue
		}
		if !hasTag || name == "" {
			name = f.Name
		}
		s.fields[name] = f.Type
	}
}

func hasOption(opts, want string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// escape writes a key as a JSON pointer token (RFC 6901).
func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// syntax turns the token reader's error into an Error.
func syntax(err error) error {
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return &Error{Problem: "not JSON: it ends in the middle of the document"}
	}
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		return &Error{Pointer: string(se.JSONPointer), Problem: fmt.Sprintf("not JSON at byte %d: %v", se.ByteOffset, se.Err)}
	}
	return &Error{Problem: "not JSON: " + err.Error()}
}

// mismatch says what a value should have been.
func mismatch(se *jsonv2.SemanticError) string {
	want := "something else"
	if t := deref(se.GoType); t != nil {
		switch t.Kind() {
		case reflect.String:
			want = "a string"
		case reflect.Bool:
			want = "true or false"
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
			want = "a number"
		case reflect.Slice, reflect.Array:
			want = "an array"
		case reflect.Struct, reflect.Map:
			want = "an object"
		}
	}
	got := "a JSON value"
	switch se.JSONKind {
	case 'n':
		got = "null"
	case 'f', 't':
		got = "a boolean"
	case '"':
		got = "a string"
	case '0':
		got = "a number"
	case '{':
		got = "an object"
	case '[':
		got = "an array"
	}
	if se.Err != nil && se.JSONKind == 0 {
		return se.Err.Error()
	}
	return fmt.Sprintf("want %s, not %s", want, got)
}
