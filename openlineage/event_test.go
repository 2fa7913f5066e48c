package openlineage_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/openlineage"
)

// TestFixturesAreAccepted: every real event in the fixtures, and every
// event of the dbt integration's sequences once their templates are filled
// as SOURCES.md says, is accepted and read as it is written.
func TestFixturesAreAccepted(t *testing.T) {
	full, err := openlineage.Parse(fixture(t, "client_python_example_full_event.json"))
	if err != nil {
		t.Fatalf("full event: %v", err)
	}
	want := openlineage.Event{
		EventTime: time.Date(2020, 12, 28, 19, 51, 1, 641e6, time.UTC), EventType: "COMPLETE",
		Producer: "https://github.com/OpenLineage/OpenLineage/blob/v1-0-0/client", SchemaURL: "http://test.schema.url",
		RunID: "ea041791-68bc-4ae1-bd89-4c8106a157e4", Job: openlineage.Job{Namespace: "my-scheduler-namespace", Name: "myjob.mytask"},
	}
	if !full.EventTime.Equal(want.EventTime) || full.EventType != want.EventType || full.Producer != want.Producer ||
		full.SchemaURL != want.SchemaURL || full.RunID != want.RunID || full.Job != want.Job ||
		len(full.Inputs) != 1 || full.Inputs[0] != (openlineage.Dataset{Namespace: "my-datasource-namespace", Name: "instance.schema.table"}) ||
		len(full.Outputs) != 1 {
		t.Errorf("full event read as %+v", full)
	}
	for _, name := range eventFixtures {
		if _, err := openlineage.Parse(fixture(t, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// The naive datetime of the Python client is read as UTC.
	serde, err := openlineage.Parse(fixture(t, "client_python_serde_example_run_event.json"))
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2021, 11, 3, 10, 53, 52, 427343000, time.UTC); !serde.EventTime.Equal(want) {
		t.Errorf("eventTime without an offset read as %s, want %s", serde.EventTime, want)
	}

	for _, name := range templateFixtures {
		events := fillTemplate(t, name, false)
		if len(events) < 4 {
			t.Fatalf("%s: %d events", name, len(events))
		}
		var edges int
		for i, b := range events {
			ev, err := openlineage.Parse(b)
			if err != nil {
				t.Errorf("%s event %d: %v\n%s", name, i, err, b)
				continue
			}
			if ev.Producer != dbtProducer || ev.Job.Namespace != "dbt-test-namespace" || ev.RunID == "" {
				t.Errorf("%s event %d read as %+v", name, i, ev)
			}
			es, err := ev.Edges()
			if err != nil {
				t.Fatal(err)
			}
			edges += len(es)
		}
		if edges == 0 {
			t.Errorf("%s: no model event carried an edge", name)
		}
	}
	// The dbt model orders reads stg_orders and stg_payments.
	events := fillTemplate(t, "dbt_postgres_failed_run_ol_events.template.json", false)
	ev, err := openlineage.Parse(events[1])
	if err != nil {
		t.Fatal(err)
	}
	es, _ := ev.Edges()
	if ev.Job.Name != "model.jaffle_shop.orders" || len(es) != 2 ||
		es[0].Input.Name != "postgres.public.stg_orders" || es[1].Input.Name != "postgres.public.stg_payments" ||
		es[0].Output != (openlineage.Dataset{Namespace: "postgres://postgres:5432", Name: "postgres.public.orders"}) {
		t.Errorf("orders model: job %s edges %+v", ev.Job.Name, es)
	}
}

// TestStrictIsTheSchema compares Strict with the fixture schema run by a
// real JSON Schema validator, event by event: the fixtures, the filled dbt
// templates, and each way of breaking the full event that the schema
// forbids. Parse differs from it only where the package documentation
// says, and names the field for every event it refuses.
func TestStrictIsTheSchema(t *testing.T) {
	sch := runEventSchema(t)
	agree := func(what string, body []byte) (strictOK bool) {
		t.Helper()
		schemaOK, why := schemaAccepts(t, sch, body)
		_, err := openlineage.Strict(body)
		if (err == nil) != schemaOK {
			t.Errorf("%s: Strict says %v, the schema says %v (%s)\n%s", what, err, schemaOK, why, body)
		}
		return err == nil
	}

	for _, name := range []string{"client_python_example_full_event.json", "example_full_event.json"} {
		if !agree(name, fixture(t, name)) {
			t.Errorf("%s: refused", name)
		}
	}
	// The Python client's naive datetime: refused by the schema (no
	// offset), accepted by Parse.
	serde := fixture(t, "client_python_serde_example_run_event.json")
	if agree("serde example", serde) {
		t.Error("Strict accepts an eventTime without an offset")
	}
	if _, err := openlineage.Parse(serde); err != nil {
		t.Errorf("Parse refuses the Python client's naive eventTime: %v", err)
	}
	for _, name := range templateFixtures {
		for i, b := range fillTemplate(t, name, true) {
			if !agree(name+" with base facets", b) {
				t.Errorf("%s event %d with base facets: refused", name, i)
			}
		}
		// As dbt sends them, facets without _producer and _schemaURL:
		// the schema refuses them, Parse does not.
		for i, b := range fillTemplate(t, name, false)[1:3] {
			if agree(name, b) {
				t.Errorf("%s event %d: Strict accepts facets without their base fields", name, i+1)
			}
		}
	}

	full := fixture(t, "client_python_example_full_event.json")
	for _, c := range []struct {
		what string
		f    func(map[string]any)
		// ptr is the pointer Parse names ("-" for none: Parse accepts);
		// lenient marks the two relaxations, where Parse accepts what the
		// schema refuses.
		ptr, msg string
		lenient  bool
	}{
		{"no runId", set("/run/runId", nil, true), "/run/runId", "missing", false},
		{"bad uuid", set("/run/runId", "ea041791-68bc-4ae1-bd89", false), "/run/runId", "not a uuid", false},
		{"uuid with a non-hex digit", set("/run/runId", "ea041791-68bc-4ae1-bd89-4c8106a157eZ", false), "/run/runId", "not a uuid", false},
		{"runId a number", set("/run/runId", 42, false), "/run/runId", "want a string", false},
		{"upper-case uuid", set("/run/runId", "EA041791-68BC-4AE1-BD89-4C8106A157E4", false), "-", "", false},
		{"no eventTime", set("/eventTime", nil, true), "/eventTime", "missing", false},
		{"eventTime in words", set("/eventTime", "yesterday", false), "/eventTime", "not a date-time", false},
		{"eventTime with a space", set("/eventTime", "2020-12-28 19:51:01Z", false), "/eventTime", "joined by T", false},
		{"no such date", set("/eventTime", "2021-02-29T00:00:00Z", false), "/eventTime", "no date 2021-02-29", false},
		{"leap day", set("/eventTime", "2020-02-29T00:00:00Z", false), "-", "", false},
		{"offset without colon", set("/eventTime", "2020-12-28T19:51:01+0100", false), "/eventTime", "offset", false},
		{"offset", set("/eventTime", "2020-12-28T19:51:01.5-05:30", false), "-", "", false},
		{"lower-case t and z", set("/eventTime", "2020-12-28t19:51:01z", false), "-", "", false},
		{"leap second", set("/eventTime", "2016-12-31T23:59:60Z", false), "-", "", false},
		{"leap second in an offset", set("/eventTime", "2017-01-01T00:59:60+01:00", false), "-", "", false},
		{"leap second at the wrong time", set("/eventTime", "2016-12-31T22:59:60Z", false), "/eventTime", "leap second", false},
		{"hour 24", set("/eventTime", "2020-12-28T24:00:00Z", false), "/eventTime", "out of range", false},
		{"no offset", set("/eventTime", "2020-12-28T19:51:01", false), "-", "", true},
		{"eventType not in the enum", set("/eventType", "FINISH", false), "/eventType", "not one of START, RUNNING", false},
		{"eventType lower case", set("/eventType", "complete", false), "/eventType", "not one of", false},
		{"eventType a number", set("/eventType", 3, false), "/eventType", "want a string", false},
		{"eventType null", set("/eventType", nil, false), "/eventType", "want a string, got null", false},
		{"no eventType", set("/eventType", nil, true), "-", "", false},
		{"producer not a URI", set("/producer", "my laptop", false), "/producer", "not an absolute URI", false},
		{"producer relative", set("/producer", "/client/python", false), "/producer", "no scheme", false},
		{"producer a bare IPv6 host", set("/producer", "http://::1/x", false), "/producer", "not an absolute URI", false},
		{"producer an IPv6 host", set("/producer", "http://[::1]:8080/x", false), "-", "", false},
		{"no producer", set("/producer", nil, true), "/producer", "missing", false},
		{"no schemaURL", set("/schemaURL", nil, true), "/schemaURL", "missing", false},
		{"schemaURL a number", set("/schemaURL", 1, false), "/schemaURL", "want a string", false},
		{"inputs not an array", set("/inputs", map[string]any{"namespace": "a", "name": "b"}, false), "/inputs", "want an array", false},
		{"inputs a string", set("/inputs", "x", false), "/inputs", "want an array", false},
		{"outputs null", set("/outputs", nil, false), "/outputs", "want an array", false},
		{"an input not an object", set("/inputs/0", "x", false), "/inputs/0", "want a dataset", false},
		{"an input without a name", set("/inputs/0/name", nil, true), "/inputs/0/name", "missing", false},
		{"an output's namespace a number", set("/outputs/0/namespace", 3, false), "/outputs/0/namespace", "want a string", false},
		{"no inputs", set("/inputs", nil, true), "-", "", false},
		{"no run", set("/run", nil, true), "/run", "missing", false},
		{"run an array", set("/run", []any{}, false), "/run", "want an object", false},
		{"no job", set("/job", nil, true), "/job", "missing", false},
		{"no job name", set("/job/name", nil, true), "/job/name", "missing", false},
		{"job namespace a number", set("/job/namespace", 1, false), "/job/namespace", "want a string", false},
		{"run facets an array", set("/run/facets", []any{}, false), "/run/facets", "want an object of facets", false},
		{"a facet a string", set("/job/facets/documentation", "x", false), "/job/facets/documentation", "want a facet", false},
		{"a job facet's _deleted a string", set("/job/facets/documentation/_deleted", "yes", false), "/job/facets/documentation/_deleted", "want true or false", false},
		{"a job facet's _deleted", set("/job/facets/documentation/_deleted", true, false), "-", "", false},
		{"a run facet's _deleted a string", set("/run/facets/nominalTime/_deleted", "yes", false), "-", "", false},
		{"a facet's _schemaURL not a URI", set("/inputs/0/inputFacets/dataQualityAssertions/_schemaURL", "::", false), "/inputs/0/inputFacets/dataQualityAssertions/_schemaURL", "not an absolute URI", false},
		{"a facet's _producer a number", set("/outputs/0/facets/schema/_producer", 7, false), "/outputs/0/facets/schema/_producer", "want a URI string", false},
		{"a facet without _producer", set("/job/facets/documentation/_producer", nil, true), "-", "", true},
		{"a facet with a null _schemaURL", set("/run/facets/parent/_schemaURL", nil, false), "-", "", true},
		{"a dataset facet's _deleted null", set("/inputs/0/facets/schema/_deleted", nil, false), "-", "", true},
		{"an unknown top-level field", set("/extra", map[string]any{"x": 1}, false), "-", "", false},
		{"a facet named with a slash", set("/run/facets/a~b", "x", false), "/run/facets/a~0b", "want a facet", false},
	} {
		body := mutate(t, full, c.f)
		strictOK := agree(c.what, body)
		_, err := openlineage.Parse(body)
		switch {
		case c.ptr == "-" && err != nil:
			t.Errorf("%s: Parse refused: %v", c.what, err)
		case c.ptr == "-" && !c.lenient && !strictOK:
			t.Errorf("%s: Strict refused what the schema accepts", c.what)
		case c.ptr == "-" && c.lenient && strictOK:
			t.Errorf("%s: Strict accepted one of Parse's relaxations", c.what)
		case c.ptr != "-":
			var inv *openlineage.InvalidError
			if !errors.As(err, &inv) || !errors.Is(err, refill.ErrBadInput) {
				t.Errorf("%s: Parse gave %v, want an InvalidError that is bad input", c.what, err)
				continue
			}
			if inv.Problems[0].Pointer != c.ptr || !strings.Contains(err.Error(), c.ptr+": ") || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("%s: %q, want %s and %q", c.what, err, c.ptr, c.msg)
			}
		}
	}
}

// TestBodiesThatAreNotEvents: not JSON, truncated, two documents, an
// array of events, nothing at all — each refused with a sentence, never a
// pointer into a document that is not there.
func TestBodiesThatAreNotEvents(t *testing.T) {
	full := fixture(t, "client_python_example_full_event.json")
	for _, c := range []struct{ what, body, msg string }{
		{"empty", "", "empty"},
		{"spaces", "  \n", "empty"},
		{"truncated", string(full[:len(full)/2]), "truncated"},
		{"not JSON", "eventType=START", "not JSON"},
		{"two documents", string(full) + string(full), "more than one JSON document"},
		{"an array of events", "[" + string(full) + "]", "an array, not a RunEvent"},
		{"a string", `"START"`, "a string, not a RunEvent"},
		{"null", `null`, "null, not a RunEvent"},
		{"not UTF-8", "{\"eventTime\": \"\xff\"}", "UTF-8"},
	} {
		_, err := openlineage.Parse([]byte(c.body))
		if !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), c.msg) || strings.HasPrefix(err.Error(), "/") {
			t.Errorf("%s: %v, want bad input saying %q", c.what, err, c.msg)
		}
	}
}

