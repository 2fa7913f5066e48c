package dbt

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
)

// FuzzManifest feeds Parse arbitrary bytes. A manifest is outside input:
// whatever it holds, Parse must not panic, every error must be bad input on
// one line naming the file, and what it accepts must hold the guarantees
// the config loader relies on (plain unique names, upstreams among the
// imported, tables refill can name) and print as YAML.
func FuzzManifest(f *testing.F) {
	for _, p := range []string{"testdata/manifest_v10.json", "testdata/manifest_v11.json"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	v12 := "https://schemas.getdbt.com/dbt/manifest/v12.json"
	for _, seed := range []string{
		"", "{}", "[]", "null", `{"metadata": {}}`,
		manifestWith(v12, ""),
		manifestWith("https://schemas.getdbt.com/dbt/manifest/v9.json", ""),
		manifestWith(v12, `{"resource_type": "model", "name": "a b", "schema": "S", "alias": "x\"y", "config": {"materialized": "table", "partition_by": ["a"], "meta": {"refill": {"partition": {"column": "d", "grain": "hour"}, "checks": {"volume": {"lookback": 1.5}}}}}}`),
		manifestWith(v12, `{"resource_type": "source", "name": "", "source_name": "", "schema": "", "depends_on": {"nodes": ["model.p.m", "x"]}}`),
		`{"metadata": {"dbt_schema_version": "` + v12 + `"}, "nodes": {"model.a": {"resource_type": "model", "name": "a", "schema": "s", "alias": "t", "depends_on": {"nodes": ["model.b"]}, "config": {"event_time": "d"}, "checksum": {"checksum": "x"}}, "model.b": {"resource_type": "model", "name": "b", "schema": "s", "alias": "t", "depends_on": {"nodes": ["model.a"]}, "config": {"event_time": "d"}}}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		imp, err := Parse(bytes.NewReader(data), "fuzz.json", Options{})
		if err != nil {
			if imp != nil {
				t.Errorf("Parse returned an import and an error")
			}
			if !errors.Is(err, refill.ErrBadInput) {
				t.Fatalf("error is not bad input: %v", err)
			}
			if !strings.Contains(err.Error(), "fuzz.json") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error does not name the file on one line: %q", err)
			}
			return
		}
		checkInvariants(t, imp)
		if _, err := imp.YAML(); err != nil {
			t.Fatalf("YAML: %v", err)
		}
	})
}
