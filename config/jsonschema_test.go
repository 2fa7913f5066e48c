package config_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/refill-dev/refill/config"
	"github.com/refill-dev/refill/demo"
)

func compileSchema(t *testing.T, fragment bool) *jsonschema.Schema {
	t.Helper()
	b, err := config.Schema()
	if err != nil {
		t.Fatal(err)
	}
	if fragment {
		// README examples show a part of refill.yaml.
		b = bytes.Replace(b, []byte(`"required": [
        "version"
      ],`), nil, 1)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(config.SchemaID, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(config.SchemaID)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func validate(t *testing.T, s *jsonschema.Schema, yamlText string) error {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(yamlText))
	if err != nil {
		t.Fatalf("not YAML: %v\n%s", err, yamlText)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	return s.Validate(doc)
}

// The demo's config, and every example of refill.yaml in the README,
// validate against the schema; the demo names it in its first line; and
// the schema refuses what the loader refuses for a key it does not know.
func TestSchemaValidatesTheExamples(t *testing.T) {
	full, part := compileSchema(t, false), compileSchema(t, true)
	dir := t.TempDir()
	sc, err := demo.Write(t.Context(), filepath.Join(dir, "d"), time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(sc.Config)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "# yaml-language-server: $schema=./refill.schema.json\n") {
		t.Errorf("the demo's config does not start with the schema comment:\n%.200s", b)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(sc.Config), "refill.schema.json")); err != nil {
		t.Errorf("the demo did not write the schema beside its config: %v", err)
	}
	if err := validate(t, full, string(b)); err != nil {
		t.Errorf("the demo's config: %v", err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	if len(blocks) < 3 {
		t.Fatalf("found %d YAML examples in the README", len(blocks))
	}
	for _, m := range blocks {
		text := m[1]
		if strings.HasPrefix(text, " ") {
			// A dataset's part: dedented, as a dataset.
			lines := strings.Split(text, "\n")
			indent := len(lines[0]) - len(strings.TrimLeft(lines[0], " "))
			for i, l := range lines {
				if len(l) >= indent {
					lines[i] = "      " + l[indent:]
				}
			}
			text = "datasets:\n  example:\n" + strings.Join(lines, "\n")
		}
		if err := validate(t, part, text); err != nil {
			t.Errorf("README example:\n%s\n%v", m[1], err)
		}
	}
	for _, bad := range []string{
		"version: 1\nwarehouse: sqlite:w.db\nwarehose: x\n",
		"version: 1\nwarehouse: sqlite:w.db\ndatasets:\n  a:\n    table: a\n    partiton: {column: day}\n",
		"version: 1\nwarehouse: sqlite:w.db\nrun: {attempts: three}\n",
	} {
		if err := validate(t, full, bad); err == nil {
			t.Errorf("the schema takes %q", bad)
		}
		if _, err := config.Parse([]byte(bad), "refill.yaml"); err == nil {
			t.Errorf("the loader takes %q", bad)
		}
	}
}