// TestAllProblemsAreListed: one event, several faults, each named.
func TestAllProblemsAreListed(t *testing.T) {
	body := []byte(`{"eventTime":"soon","producer":"me","schemaURL":"https://x/y","eventType":"DONE",
		"run":{"runId":"1"},"job":{"namespace":"n"},"inputs":{},"outputs":[{"namespace":"a","name":"b"}]}`)
	_, err := openlineage.Parse(body)
	var inv *openlineage.InvalidError
	if !errors.As(err, &inv) {
		t.Fatalf("%v", err)
	}
	var got []string
	for _, p := range inv.Problems {
		got = append(got, p.Pointer)
	}
	if want := "/eventTime /producer /eventType /run/runId /job/name /inputs"; strings.Join(got, " ") != want {
		t.Errorf("problems at %v, want %s (%v)", got, want, err)
	}
	if !strings.Contains(err.Error(), "and 1 more") {
		t.Errorf("the error lists more than five problems: %v", err)
	}
}

func TestEdges(t *testing.T) {
	ev := &openlineage.Event{
		Inputs:  []openlineage.Dataset{{Namespace: "pg", Name: "a"}, {Namespace: "pg", Name: "b"}, {Namespace: "pg", Name: "a"}, {Namespace: "", Name: "x"}},
		Outputs: []openlineage.Dataset{{Namespace: "pg", Name: "c"}, {Namespace: "pg", Name: ""}},
	}
	es, err := ev.Edges()
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[0].Input.Name != "a" || es[1].Input.Name != "b" || es[0].Output.Name != "c" {
		t.Errorf("edges %+v, want a->c and b->c once each, nothing to or from an empty name", es)
	}
	big := &openlineage.Event{Inputs: make([]openlineage.Dataset, 101), Outputs: make([]openlineage.Dataset, 100)}
	if _, err := big.Edges(); !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), "10100 edges") {
		t.Errorf("101 × 100 datasets: %v", err)
	}
}

