package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
)

// trigger is shaped like an Airflow-style trigger: a closed object with an
// open one inside, a list of closed objects, and a value of any JSON.
type trigger struct {
	Conf *triggerConf `json:"conf"`
	Note *string      `json:"note"`
	Tags []tag        `json:"tags"`
	Free any          `json:"free"`
}

type triggerConf struct {
	StartDate string         `json:"start_date"`
	EndDate   string         `json:"end_date"`
	Other     map[string]any `json:",inline"`
}

type tag struct {
	Name string `json:"name"`
}

func TestUnmarshal(t *testing.T) {
	t.Parallel()
	var ok trigger
	if err := Unmarshal([]byte(`{"conf":{"start_date":"2026-11-01","end_date":"2026-11-02","owner":{"team":"data"}},"note":"late","tags":[{"name":"a"}],"free":{"x":[1,{"y":null}]}}`), &ok); err != nil {
		t.Fatal(err)
	}
	if ok.Conf.StartDate != "2026-11-01" || ok.Conf.EndDate != "2026-11-02" || *ok.Note != "late" || ok.Tags[0].Name != "a" ||
		!reflect.DeepEqual(ok.Conf.Other, map[string]any{"owner": map[string]any{"team": "data"}}) {
		t.Errorf("decoded %+v, conf %+v", ok, ok.Conf)
	}

	for _, c := range []struct{ what, body, want string }{
		{"a key twice", `{"note":"reviewed","note":"rubber stamp"}`, `/note: given twice: send each key once`},
		{"a key twice, once escaped", `{"note":"reviewed","n\u006fte":"rubber stamp"}`, `/note: given twice`},
		{"a key twice where refill reads nothing", `{"free":{"a":{"b":1,"b":2}}}`, `/free/a/b: given twice`},
		{"a key twice in an open object", `{"conf":{"owner":1,"owner":2}}`, `/conf/owner: given twice`},
		{"a key twice in a list", `{"tags":[{"name":"a"},{"name":"a","name":"b"}]}`, `/tags/1/name: given twice`},
		{"a key with a slash, twice", `{"free":{"a/b~":1,"a/b~":2}}`, `/free/a~1b~0: given twice`},
		{"another case in an open object", `{"conf":{"start_date":"2026-11-01","end_date":"2026-11-02","START_DATE":"2026-10-01"}}`,
			`/conf/START_DATE: refill's key is "start_date": keys are matched exactly, case included`},
		{"another case, alone", `{"conf":{"End_Date":"2026-11-02"}}`, `/conf/End_Date: refill's key is "end_date"`},
		{"another case by Unicode folding", `{"conf":{"ſtart_date":"2026-10-01"}}`, `refill's key is "start_date"`},
		{"another case at the top", `{"NOTE":"x"}`, `/NOTE: refill's key is "note"`},
		{"an unknown key", `{"note":"x","run_now":true}`, `/run_now: unknown key (known: conf, free, note, tags)`},
		{"an unknown key in a list", `{"tags":[{"nme":"a"}]}`, `/tags/0/nme: unknown key (known: name)`},
		{"a value of the wrong kind", `{"note":1}`, `/note: want a string, not a number`},
		{"a list of the wrong kind", `{"tags":{"name":"a"}}`, `/tags: want an array, not an object`},
		{"two documents", `{}{}`, `more than one JSON document`},
		{"trailing text", `{} x`, `not JSON`},
		{"empty", ``, `empty; want a JSON document`},
		{"cut short", `{"note":`, `not JSON: it ends in the middle of the document`},
		{"not UTF-8", "{\"note\":\"\xff\"}", `not JSON`},
		{"a bare comma", `{"note":"a",}`, `not JSON`},
	} {
		var v trigger
		err := Unmarshal([]byte(c.body), &v)
		var se *Error
		switch {
		case err == nil:
			t.Errorf("%s: accepted %s as %+v", c.what, c.body, v)
		case !errors.As(err, &se) || !errors.Is(err, refill.ErrBadInput):
			t.Errorf("%s: %v (%T) is not a strictjson.Error of bad input", c.what, err, err)
		case !strings.Contains(err.Error(), c.want):
			t.Errorf("%s: %q, want it to say %q", c.what, err, c.want)
		}
	}

	// Any JSON: still each key once.
	if err := Check([]byte(`{"a":[{"b":1},{"b":2,"b":3}]}`), nil); err == nil || err.Error() != "/a/1/b: given twice: send each key once" {
		t.Errorf("Check against no type: %v", err)
	}
	if err := Check([]byte(`{"A":1,"a":2}`), nil); err != nil {
		t.Errorf("two keys of different case where no type defines either: %v", err)
	}
}

