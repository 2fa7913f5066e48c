package config

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/dbt"
	"github.com/refill-dev/refill/internal/fixtures"
)

// The dbt package's hand-written manifests: v10 (dbt 1.6) and v11 (dbt 1.7).
const (
	manifestV10 = "../dbt/testdata/manifest_v10.json"
	manifestV11 = "../dbt/testdata/manifest_v11.json"
)

// project writes refill.yaml (head + doc) into a temp dir with the manifest
// at target/manifest.json (a symlink: fixtures are read in place) and
// returns the config's path.
func project(t *testing.T, manifest, doc string) string {
	t.Helper()
	dir := t.TempDir()
	abs, err := filepath.Abs(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "target"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(abs, filepath.Join(dir, "target", "manifest.json")); err != nil {
		t.Fatal(err)
	}
	// The dbt project the models run from, sealed with every job.
	if err := os.WriteFile(filepath.Join(dir, "dbt_project.yml"), []byte("name: shop\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "refill.yaml")
	if err := os.WriteFile(path, []byte(head+doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// edited writes a copy of manifest with edit applied to its decoded JSON
// into a temp dir, for the cases no real manifest has.
func edited(t *testing.T, manifest string, edit func(m map[string]any)) string {
	t.Helper()
	b, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "manifest.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func node(m map[string]any, id string) map[string]any {
	if n, ok := m["nodes"].(map[string]any)[id]; ok {
		return n.(map[string]any)
	}
	return m["sources"].(map[string]any)[id].(map[string]any)
}

func manifests(t *testing.T) map[string]string {
	ms := map[string]string{"v10": manifestV10, "v11": manifestV11}
	if dir := fixtures.Optional(t, "dbt"); dir != "" {
		ms["jaffle_shop"] = filepath.Join(dir, "cosmos_jaffle_shop_manifest.json")
		ms["hubspot"] = filepath.Join(dir, "fivetran_dbt_hubspot_manifest.json")
	}
	return ms
}

// TestDatasetsFrom loads each manifest through datasets_from and checks
// that every node the import maps became a dataset, marked with its origin
// and placed at datasets_from's line, beside a dataset of datasets: that
// reads an imported one.
func TestDatasetsFrom(t *testing.T) {
	for name, manifest := range manifests(t) {
		t.Run(name, func(t *testing.T) {
			imp, err := dbt.Load(manifest, dbt.Options{})
			if err != nil {
				t.Fatal(err)
			}
			reader := imp.Datasets[0].Name
			path := project(t, manifest, "datasets_from: {dbt_manifest: target/manifest.json}\ndatasets:\n  export:\n    upstream: ["+reader+"]\n    job: {command: [./export.sh, '{{partition}}']}\n")
			cfg, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.Datasets) != len(imp.Datasets)+1 {
				t.Errorf("%d datasets, want the %d imported and export", len(cfg.Datasets), len(imp.Datasets))
			}
			for _, want := range imp.Datasets {
				d := cfg.Datasets[want.Name]
				switch {
				case d == nil:
					t.Errorf("%s (%s) was not imported", want.Name, want.Node)
				case d.From != "dbt:target/manifest.json" || d.Line != 3:
					t.Errorf("%s: From %q, Line %d; want dbt:target/manifest.json at line 3", d.Name, d.From, d.Line)
				case d.LineageOnly != (want.LineageOnly != "") || d.Why != want.LineageOnly || (d.Job != nil) != (want.Job != nil):
					t.Errorf("%s: lineage only %v %q, job %v; the import says %q, %v", d.Name, d.LineageOnly, d.Why, d.Job, want.LineageOnly, want.Job)
				case d.Job != nil && (d.Job.Kind != refill.JobCommand || d.Job.Checksum != want.Job.Checksum || d.Job.Checksum == ""):
					t.Errorf("%s: job %+v, want a command with the model's checksum", d.Name, d.Job)
				}
			}
			if got := dbt.Summarize(cfg.Datasets); len(got) != 1 || got[0].Datasets != len(imp.Datasets) || got[0].From != "dbt:target/manifest.json" {
				t.Errorf("Summarize = %+v", got)
			}
		})
	}
}

// TestImportYAMLLoadsTheSame is refill import dbt's promise: the YAML it
// prints, pasted under a warehouse into refill.yaml, loads as the same
// datasets as datasets_from imports (but for their origin and line).
func TestImportYAMLLoadsTheSame(t *testing.T) {
	for name, manifest := range manifests(t) {
		t.Run(name, func(t *testing.T) {
			fromCfg, err := Load(project(t, manifest, "datasets_from: {dbt_manifest: target/manifest.json}\n"))
			if err != nil {
				t.Fatal(err)
			}
			// The project beside the YAML is laid out as the one beside
			// datasets_from, and holds its own dbt_project.yml.
			imp, printed, err := ImportDBT(manifest, dbt.Options{}, ".")
			if err != nil {
				t.Fatal(err)
			}
			text, err := imp.YAML()
			if err != nil {
				t.Fatal(err)
			}
			yamlCfg, err := Load(project(t, manifest, string(text)))
			if err != nil {
				t.Fatalf("the printed YAML does not load: %v", err)
			}
			if len(printed) != len(yamlCfg.Datasets) {
				t.Errorf("ImportDBT gave %d datasets, the YAML %d", len(printed), len(yamlCfg.Datasets))
			}
			for _, d := range printed {
				if d.From != "dbt:"+manifest || d.Line != 0 {
					t.Errorf("ImportDBT %s: From %q Line %d", d.Name, d.From, d.Line)
				}
			}
			strip := func(ds map[string]*refill.Dataset) map[string]*refill.Dataset {
				out := map[string]*refill.Dataset{}
				for n, d := range ds {
					c := *d
					c.From, c.Line = "", 0
					out[n] = &c
				}
				return out
			}
			a, b := strip(fromCfg.Datasets), strip(yamlCfg.Datasets)
			if !reflect.DeepEqual(a, b) {
				for n := range a {
					if !reflect.DeepEqual(a[n], b[n]) {
						ja, _ := json.Marshal(a[n])
						jb, _ := json.Marshal(b[n])
						t.Errorf("%s differs:\n datasets_from %s\n printed YAML  %s", n, ja, jb)
					}
				}
				if len(a) != len(b) {
					t.Errorf("%d datasets from datasets_from, %d from the YAML", len(a), len(b))
				}
			}
		})
	}
}

// TestMergeConflict: a name both imported and in datasets: is an error that
// names both places, not an override.
func TestMergeConflict(t *testing.T) {
	doc := "datasets_from: {dbt_manifest: target/manifest.json}\ndatasets:\n  events_daily: # <-\n    table: events_daily_copy\n    partition: {column: day}\n"
	_, err := Load(project(t, manifestV10, doc))
	requireBadInputIn(t, err, markedLine(t, head+doc), "datasets.events_daily",
		"dataset events_daily is also imported from the dbt manifest (model.shop.events_daily, datasets_from at line 3): rename this one")
}

// requireBadInputIn is requireBadInput for a config file not named
// refill.yaml in the working directory: it matches the error's line,
// key and text, whatever the file's path.
func requireBadInputIn(t *testing.T, err error, line int, key, msg string) {
	t.Helper()
	var es Errors
	if !errors.As(err, &es) || !errors.Is(err, refill.ErrBadInput) {
		t.Fatalf("err = %v, want config Errors", err)
	}
	for _, e := range es {
		if e.Line == line && e.Key == key && strings.Contains(e.Msg, msg) {
			return
		}
	}
	t.Errorf("no error at line %d key %s saying %q; got:\n%v", line, key, msg, err)
}

// TestDatasetsFromErrors: a manifest refill cannot read, or a node whose
// meta.refill asks for something refill.yaml would refuse, fails the whole
// load at datasets_from's line, naming the manifest and the node.
func TestDatasetsFromErrors(t *testing.T) {
	for _, tt := range []struct {
		name     string
		manifest func(t *testing.T) string
		doc      string
		line     int
		key      string
		want     string
	}{
		{"unsupported version", func(t *testing.T) string {
			return edited(t, manifestV10, func(m map[string]any) {
				m["metadata"].(map[string]any)["dbt_schema_version"] = "https://schemas.getdbt.com/dbt/manifest/v9.json"
			})
		}, "", 3, "datasets_from.dbt_manifest", "dbt manifest target/manifest.json is schema v9, written by dbt 1.6.9; refill reads v10 (dbt 1.6), v11 (dbt 1.7) and v12"},
		{"truncated", func(t *testing.T) string {
			b, _ := os.ReadFile(manifestV10)
			p := filepath.Join(t.TempDir(), "m.json")
			os.WriteFile(p, b[:len(b)/2], 0o600)
			return p
		}, "", 3, "datasets_from.dbt_manifest", "dbt manifest target/manifest.json is truncated"},
		{"bad check", func(t *testing.T) string {
			return edited(t, manifestV10, func(m map[string]any) {
				node(m, "model.shop.events_daily")["meta"] = map[string]any{"refill": map[string]any{"checks": map[string]any{"volume": map[string]any{"lookback": 0}}}}
			})
		}, "", 3, "datasets_from.dbt_manifest", "dbt manifest target/manifest.json: model.shop.events_daily (dataset events_daily): checks.volume.lookback: must be at least 1 day, got 0"},
		{"unknown check", func(t *testing.T) string {
			return edited(t, manifestV10, func(m map[string]any) {
				node(m, "source.shop.raw.events")["meta"] = map[string]any{"refill": map[string]any{"partition": map[string]any{"column": "d"}, "checks": map[string]any{"volumes": 1}}}
			})
		}, "", 3, "datasets_from.dbt_manifest", `source.shop.raw.events (dataset raw__events): checks.volumes: unknown field "volumes"`},
		{"bad grain", func(t *testing.T) string {
			return edited(t, manifestV10, func(m map[string]any) {
				node(m, "model.shop.revenue_daily")["config"].(map[string]any)["meta"] = map[string]any{"refill": map[string]any{"partition": map[string]any{"column": "day", "grain": "week"}}}
			})
		}, "", 3, "datasets_from.dbt_manifest", `model.shop.revenue_daily (dataset revenue_daily): partition.grain: unknown grain "week"`},
		{"table of a yaml dataset", func(*testing.T) string { return manifestV10 },
			"datasets:\n  copy:\n    table: marts.events_daily\n    partition: {column: day}\n", 6, "datasets.copy.table", "table \"marts.events_daily\" is also the table of dataset events_daily (line 3)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(project(t, tt.manifest(t), "datasets_from: {dbt_manifest: target/manifest.json}\n"+tt.doc))
			requireBadInputIn(t, err, tt.line, tt.key, tt.want)
		})
	}
}

// TestFingerprintFollowsChecksum: editing a model's SQL changes its
// checksum in the manifest, and so the fingerprint its proofs are tied to;
// nothing else about the job changed.
func TestFingerprintFollowsChecksum(t *testing.T) {
	load := func(manifest string) *refill.Job {
		cfg, err := Load(project(t, manifest, "datasets_from: {dbt_manifest: target/manifest.json}\n"))
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Datasets["events_daily"].Job
	}
	before := load(manifestV10)
	after := load(edited(t, manifestV10, func(m map[string]any) {
		node(m, "model.shop.events_daily")["checksum"] = map[string]any{"name": "sha256", "checksum": strings.Repeat("9", 64)}
	}))
	same := load(edited(t, manifestV10, func(m map[string]any) {
		node(m, "model.shop.events_daily")["description"] = "a new description is no new job"
	}))
	if before.Fingerprint() == after.Fingerprint() {
		t.Error("a new checksum left the fingerprint as it was")
	}
	if before.Fingerprint() != same.Fingerprint() {
		t.Error("the fingerprint changed with nothing the job runs")
	}
	if after.Checksum != "sha256:"+strings.Repeat("9", 64) {
		t.Errorf("checksum = %q", after.Checksum)
	}
}

// TestDatasetsFromOptions: command, env and project_dir reach every dbt
// job.
func TestDatasetsFromOptions(t *testing.T) {
	path := project(t, manifestV10, `datasets_from:
  dbt_manifest: target/manifest.json
  command: [dbt, run, --select, '{{select}}', --project-dir, '{{project_dir}}', --vars, '{"day": "{{partition}}"}']
  env: [PGPASSWORD, DBT_TARGET=prod]
  project_dir: .
`)
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	j := cfg.Datasets["revenue_daily"].Job
	wantCmd := []string{"dbt", "run", "--select", "revenue_daily", "--project-dir", ".", "--vars", `{"day": "{{partition}}"}`}
	wantEnv := []string{"DBT_PROFILES_DIR", "DBT_PROJECT_DIR", "PGPASSWORD", "DBT_TARGET=prod"}
	if !reflect.DeepEqual(j.Command, wantCmd) || !reflect.DeepEqual(j.Env, wantEnv) {
		t.Errorf("job = %q %q, want %q %q", j.Command, j.Env, wantCmd, wantEnv)
	}
}

func TestLineageOnlyKey(t *testing.T) {
	cfg, err := Parse([]byte(head+`datasets:
  v: {table: staging.v, upstream: [e], lineage_only: materialized as a view}
  e: {lineage_only: ephemeral}
  p: {table: p, partition: {column: d}, lineage_only: no job, checks: {volume: {}}}
`), "refill.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if v := cfg.Datasets["v"]; !v.LineageOnly || v.Why != "materialized as a view" || v.Job != nil || v.Partition.Column != "" || !v.IsSource() {
		t.Errorf("v = %+v", v)
	}
	if e := cfg.Datasets["e"]; !e.LineageOnly || e.Table != "" {
		t.Errorf("e = %+v", e)
	}
	for _, tt := range []struct{ name, doc, key, msg string }{
		{"empty", "datasets:\n  v:\n    lineage_only: '' # <-\n", "datasets.v.lineage_only", "say why the dataset is lineage only"},
		{"boolean", "datasets:\n  v:\n    lineage_only: true # <-\n", "datasets.v.lineage_only", "want the reason in words"},
		{"a job", "datasets:\n  v:\n    lineage_only: view # <-\n    job: {command: [x]}\n", "datasets.v.lineage_only", "this one has a job"},
		{"a schedule", "datasets:\n  v:\n    lineage_only: view\n    schedule: {every: day} # <-\n", "datasets.v.schedule", "nothing to schedule"},
		{"checks without partition", "datasets:\n  v:\n    table: v\n    lineage_only: view\n    checks: {volume: {}} # <-\n", "datasets.v.checks", "give this lineage-only dataset a partition"},
		{"a list", "datasets:\n  v:\n    lineage_only: [view] # <-\n", "datasets.v.lineage_only", "want text, got a list"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(head+tt.doc), "refill.yaml")
			requireBadInput(t, err, markedLine(t, head+tt.doc), tt.key, tt.msg)
		})
	}
}

func TestChecksumKey(t *testing.T) {
	cfg, err := Parse([]byte(head+`datasets:
  a: {job: {command: [make, build], checksum: 'sha256:ab'}}
  b: {job: {command: [make, build]}}
`), "refill.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a, b := cfg.Datasets["a"].Job, cfg.Datasets["b"].Job
	if a.Checksum != "sha256:ab" || a.Fingerprint() == b.Fingerprint() {
		t.Errorf("a = %+v: the checksum must be part of the fingerprint", a)
	}
	doc := "datasets:\n  q:\n    table: q\n    partition: {column: d}\n    job:\n      query: 'SELECT :partition'\n      checksum: x # <-\n"
	_, err = Parse([]byte(head+doc), "refill.yaml")
	requireBadInput(t, err, markedLine(t, head+doc), "datasets.q.job.checksum", "checksum applies only to command jobs")
}

func TestImportDBTErrors(t *testing.T) {
	bad := edited(t, manifestV10, func(m map[string]any) {
		node(m, "model.shop.events_daily")["meta"] = map[string]any{"refill": map[string]any{"checks": map[string]any{"not_null": map[string]any{}}}}
	})
	_, _, err := ImportDBT(bad, dbt.Options{}, "")
	var es Errors
	if !errors.As(err, &es) || len(es) != 1 || es[0].File != bad || es[0].Line != 0 ||
		es[0].Msg != "model.shop.events_daily (dataset events_daily): checks.not_null.columns: required: list the columns that must not be null" {
		t.Errorf("ImportDBT = %#v", err)
	}
	if _, _, err := ImportDBT(filepath.Join(t.TempDir(), "none.json"), dbt.Options{}, ""); !errors.Is(err, refill.ErrBadInput) {
		t.Errorf("missing manifest: %v", err)
	}
}

// BenchmarkDatasetsFrom loads a refill.yaml whose datasets come from the
// larger real manifest (hubspot, 271 datasets): the manifest's import plus
// the config loader's reading of the import's YAML, which is most of it.
//
//	go test ./config/ -run '^$' -bench DatasetsFrom -benchmem
func BenchmarkDatasetsFrom(b *testing.B) {
	manifest := filepath.Join(fixtures.Dir(b, "dbt"), "fivetran_dbt_hubspot_manifest.json")
	path := filepath.Join(b.TempDir(), "refill.yaml")
	if err := os.WriteFile(path, []byte(head+"datasets_from: {dbt_manifest: "+manifest+"}\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(path); err != nil {
			b.Fatal(err)
		}
	}
}

// Loading a config asks dbt its version only to choose how dbt's own
// command runs event_time models: with a command of the project's, nothing
// is run at all; and dbt itself is run with PATH and HOME alone, never
// with refill's secrets.
func TestDbtVersionIsAskedSafely(t *testing.T) {
	man := edited(t, manifestV11, func(m map[string]any) {})
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	script := "#!/bin/sh\necho \"$@ $(env | sort | tr '\\n' ' ')\" >> " + ran + "\necho 'Core:'\necho '  - installed: 1.9.2'\n"
	for _, name := range []string{"run.sh", "bin/dbt"} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("OL_KEY", "the-openlineage-api-key")
	custom := project(t, man, "openlineage: {url: http://ol.example, api_key_env: OL_KEY}\ndatasets_from:\n  dbt_manifest: target/manifest.json\n  command: ["+filepath.Join(dir, "run.sh")+", '{{select}}', '{{partition}}']\n")
	if _, err := Load(custom); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(ran); len(b) > 0 {
		t.Errorf("loading a config with the project's own command ran it: %s", b)
	}
	own := project(t, man, "openlineage: {url: http://ol.example, api_key_env: OL_KEY}\nrun: {path: ["+filepath.Join(dir, "bin")+", /usr/bin, /bin]}\ndatasets_from: {dbt_manifest: target/manifest.json}\n")
	cfg, err := Load(own)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(ran)
	if !strings.HasPrefix(string(b), "--version ") || strings.Contains(string(b), "the-openlineage-api-key") || strings.Count(string(b), "\n") != 1 {
		t.Errorf("dbt --version was run as %q; want once, with no secret of refill's", b)
	}
	var eventTime int
	for _, d := range cfg.Datasets {
		if d.Job != nil && d.Job.Kind == refill.JobCommand && strings.Contains(strings.Join(d.Job.Command, " "), "--event-time-start {{start}}") {
			eventTime++
		}
	}
	if eventTime == 0 {
		t.Errorf("dbt 1.9.2 (dbt --version) did not run event_time models with --event-time-start")
	}
}
