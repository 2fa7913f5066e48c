// Package openlineage reads OpenLineage RunEvents: what a job outside
// refill (an Airflow task, a dbt model, a BI tool's sync) reports it read
// and wrote. refill keeps the input → output edges such events carry, so a
// plan can name the consumers it does not manage — tables and dashboards
// that read what the plan rewrites and that nothing will rebuild.
//
// Parse validates an event against the structure of the OpenLineage 2-0-2
// RunEvent schema (spec/OpenLineage.json, $defs/RunEvent): eventTime a
// date-time, producer and schemaURL URIs, run.runId a UUID, job.namespace
// and job.name strings, eventType one of the enum, inputs and outputs
// arrays of datasets with a namespace and a name, and facets objects of
// objects. The checks are written out here rather than run by a JSON Schema
// engine over a copy of the schema: the schema is OpenLineage's and stays
// beside the repository, never copied into it, and the tests hold this
// code to the schema file itself (with a real JSON Schema validator) so
// the two cannot drift apart unnoticed.
//
// Events are accepted whatever version their schemaURL names, as long as
// they have the 2-0-2 structure: producers in the wild name 1-0-5 and
// others, and the structure is what refill reads. Two relaxations of the
// schema, both for what real producers send and both about parts refill
// never reads, are made on purpose (Strict turns them off):
//
//   - an eventTime without a UTC offset ("2021-11-03T10:53:52.427343", as
//     the Python client writes a naive datetime) is read as UTC;
//   - a facet's base fields _producer and _schemaURL may be missing or
//     null, and a job or dataset facet's _deleted may be null (the dbt
//     integration's events are so). When present they must still be URIs
//     and a boolean.
package openlineage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/internal/strictjson"
)

// EventTypes are the values eventType may take (RunEvent.eventType's enum).
var EventTypes = []string{"START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER"}

// Event is a validated RunEvent: the parts refill reads. Facets are
// checked for their shape and then dropped.
type Event struct {
	EventTime time.Time `json:"eventTime"`
	// EventType is "" when the event does not say (the schema does not
	// require it).
	EventType string    `json:"eventType,omitempty"`
	Producer  string    `json:"producer"`
	SchemaURL string    `json:"schemaURL"`
	RunID     string    `json:"runId"`
	Job       Job       `json:"job"`
	Inputs    []Dataset `json:"inputs"`
	Outputs   []Dataset `json:"outputs"`
}

// Job is the job that ran, as OpenLineage names it: a namespace (the
// scheduler) and a name within it.
type Job = refill.OpenLineageName

// Dataset is a dataset as OpenLineage names it: a namespace (a data
// source, such as postgres://host:5432 or bigquery) and a name within it
// (such as db.schema.table).
type Dataset = refill.OpenLineageName

// Edge is one input → output pair of a run.
type Edge struct {
	Input, Output Dataset
}

// MaxEdges bounds the edges one event may carry (inputs × outputs), so a
// body within the server's size limit cannot ask for millions of rows.
const MaxEdges = 10000

// Edges are the event's input → output pairs, each once, in a stable
// order. A dataset with an empty namespace or name (the schema allows one)
// names nothing refill could match, and makes no edge. An event whose
// inputs and outputs would make more than MaxEdges pairs is refused.
func (e *Event) Edges() ([]Edge, error) {
	if n := len(e.Inputs) * len(e.Outputs); n > MaxEdges {
		return nil, &InvalidError{Problems: []Problem{{Pointer: "/outputs", Message: fmt.Sprintf(
			"%d inputs and %d outputs make %d edges, over refill's limit of %d per event", len(e.Inputs), len(e.Outputs), n, MaxEdges)}}}
	}
	var out []Edge
	seen := map[Edge]bool{}
	for _, in := range e.Inputs {
		if in.Namespace == "" || in.Name == "" {
			continue
		}
		for _, o := range e.Outputs {
			if o.Namespace == "" || o.Name == "" {
				continue
			}
			ed := Edge{in, o}
			if !seen[ed] {
				seen[ed] = true
				out = append(out, ed)
			}
		}
	}
	return out, nil
}

