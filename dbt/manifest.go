// Package dbt imports the models, seeds, snapshots and sources of a dbt
// project's manifest (target/manifest.json) as refill datasets, so that a
// team that already describes its lineage in dbt does not describe it twice:
// refill.yaml's datasets_from: {dbt_manifest: ...} reads it on every load,
// and `refill import dbt` prints the same datasets as refill.yaml text.
//
// The package only reads the manifest and maps it to refill.yaml's shape
// (Dataset); the config loader validates what it maps exactly as it
// validates a hand-written datasets: block, so an import and its printed
// YAML cannot mean different things.
package dbt

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/refill-dev/refill"
)

// MaxManifestBytes bounds the manifest refill reads: 512 MiB. The largest
// public manifests are tens of megabytes; a file past the bound is more
// likely a wrong path (a database file, a log) than a dbt project, and
// reading it whole would stall every config load.
const MaxManifestBytes = 512 << 20

// Supported manifest schema versions: v10 is written by dbt 1.6, v11 by
// dbt 1.7 and v12 by dbt 1.8 to 1.11. The fields refill reads are the same
// in all three; an older or newer schema may move them, so it is refused
// with its version rather than half read.
var supportedVersions = []int{10, 11, 12}

var schemaVersion = regexp.MustCompile(`/manifest/v(\d+)\.json$`)

// manifest is the part of manifest.json refill reads. Everything else
// (macros, docs, the compiled SQL of each node) is skipped as it streams
// past and never held.
type manifest struct {
	Metadata metadata
	Nodes    []*node // models, seeds and snapshots, in file order
	Sources  []*node
	// Tests are the generic data tests (test_metadata set), in file order.
	Tests []*node
	// Version is the schema version from metadata.dbt_schema_version.
	Version int
}

type metadata struct {
	SchemaVersion string   `json:"dbt_schema_version"`
	DBTVersion    string   `json:"dbt_version"`
	ProjectName   string   `json:"project_name"`
	AdapterType   string   `json:"adapter_type"`
	Quoting       *quoting `json:"quoting"`
}

// quoting is dbt's quoting config: whether each part of a relation's name
// is quoted in SQL. A null part means "the adapter's default".
type quoting struct {
	Database   *bool `json:"database"`
	Schema     *bool `json:"schema"`
	Identifier *bool `json:"identifier"`
}

// node is a manifest node or source, with only the fields refill reads.
type node struct {
	// ID is the node's key in nodes or sources (its unique_id).
	ID           string          `json:"-"`
	ResourceType string          `json:"resource_type"`
	Name         string          `json:"name"`
	PackageName  string          `json:"package_name"`
	Database     *string         `json:"database"`
	Schema       *string         `json:"schema"`
	Alias        *string         `json:"alias"`      // models, seeds, snapshots
	Identifier   *string         `json:"identifier"` // sources
	SourceName   string          `json:"source_name"`
	Version      any             `json:"version"` // a versioned model's version: text or number
	FQN          []string        `json:"fqn"`
	Tags         json.RawMessage `json:"tags"`
	Meta         meta            `json:"meta"`
	Config       config          `json:"config"`
	DependsOn    struct {
		Nodes []string `json:"nodes"`
	} `json:"depends_on"`
	Checksum struct {
		Name     string `json:"name"`
		Checksum string `json:"checksum"`
	} `json:"checksum"`
	Quoting quoting `json:"quoting"` // sources
	// A generic data test's: which test, with what arguments, on which
	// node and column.
	TestMetadata *struct {
		Name      string                     `json:"name"`
		Namespace *string                    `json:"namespace"`
		Kwargs    map[string]json.RawMessage `json:"kwargs"`
	} `json:"test_metadata"`
	AttachedNode *string `json:"attached_node"`
	ColumnName   *string `json:"column_name"`
}

type config struct {
	Materialized string          `json:"materialized"`
	Tags         json.RawMessage `json:"tags"`
	Meta         meta            `json:"meta"`
	EventTime    *string         `json:"event_time"`
	BatchSize    *string         `json:"batch_size"`
	PartitionBy  json.RawMessage `json:"partition_by"`
	Quoting      quoting         `json:"quoting"`
	// A test's: how bad a failure is, and which rows it looks at.
	Severity json.RawMessage `json:"severity"`
	Where    json.RawMessage `json:"where"`
	Enabled  *bool           `json:"enabled"`
}

// meta keeps only meta.refill, raw: it is checked strictly once the node
// is known to be imported, so that a malformed meta.refill on a test is no
// error.
type meta struct {
	Refill json.RawMessage `json:"refill"`
}

