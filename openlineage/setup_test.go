package openlineage_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/refill-dev/refill/internal/fixtures"
)

// The tests hold the hand-written validation to OpenLineage's own schema
// file, kept beside the repository (shared/fixtures/openlineage), run by a
// real JSON Schema validator with its formats asserted.

const schemaID = "https://openlineage.io/spec/2-0-2/OpenLineage.json"

var (
	compileOnce sync.Once
	compiled    *jsonschema.Schema
	compileErr  error
)

// runEventSchema is $defs/RunEvent of the fixture schema.
func runEventSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	dir := fixtures.Dir(t, "openlineage")
	compileOnce.Do(func() {
		f, err := os.Open(filepath.Join(dir, "OpenLineage.json"))
		if err != nil {
			compileErr = err
			return
		}
		defer f.Close()
		doc, err := jsonschema.UnmarshalJSON(f)
		if err != nil {
			compileErr = err
			return
		}
		c := jsonschema.NewCompiler()
		c.AssertFormat()
		if compileErr = c.AddResource(schemaID, doc); compileErr != nil {
			return
		}
		compiled, compileErr = c.Compile(schemaID + "#/$defs/RunEvent")
	})
	if compileErr != nil {
		t.Fatalf("compiling the OpenLineage schema: %v", compileErr)
	}
	return compiled
}

// schemaAccepts reports whether the fixture schema accepts body as a
// RunEvent, and why not.
func schemaAccepts(t testing.TB, sch *jsonschema.Schema, body []byte) (bool, string) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return false, err.Error()
	}
	if err := sch.Validate(doc); err != nil {
		return false, err.Error()
	}
	return true, ""
}

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtures.Dir(t, "openlineage"), name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The fixtures that are whole RunEvents, as the project keeps them.
var eventFixtures = []string{
	"client_python_example_full_event.json",
	"client_python_serde_example_run_event.json",
	"example_full_event.json",
}

var templateFixtures = []string{
	"dbt_bigquery_successful_run_ol_events.template.json",
	"dbt_postgres_failed_run_ol_events.template.json",
}

// Filled-in values for the dbt templates. SOURCES.md: the templates are
// the dbt integration's real event sequences with the values its test
// matcher ignores written as "{{ any(result) }}", and producer and
// schemaURL left out. Filling them gives back events as dbt-ol sends them.
const (
	dbtProducer  = "https://github.com/OpenLineage/OpenLineage/tree/1.26.0/integration/dbt"
	dbtSchemaURL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
	placeholder  = "{{ any(result) }}"
)

// fillTemplate returns the events of a dbt template with every
// placeholder filled (a run ID where a runId goes, a version string
// elsewhere) and the top-level producer and schemaURL added. With
// baseFacets, each facet also gets the _producer and _schemaURL the
// schema's BaseFacet requires, and a null _deleted is dropped — what the
// strict schema asks of facets that the templates do not carry.
func fillTemplate(t testing.TB, name string, baseFacets bool) [][]byte {
	t.Helper()
	var events []map[string]any
	if err := json.Unmarshal(fixture(t, name), &events); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	n := 0
	var fill func(key string, v any) any
	fill = func(key string, v any) any {
		switch v := v.(type) {
		case string:
			if v != placeholder {
				return v
			}
			if key == "runId" {
				n++
				return fmt.Sprintf("0190b6a4-%04x-7000-8000-%012x", n, n)
			}
			return "1.26.0"
		case map[string]any:
			for k, x := range v {
				v[k] = fill(k, x)
			}
			if baseFacets && (key == "facets" || key == "inputFacets" || key == "outputFacets") {
				for _, f := range v {
					if fm, ok := f.(map[string]any); ok {
						fm["_producer"] = dbtProducer
						fm["_schemaURL"] = "https://openlineage.io/spec/facets/1-0-0/Facet.json"
						if d, ok := fm["_deleted"]; ok && d == nil {
							delete(fm, "_deleted")
						}
					}
				}
			}
			return v
		case []any:
			for i, x := range v {
				v[i] = fill(key, x)
			}
			return v
		}
		return v
	}
	var out [][]byte
	for _, ev := range events {
		ev = fill("", ev).(map[string]any)
		ev["producer"] = dbtProducer
		ev["schemaURL"] = dbtSchemaURL
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(placeholder)) {
			t.Fatalf("%s: a placeholder was left unfilled", name)
		}
		out = append(out, b)
	}
	return out
}

// mutate applies f to a decoded copy of body and re-encodes it.
func mutate(t testing.TB, body []byte, f func(ev map[string]any)) []byte {
	t.Helper()
	var ev map[string]any
	if err := json.Unmarshal(body, &ev); err != nil {
		t.Fatal(err)
	}
	f(ev)
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// at walks a JSON pointer's parent and returns it with the last token.
func at(ev map[string]any, ptr string) (any, string) {
	toks := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	var cur any = ev
	for _, tok := range toks[:len(toks)-1] {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[tok]
		case []any:
			var i int
			fmt.Sscan(tok, &i)
			cur = c[i]
		}
	}
	return cur, toks[len(toks)-1]
}

// set sets (or, with del, deletes) the value at ptr.
func set(ptr string, v any, del bool) func(map[string]any) {
	return func(ev map[string]any) {
		parent, last := at(ev, ptr)
		switch p := parent.(type) {
		case map[string]any:
			if del {
				delete(p, last)
			} else {
				p[last] = v
			}
		case []any:
			var i int
			fmt.Sscan(last, &i)
			p[i] = v
		}
	}
}
