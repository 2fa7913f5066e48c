package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/config"
	"github.com/refill-dev/refill/internal/fixtures"
)

// TestImportDBT drives `refill import dbt` as a user would: the YAML it
// prints, under a warehouse in refill.yaml, loads as the same datasets as
// datasets_from reads from the manifest itself; -o json prints them; the
// summary goes to stderr; and refill lineage draws the manifest's edges.
func TestImportDBT(t *testing.T) {
	t.Parallel()
	manifests := map[string]string{"v10": "../../dbt/testdata/manifest_v10.json"}
	if dir := fixtures.Optional(t, "dbt"); dir != "" {
		manifests["hubspot"] = filepath.Join(dir, "fivetran_dbt_hubspot_manifest.json")
	}
	for name, manifest := range manifests {
		t.Run(name, func(t *testing.T) {
			src, err := filepath.Abs(manifest)
			if err != nil {
				t.Fatal(err)
			}
			// A dbt project around the manifest, as dbt leaves it: the
			// jobs seal the project they run from.
			work := t.TempDir()
			manifest := filepath.Join(work, "target", "manifest.json")
			if err := os.MkdirAll(filepath.Join(work, "models"), 0o755); err != nil {
				t.Fatal(err)
			}
			for path, body := range map[string]string{"dbt_project.yml": "name: shop\n", "models/events_daily.sql": "select 1\n"} {
				if err := os.WriteFile(filepath.Join(work, path), []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Mkdir(filepath.Dir(manifest), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(src, manifest); err != nil {
				t.Fatal(err)
			}
			r := run(t, work, nil, "import", "dbt", manifest)
			if r.code != 0 || !strings.HasPrefix(r.stdout, "# Imported from the dbt manifest ") || !strings.Contains(r.stderr, "dbt:"+manifest+": ") {
				t.Fatalf("import: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			head := "version: 1\nwarehouse: sqlite:w.db\n"
			printed := filepath.Join(work, "printed.yaml")
			imported := filepath.Join(work, "imported.yaml")
			if err := os.WriteFile(printed, []byte(head+r.stdout), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(imported, []byte(head+"datasets_from: {dbt_manifest: "+manifest+"}\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			a, err := config.Load(printed)
			if err != nil {
				t.Fatalf("the printed YAML does not load: %v", err)
			}
			b, err := config.Load(imported)
			if err != nil {
				t.Fatal(err)
			}
			jobs := 0
			for _, d := range b.Datasets {
				d.From, d.Line = "", 0
				if d.Job != nil {
					jobs++
					if d.Job.DbtProject != "." || d.Job.Sealed["files:models/**"] == "" || d.Job.Sealed["files:dbt_project.yml"] == "" {
						t.Fatalf("%s: the job does not seal its dbt project: %+v", d.Name, d.Job)
					}
				}
			}
			if jobs == 0 || !strings.Contains(r.stdout, "dbt_project: .") {
				t.Errorf("the printed YAML names no dbt_project (%d jobs)", jobs)
			}
			for _, d := range a.Datasets {
				d.Line = 0
			}
			if !reflect.DeepEqual(a.Datasets, b.Datasets) {
				t.Errorf("printed YAML and datasets_from differ")
			}

			r = run(t, work, nil, "import", "dbt", manifest, "-o", "json")
			var doc struct {
				Datasets map[string]*refill.Dataset `json:"datasets"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &doc); r.code != 0 || err != nil || len(doc.Datasets) != len(b.Datasets) {
				t.Fatalf("-o json: exit %d, %v, %d datasets\n%s", r.code, err, len(doc.Datasets), r.stderr)
			}
			for n, d := range doc.Datasets {
				if d.From != "dbt:"+manifest || d.LineageOnly != b.Datasets[n].LineageOnly {
					t.Errorf("%s: %+v", n, d)
				}
			}

			r = run(t, work, nil, "lineage", "--config", imported)
			if r.code != 0 {
				t.Fatalf("lineage: exit %d\n%s", r.code, r.stderr)
			}
			for n, d := range b.Datasets {
				for _, up := range d.Upstream {
					if !strings.Contains(r.stdout, `"`+up+`" -> "`+n+`"`) {
						t.Errorf("lineage has no edge %s -> %s", up, n)
					}
				}
			}
		})
	}
}

func TestImportDBTErrors(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	bad := filepath.Join(work, "manifest.json")
	if err := os.WriteFile(bad, []byte(`{"metadata": {"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v9.json"}, "nodes": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"import", "dbt", bad}, "refill: dbt manifest " + bad + " is schema v9"},
		{[]string{"import", "dbt", filepath.Join(work, "none.json")}, "none.json: cannot read it"},
		{[]string{"import", "dbt"}, "refill import dbt: accepts 1 arg(s), received 0"},
		{[]string{"import", "dbt", bad, "--env", "1X"}, `env: "1X": want NAME`},
	} {
		r := run(t, work, nil, tt.args...)
		if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 saying %q", tt.args, r.code, r.stdout, r.stderr, tt.want)
		}
	}
}