// Load reads the manifest at path. Errors wrap refill.ErrBadInput and name
// the manifest (opts.Name, else path); nothing is imported from a manifest
// with any error.
func Load(path string, opts Options) (*Import, error) {
	name := path
	if opts.Name != "" {
		name = opts.Name
	}
	f, err := os.Open(path)
	if err != nil {
		msg := err.Error()
		var pe *os.PathError
		if errors.As(err, &pe) {
			msg = pe.Err.Error()
		}
		return nil, refill.BadInputf("dbt manifest %s: cannot read it: %s; run `dbt parse` (or compile, build) in the dbt project to write target/manifest.json", name, msg)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, refill.BadInputf("dbt manifest %s: cannot read it: %v", name, err)
	}
	switch {
	case st.IsDir():
		return nil, refill.BadInputf("dbt manifest %s is a directory; name the manifest.json file in it (usually target/manifest.json)", name)
	case !st.Mode().IsRegular():
		return nil, refill.BadInputf("dbt manifest %s is not a regular file", name)
	case st.Size() > MaxManifestBytes:
		return nil, refill.BadInputf("dbt manifest %s is %d MiB, more than the %d MiB refill reads", name, st.Size()>>20, MaxManifestBytes>>20)
	}
	return Parse(f, name, opts)
}

// Parse reads a manifest from r; name names it in errors and in the
// datasets' From. Errors wrap refill.ErrBadInput.
func Parse(r io.Reader, name string, opts Options) (*Import, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	m, err := decode(r, name)
	if err != nil {
		return nil, err
	}
	return build(m, name, opts)
}

// countingReader counts the bytes read through it, so that a manifest
// longer than MaxManifestBytes is reported as too large rather than as
// truncated JSON.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// skip consumes a JSON value without keeping it.
type skip struct{}

func (*skip) UnmarshalJSON([]byte) error { return nil }

// decode streams the manifest: the top-level object's keys are read one by
// one, nodes and sources one entry at a time, and every other key scanned
// past without being decoded, so memory holds the imported fields and the
// text of one value at a time (one node, or the macros being skipped), not
// the whole document. A value of the wrong type in a node is remembered and decoding
// goes on, so that an unsupported schema version (which may well explain
// the odd value) is what gets reported.
func decode(r io.Reader, name string) (*manifest, error) {
	cr := &countingReader{r: io.LimitReader(r, MaxManifestBytes+1)}
	dec := json.NewDecoder(bufio.NewReaderSize(cr, 64<<10))
	m := &manifest{}
	var shape error // the first value of the wrong type
	fail := func(err error) error {
		if cr.n > MaxManifestBytes {
			return refill.BadInputf("dbt manifest %s is more than the %d MiB refill reads", name, MaxManifestBytes>>20)
		}
		return syntaxError(name, err, dec.InputOffset())
	}

	tok, err := dec.Token()
	if err != nil {
		return nil, fail(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, refill.BadInputf("dbt manifest %s is not a dbt manifest: want a JSON object, got %s", name, describeToken(tok))
	}
	seen := map[string]bool{}
	sawMetadata := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fail(err)
		}
		key := tok.(string) // an object's keys are always strings
		if seen[key] && (key == "metadata" || key == "nodes" || key == "sources") {
			return nil, refill.BadInputf("dbt manifest %s has the key %q twice", name, key)
		}
		seen[key] = true
		switch key {
		case "metadata":
			sawMetadata = true
			if err := dec.Decode(&m.Metadata); err != nil {
				if !isTypeError(err) {
					return nil, fail(err)
				}
				// Without its metadata the version is unknown: this is the
				// error to report.
				return nil, typeError(name, "metadata", err)
			}
		case "nodes", "sources":
			nodes, tests, err := decodeNodes(dec, name, key, &shape)
			if err != nil {
				return nil, fail(err)
			}
			if key == "nodes" {
				m.Nodes, m.Tests = nodes, tests
			} else {
				m.Sources = nodes
			}
		default:
			if err := dec.Decode(new(skip)); err != nil {
				return nil, fail(err)
			}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, fail(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		if err != nil {
			return nil, fail(err)
		}
		return nil, refill.BadInputf("dbt manifest %s has more after the manifest's closing brace (at byte %d)", name, dec.InputOffset())
	}

	if !sawMetadata || m.Metadata.SchemaVersion == "" {
		return nil, refill.BadInputf("dbt manifest %s has no metadata.dbt_schema_version: is it dbt's target/manifest.json? (refill reads manifest schema v10, v11 and v12)", name)
	}
	match := schemaVersion.FindStringSubmatch(m.Metadata.SchemaVersion)
	if match == nil {
		return nil, refill.BadInputf("dbt manifest %s has schema version %q, not a manifest schema URL ending in /manifest/vN.json", name, clip(m.Metadata.SchemaVersion))
	}
	m.Version, _ = strconv.Atoi(match[1])
	if !slices.Contains(supportedVersions, m.Version) {
		dbtv := ""
		if m.Metadata.DBTVersion != "" {
			dbtv = ", written by dbt " + clip(m.Metadata.DBTVersion)
		}
		return nil, refill.BadInputf("dbt manifest %s is schema v%s%s; refill reads v10 (dbt 1.6), v11 (dbt 1.7) and v12 (dbt 1.8 and later): write it with one of those (`dbt parse`)", name, clip(match[1]), dbtv)
	}
	if shape != nil {
		return nil, shape
	}
	if !seen["nodes"] {
		return nil, refill.BadInputf("dbt manifest %s has no nodes", name)
	}
	return m, nil
}

// decodeNodes reads the nodes or sources object one entry at a time,
// keeping the kinds refill imports, and the generic data tests apart.
func decodeNodes(dec *json.Decoder, name, key string, shape *error) (out, tests []*node, err error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, err
	}
	if tok == nil {
		return nil, nil, nil // "sources": null
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		*shape = firstErr(*shape, refill.BadInputf("dbt manifest %s: %s: want an object of nodes by unique_id, got %s", name, key, describeToken(tok)))
		if d, ok := tok.(json.Delim); ok && d == '[' {
			// Skip the list so that the error above, not a syntax error,
			// is reported.
			for dec.More() {
				if err := dec.Decode(new(skip)); err != nil {
					return nil, nil, err
				}
			}
			if _, err := dec.Token(); err != nil {
				return nil, nil, err
			}
		}
		return nil, nil, nil
	}
	ids := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		id := tok.(string)
		if ids[id] {
			*shape = firstErr(*shape, refill.BadInputf("dbt manifest %s: %s: %s appears twice", name, key, clip(id)))
		}
		ids[id] = true
		var n *node
		if err := dec.Decode(&n); err != nil {
			if !isTypeError(err) {
				return nil, nil, err
			}
			*shape = firstErr(*shape, typeError(name, key+"."+id, err))
			continue
		}
		if n == nil {
			*shape = firstErr(*shape, refill.BadInputf("dbt manifest %s: %s.%s is null, want a node", name, key, clip(id)))
			continue
		}
		n.ID = id
		switch n.ResourceType {
		case "model", "seed", "snapshot", "source":
			out = append(out, n)
		case "test":
			if n.TestMetadata != nil {
				tests = append(tests, n)
			}
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, err
	}
	return out, tests, nil
}