// FuzzUnmarshal: whatever the body, Unmarshal never panics, refuses with
// bad input, and what it accepts is JSON with each key once per object,
// no key in another case than refill's, and read as encoding/json reads it
// where encoding/json reads it at all.
func FuzzUnmarshal(f *testing.F) {
	for _, seed := range []string{
		`{"conf":{"start_date":"2026-11-01","end_date":"2026-11-03","owner":"x"},"note":"late"}`,
		`{"conf":{"start_date":"2026-11-01","START_DATE":"2026-10-01"}}`,
		`{"note":"reviewed","NOTE":"rubber stamp"}`,
		`{"note":"a","note":"b"}`,
		`{"free":{"a":{"b":1,"b":2}}}`,
		`{"tags":[{"name":"a"},{"name":"b","Name":"c"}]}`,
		`{"conf":{"ſtart_date":"x"}}`,
		`{"note":"\u006e"}`, `{"n\u006fte":"x"}`, `[]`, `null`, `{}{}`, ``, `{"note":`, "{\"note\":\"\xff\"}",
		`{"free":[[[[[[[[[[{"x":1,"x":2}]]]]]]]]]]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v trigger
		err := Unmarshal(data, &v)
		if err != nil {
			var se *Error
			if !errors.As(err, &se) || !errors.Is(err, refill.ErrBadInput) {
				t.Fatalf("%q: %v (%T) is not a strictjson.Error of bad input", data, err, err)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted what is not JSON: %q", data)
		}
		if path, ok := repeated(data); ok {
			t.Fatalf("accepted %q, which repeats %s", data, path)
		}
		var m map[string]any
		if json.Unmarshal(data, &m) == nil {
			for k := range m {
				for _, defined := range []string{"conf", "note", "tags", "free"} {
					if k != defined && strings.EqualFold(k, defined) {
						t.Fatalf("accepted %q, whose key %q is %q in another case", data, k, defined)
					}
				}
			}
			if c, ok := m["conf"].(map[string]any); ok {
				for k := range c {
					if (k != "start_date" && strings.EqualFold(k, "start_date")) || (k != "end_date" && strings.EqualFold(k, "end_date")) {
						t.Fatalf("accepted %q, whose conf key %q is refill's in another case", data, k)
					}
				}
			}
		}
		// encoding/json, where it can, reads the same.
		var old struct {
			Conf *struct {
				StartDate string `json:"start_date"`
				EndDate   string `json:"end_date"`
			} `json:"conf"`
			Note *string `json:"note"`
		}
		if json.Unmarshal(data, &old) == nil {
			if (old.Note == nil) != (v.Note == nil) || (old.Note != nil && *old.Note != *v.Note) {
				t.Fatalf("%q: note %v, encoding/json reads %v", data, v.Note, old.Note)
			}
			if old.Conf != nil && v.Conf != nil && (old.Conf.StartDate != v.Conf.StartDate || old.Conf.EndDate != v.Conf.EndDate) {
				t.Fatalf("%q: conf %+v, encoding/json reads %+v", data, v.Conf, old.Conf)
			}
		}
	})
}

// repeated finds a key given twice in one object, with encoding/json's
// tokens: a second reader, so the test does not trust the walk it tests.
func repeated(data []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		object bool
		seen   map[string]bool
		key    bool // the next token of an object is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF || err != nil {
			return "", false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.key {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].object {
					stack[len(stack)-1].key = true
				}
				continue
			}
			k := tok.(string)
			if top.seen[k] {
				return k, true
			}
			top.seen[k] = true
			top.key = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, seen: map[string]bool{}, key: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].key = true
		}
	}
}