// Problem is one way an event breaks the schema: where, as a JSON pointer
// (RFC 6901) into the event, and what.
type Problem struct {
	Pointer string `json:"pointer"`
	Message string `json:"message"`
}

// String is "pointer: message"; a problem with the whole body (not JSON,
// not an object) has no pointer and its message stands alone.
func (p Problem) String() string {
	if p.Pointer == "" {
		return p.Message
	}
	return p.Pointer + ": " + p.Message
}

// InvalidError lists every problem found in an event. It wraps
// refill.ErrBadInput: an invalid event is the sender's mistake.
type InvalidError struct {
	Problems []Problem
}

// problemsShown bounds how many problems the error's text lists.
const problemsShown = 5

func (e *InvalidError) Error() string {
	var parts []string
	for i, p := range e.Problems {
		if i == problemsShown {
			parts = append(parts, fmt.Sprintf("and %d more", len(e.Problems)-problemsShown))
			break
		}
		parts = append(parts, p.String())
	}
	return strings.Join(parts, "; ")
}

// Unwrap classifies the error as bad input.
func (e *InvalidError) Unwrap() error { return refill.ErrBadInput }

// Parse reads one RunEvent from data and validates it (see the package
// documentation for what is checked). Its error is an *InvalidError
// naming each wrong field by its JSON pointer, as in
// "/run/runId: not a uuid".
func Parse(data []byte) (*Event, error) { return parse(data, false) }

// Strict is Parse without the package's two relaxations: exactly the
// 2-0-2 RunEvent schema with its formats asserted.
func Strict(data []byte) (*Event, error) { return parse(data, true) }

func parse(data []byte, strict bool) (*Event, error) {
	doc, err := decode(data)
	var se *strictjson.Error
	if errors.As(err, &se) {
		return nil, &InvalidError{Problems: []Problem{{Pointer: se.Pointer, Message: se.Problem}}}
	}
	if err != nil {
		return nil, &InvalidError{Problems: []Problem{{Pointer: "", Message: err.Error()}}}
	}
	v := &validator{strict: strict}
	ev := v.runEvent(doc)
	if len(v.problems) > 0 {
		return nil, &InvalidError{Problems: v.problems}
	}
	return ev, nil
}

// runEvent is what refill reads of a RunEvent, for strictjson: each key
// once at any depth, and none of these in another case (an "EVENTTIME"
// beside "eventTime" would be read by some consumers and not others).
// Every object is open: OpenLineage's schema allows more, and facets are
// their producers' own.
type runEvent struct {
	EventTime any `json:"eventTime"`
	EventType any `json:"eventType"`
	Producer  any `json:"producer"`
	SchemaURL any `json:"schemaURL"`
	Run       struct {
		RunID  any              `json:"runId"`
		Facets map[string]facet `json:"facets"`
		Other  map[string]any   `json:",inline"`
	} `json:"run"`
	Job struct {
		Namespace any              `json:"namespace"`
		Name      any              `json:"name"`
		Facets    map[string]facet `json:"facets"`
		Other     map[string]any   `json:",inline"`
	} `json:"job"`
	Inputs  []dataset      `json:"inputs"`
	Outputs []dataset      `json:"outputs"`
	Other   map[string]any `json:",inline"`
}

type dataset struct {
	Namespace    any              `json:"namespace"`
	Name         any              `json:"name"`
	Facets       map[string]facet `json:"facets"`
	InputFacets  map[string]facet `json:"inputFacets"`
	OutputFacets map[string]facet `json:"outputFacets"`
	Other        map[string]any   `json:",inline"`
}

type facet struct {
	Producer  any            `json:"_producer"`
	SchemaURL any            `json:"_schemaURL"`
	Deleted   any            `json:"_deleted"`
	Other     map[string]any `json:",inline"`
}