func firstErr(have, next error) error {
	if have != nil {
		return have
	}
	return next
}

func isTypeError(err error) bool {
	var te *json.UnmarshalTypeError
	return errors.As(err, &te)
}

// typeError says which value of the manifest had the wrong type, in the
// manifest's own key names.
func typeError(name, where string, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := where
		if te.Field != "" {
			field += "." + te.Field
		}
		return refill.BadInputf("dbt manifest %s: %s: want %s, got a JSON %s", name, clip(field), describeGo(te.Type.Kind().String()), te.Value)
	}
	return refill.BadInputf("dbt manifest %s: %s: %v", name, clip(where), strings.TrimPrefix(err.Error(), "json: "))
}

func describeGo(kind string) string {
	switch kind {
	case "string":
		return "text"
	case "slice", "array":
		return "a list"
	case "struct", "map", "ptr":
		return "an object"
	case "bool":
		return "true or false"
	}
	return "a " + kind
}

// syntaxError words a JSON reading error for a person: where the text
// stops being JSON, or that it ends too soon.
func syntaxError(name string, err error, offset int64) error {
	var se *json.SyntaxError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return refill.BadInputf("dbt manifest %s is truncated: the JSON ends after %d bytes, inside a value; write it again (`dbt parse`)", name, offset)
	case errors.As(err, &se):
		return refill.BadInputf("dbt manifest %s is not valid JSON at byte %d: %s", name, se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	}
	return refill.BadInputf("dbt manifest %s: reading it: %v", name, err)
}

func describeToken(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			return "a list"
		}
		return "an object"
	case string:
		return "text"
	case nil:
		return "null"
	case bool:
		return "true or false"
	}
	return "a number"
}

// clip makes text from the manifest safe and short for a one-line
// message: control characters escaped, at most 80 characters.
func clip(s string) string {
	q := strconv.Quote(s)
	q = q[1 : len(q)-1]
	if r := []rune(q); len(r) > 80 {
		return string(r[:77]) + "..."
	}
	return q
}