// TestKeysOnceAndInRefillsCase: a key given twice anywhere in an event —
// where refill reads it or in a facet it never reads — and a key refill
// reads spelled in another case are refused, named by their pointer;
// facets keep every other key they like.
func TestKeysOnceAndInRefillsCase(t *testing.T) {
	base := `{"eventType":"COMPLETE","eventTime":"2026-11-30T12:00:00Z","producer":"https://github.com/x/y","schemaURL":"https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
		"run":{"runId":"0190b6a4-5f2e-7c3d-8e4f-a1b2c3d4e5f6"%s},"job":{"namespace":"metabase","name":"metabase.sync"},
		"inputs":[{"namespace":"pg","name":"a"%s}],"outputs":[{"namespace":"bi","name":"b"}]%s}`
	event := func(run, input, top string) []byte { return []byte(fmt.Sprintf(base, run, input, top)) }
	if _, err := openlineage.Parse(event(`,"facets":{"custom":{"_producer":"https://x/y","Name":"n","name":"N","anything":{"Else":1}}}`, "", `,"EXTRA":1`)); err != nil {
		t.Fatalf("other keys in facets and at the top: %v", err)
	}
	for _, c := range []struct{ what, run, input, top, ptr, msg string }{
		{"runId twice", `,"runId":"0190b6a4-5f2e-7c3d-8e4f-a1b2c3d4e5f7"`, "", "", "/run/runId", "given twice"},
		{"eventTime in another case", "", "", `,"EventTime":"2020-01-01T00:00:00Z"`, "/EventTime", `refill's key is "eventTime"`},
		{"an input's name in another case", "", `,"NAME":"c"`, "", "/inputs/0/NAME", `refill's key is "name"`},
		{"a facet's _producer in another case", `,"facets":{"f":{"_Producer":"https://x/y"}}`, "", "", "/run/facets/f/_Producer", `refill's key is "_producer"`},
		{"a key twice deep in a facet", `,"facets":{"f":{"fields":[{"a":1,"a":2}]}}`, "", "", "/run/facets/f/fields/0/a", "given twice"},
	} {
		_, err := openlineage.Parse(event(c.run, c.input, c.top))
		var inv *openlineage.InvalidError
		if !errors.As(err, &inv) || !errors.Is(err, refill.ErrBadInput) || inv.Problems[0].Pointer != c.ptr || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want bad input at %s saying %q", c.what, err, c.ptr, c.msg)
		}
	}
}