// decode reads exactly one JSON document, numbers kept as text, after
// strictjson has walked it as a RunEvent.
func decode(data []byte) (any, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("the body is empty: want one RunEvent, a JSON object")
	}
	if !utf8.Valid(data) {
		return nil, errors.New("the body is not UTF-8 text: want one RunEvent, a JSON object")
	}
	// Only the keys: a document that is not JSON at all is told below,
	// in this package's words.
	if err := strictjson.Check(data, reflect.TypeFor[runEvent]()); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) && !strings.HasPrefix(se.Problem, "not JSON") && se.Problem != "more than one JSON document" {
			return nil, err
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		var syn *json.SyntaxError
		switch {
		case errors.Is(err, io.ErrUnexpectedEOF):
			return nil, errors.New("the body is not JSON: it ends in the middle of the document (truncated?)")
		case errors.As(err, &syn):
			return nil, fmt.Errorf("the body is not JSON: %v (at byte %d)", syn, syn.Offset)
		}
		return nil, fmt.Errorf("the body is not JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("the body holds more than one JSON document: post one RunEvent per request")
	}
	return doc, nil
}

// facetKind says which facet schema a facets object's values follow.
type facetKind int

const (
	// baseFacet: RunFacet, InputDatasetFacet, OutputDatasetFacet.
	baseFacet facetKind = iota
	// deletableFacet: JobFacet and DatasetFacet, which add _deleted.
	deletableFacet
)

type validator struct {
	strict   bool
	problems []Problem
}

func (v *validator) add(ptr, format string, args ...any) {
	v.problems = append(v.problems, Problem{Pointer: ptr, Message: fmt.Sprintf(format, args...)})
}

// runEvent checks $defs/RunEvent: BaseEvent's fields, then run, job,
// eventType, inputs and outputs.
func (v *validator) runEvent(doc any) *Event {
	obj, ok := doc.(map[string]any)
	if !ok {
		hint := ""
		if _, arr := doc.([]any); arr {
			hint = " (post one event per request)"
		}
		v.add("", "the body is %s, not a RunEvent (a JSON object)%s", kind(doc), hint)
		return nil
	}
	ev := &Event{}
	if s, ok := v.str(obj, "", "eventTime", true); ok {
		t, err := parseDateTime(s, !v.strict)
		if err != nil {
			v.add("/eventTime", "not a date-time (RFC 3339, such as 2026-11-30T12:00:00Z): %s: %v", quote(s), err)
		}
		ev.EventTime = t
	}
	if s, ok := v.str(obj, "", "producer", true); ok {
		v.uri("/producer", s)
		ev.Producer = s
	}
	if s, ok := v.str(obj, "", "schemaURL", true); ok {
		v.uri("/schemaURL", s)
		ev.SchemaURL = s
	}
	if s, ok := v.str(obj, "", "eventType", false); ok {
		if !slices.Contains(EventTypes, s) {
			v.add("/eventType", "%s is not one of %s", quote(s), strings.Join(EventTypes, ", "))
		}
		ev.EventType = s
	}
	if run, ok := v.object(obj, "", "run", true); ok {
		if s, ok := v.str(run, "/run", "runId", true); ok {
			if err := checkUUID(s); err != nil {
				v.add("/run/runId", "not a uuid: %s: %v", quote(s), err)
			}
			ev.RunID = s
		}
		v.facets(run, "/run", "facets", baseFacet)
	}
	if job, ok := v.object(obj, "", "job", true); ok {
		ev.Job.Namespace, _ = v.str(job, "/job", "namespace", true)
		ev.Job.Name, _ = v.str(job, "/job", "name", true)
		v.facets(job, "/job", "facets", deletableFacet)
	}
	ev.Inputs = v.datasets(obj, "inputs", "inputFacets")
	ev.Outputs = v.datasets(obj, "outputs", "outputFacets")
	return ev
}

