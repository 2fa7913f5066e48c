package openlineage_test

import (
	"errors"
	"testing"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/openlineage"
)

// FuzzRunEvent feeds the event parser what any holder of an API token, or
// a misconfigured producer, could post. It must never panic; whatever it
// refuses is bad input naming at least one problem; whatever Strict
// accepts the fixture schema accepts too (checked with a real JSON Schema
// validator), Parse accepts everything Strict does, and an accepted event
// has the parts refill reads.
func FuzzRunEvent(f *testing.F) {
	sch := runEventSchema(f)
	for _, name := range eventFixtures {
		f.Add(fixture(f, name))
	}
	for _, name := range templateFixtures {
		for _, b := range fillTemplate(f, name, false) {
			f.Add(b)
		}
		f.Add(fixture(f, name)) // an array of events, placeholders and all
	}
	for _, s := range []string{
		``, `{}`, `[]`, `null`, `{"eventTime":"2026-11-30T12:00:00Z"}`,
		`{"eventTime":"2026-11-30T23:59:60+00:00","producer":"a:b","schemaURL":"a:b","run":{"runId":"00000000-0000-0000-0000-000000000000"},"job":{"namespace":"","name":""}}`,
		`{"eventTime":"2026-11-30T12:00:00","producer":"http://[::1","schemaURL":"x","run":{"runId":"x","facets":{"a/b":{"_producer":null}}},"job":{"namespace":"n","name":"j","facets":{"f":{"_deleted":null}}},"inputs":[{"namespace":"n","name":"i","inputFacets":{"q":{}}}],"outputs":[{"namespace":"n","name":"o"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := openlineage.Parse(body)
		strict, serr := openlineage.Strict(body)
		if err != nil {
			var inv *openlineage.InvalidError
			if ev != nil || !errors.Is(err, refill.ErrBadInput) || !errors.As(err, &inv) || len(inv.Problems) == 0 || err.Error() == "" {
				t.Fatalf("refused with %#v (event %v)", err, ev)
			}
			if serr == nil {
				t.Fatalf("Strict accepts what Parse refuses: %v", err)
			}
			return
		}
		if ev == nil || ev.RunID == "" || ev.Producer == "" || ev.SchemaURL == "" {
			t.Fatalf("accepted an event without its parts: %+v", ev)
		}
		if ev.EventTime.Location().String() != "UTC" {
			t.Fatalf("eventTime %s is not in UTC", ev.EventTime)
		}
		if _, err := ev.Edges(); err != nil && !errors.Is(err, refill.ErrBadInput) {
			t.Fatalf("edges: %v", err)
		}
		if serr == nil {
			if strict.RunID != ev.RunID || !strict.EventTime.Equal(ev.EventTime) {
				t.Fatalf("Strict and Parse read one event differently: %+v, %+v", strict, ev)
			}
			if ok, why := schemaAccepts(t, sch, body); !ok {
				t.Fatalf("Strict accepts an event the schema refuses: %s\n%q", why, body)
			}
		}
	})
}