// datasets checks an inputs or outputs array: $defs/InputDataset or
// $defs/OutputDataset, each a $defs/Dataset with its own extra facets.
func (v *validator) datasets(obj map[string]any, key, extra string) []Dataset {
	val, ok := obj[key]
	if !ok {
		return nil
	}
	ptr := "/" + key
	arr, ok := val.([]any)
	if !ok {
		v.add(ptr, "want an array of datasets, got %s", kind(val))
		return nil
	}
	out := make([]Dataset, 0, len(arr))
	for i, item := range arr {
		ip := fmt.Sprintf("%s/%d", ptr, i)
		d, ok := item.(map[string]any)
		if !ok {
			v.add(ip, "want a dataset, a JSON object with namespace and name; got %s", kind(item))
			continue
		}
		ns, ok1 := v.str(d, ip, "namespace", true)
		name, ok2 := v.str(d, ip, "name", true)
		v.facets(d, ip, "facets", deletableFacet)
		v.facets(d, ip, extra, baseFacet)
		if ok1 && ok2 {
			out = append(out, Dataset{Namespace: ns, Name: name})
		}
	}
	return out
}

// facets checks an optional facets object: every value a facet object
// with the base facet's fields.
func (v *validator) facets(obj map[string]any, parent, key string, fk facetKind) {
	val, ok := obj[key]
	if !ok {
		return
	}
	ptr := parent + "/" + key
	m, ok := val.(map[string]any)
	if !ok {
		v.add(ptr, "want an object of facets, got %s", kind(val))
		return
	}
	for _, name := range sortedKeys(m) {
		fp := ptr + "/" + escape(name)
		f, ok := m[name].(map[string]any)
		if !ok {
			v.add(fp, "want a facet, a JSON object; got %s", kind(m[name]))
			continue
		}
		for _, base := range []string{"_producer", "_schemaURL"} {
			bv, present := f[base]
			switch {
			case !present || (bv == nil && !v.strict):
				if v.strict {
					v.add(fp+"/"+base, "missing; every facet needs %s (BaseFacet)", base)
				}
			default:
				s, ok := bv.(string)
				if !ok {
					v.add(fp+"/"+base, "want a URI string, got %s", kind(bv))
					continue
				}
				v.uri(fp+"/"+base, s)
			}
		}
		if fk == deletableFacet {
			if dv, present := f["_deleted"]; present {
				if _, ok := dv.(bool); !ok && (v.strict || dv != nil) {
					v.add(fp+"/_deleted", "want true or false, got %s", kind(dv))
				}
			}
		}
	}
}

// str reads obj[key] as a string. A missing key is a problem when
// required; a present value of another type always is.
func (v *validator) str(obj map[string]any, parent, key string, required bool) (string, bool) {
	val, ok := obj[key]
	if !ok {
		if required {
			v.add(parent+"/"+key, "missing; a RunEvent requires it")
		}
		return "", false
	}
	s, ok := val.(string)
	if !ok {
		v.add(parent+"/"+key, "want a string, got %s", kind(val))
		return "", false
	}
	return s, true
}

// object reads obj[key] as an object, like str.
func (v *validator) object(obj map[string]any, parent, key string, required bool) (map[string]any, bool) {
	val, ok := obj[key]
	if !ok {
		if required {
			v.add(parent+"/"+key, "missing; a RunEvent requires it")
		}
		return nil, false
	}
	m, ok := val.(map[string]any)
	if !ok {
		v.add(parent+"/"+key, "want an object, got %s", kind(val))
		return nil, false
	}
	return m, true
}

func (v *validator) uri(ptr, s string) {
	if err := checkURI(s); err != nil {
		v.add(ptr, "not an absolute URI: %s: %v", quote(s), err)
	}
}

// kind names a decoded JSON value's type as JSON Schema does.
func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// escape writes a key as a JSON pointer token (RFC 6901).
func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// quote shows a value in a message, clipped so an error never echoes a
// whole body back.
func quote(s string) string {
	const max = 80
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return fmt.Sprintf("%q…", s[:cut])
	}
	return fmt.Sprintf("%q", s)
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
