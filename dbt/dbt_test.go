package dbt

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/internal/fixtures"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

var update = flag.Bool("update", false, "rewrite golden files")

// The real manifests (shared/fixtures/dbt, read in place, never copied):
// jaffle_shop is small (5 models, 3 seeds), hubspot large (154 models,
// 56 seeds, 61 sources, 2.6 MB).
const (
	jaffle  = "cosmos_jaffle_shop_manifest.json"
	hubspot = "fivetran_dbt_hubspot_manifest.json"
)

func load(t testing.TB, path string) *Import {
	t.Helper()
	imp, err := Load(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return imp
}

func byName(imp *Import) map[string]Dataset {
	out := map[string]Dataset{}
	for _, d := range imp.Datasets {
		out[d.Name] = d
	}
	return out
}

// TestGolden pins the YAML a person reads for the hand-written v10 and
// v11 manifests, which between them hold every case of the mapping.
func TestGolden(t *testing.T) {
	for _, v := range []string{"v10", "v11"} {
		t.Run(v, func(t *testing.T) {
			imp := load(t, "testdata/manifest_"+v+".json")
			got, err := imp.YAML()
			if err != nil {
				t.Fatal(err)
			}
			golden(t, "import_"+v+".yaml", string(got))
		})
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from golden:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// TestMapping checks, node by node, what each kind of node becomes.
func TestMapping(t *testing.T) {
	type want struct {
		kind, table, column, grain, why, selector string
		upstream, tags                            []string
	}
	cases := map[string]map[string]want{
		"v10": {
			// An incremental model partitioned by BigQuery's partition_by,
			// with meta.refill tags and checks: rebuilt by dbt.
			"events_daily": {kind: "model", table: "marts.events_daily", column: "day", grain: "day", selector: "events_daily",
				upstream: []string{"event_types", "stg_events"}, tags: []string{"daily", "aggregate"}},
			// config.meta.refill.partition; config.tags written as one string.
			"revenue_daily": {kind: "model", table: "marts.revenue_daily", column: "day", grain: "day", selector: "revenue_daily",
				upstream: []string{"events_daily", "fx_rates"}, tags: []string{"billing"}},
			"stg_events":      {kind: "model", table: "staging.stg_events", why: WhyView, upstream: []string{"raw__events"}, tags: []string{"pii"}},
			"event_types":     {kind: "model", why: WhyEphemeral, upstream: []string{"fx_rates"}},
			"fx_rates":        {kind: "seed", table: "seeds.fx_rates", why: WhyNoPartition},
			"orders_snapshot": {kind: "snapshot", table: "snapshots.orders_snapshot", column: "snapshot_day", grain: "day", upstream: []string{"raw__orders"}},
			// A source with a partition: gated, never rebuilt; its table is
			// the identifier, not the name.
			"raw__events": {kind: "source", table: "raw.events_raw", column: "event_date", grain: "day", tags: []string{"external"}},
			"raw__orders": {kind: "source", table: "raw.orders", why: WhyNoPartition},
		},
		"v11": {
			// Two packages' customers models collide, so each is qualified by
			// its package; the crm one then collides with the crm source's
			// name, so both end in a hash of their unique_id.
			"shop2__customers": {kind: "model", table: "marts.customers", column: "updated_at", grain: "hour", selector: "shop2.customers",
				upstream: []string{"crm__customers_7f593e38"}},
			"crm__customers_9cc86b4d": {kind: "model", table: "crm.customers", why: WhyRange, upstream: []string{"crm__customers_7f593e38"}},
			"crm__customers_7f593e38": {kind: "source", table: "crm_raw.customers", column: "updated_at", grain: "day", tags: []string{"crm"}},
			"dim_orders_v2":           {kind: "model", table: "marts.dim_orders_v2", column: "order_day", grain: "day", selector: "dim_orders.v2", upstream: []string{"Orders_2026"}},
			"dim_orders_v1":           {kind: "model", table: "marts.dim_orders_v1", why: WhyView, upstream: []string{"Orders_2026"}},
			"monthly":                 {kind: "model", table: "marts.monthly", why: WhyGrain, upstream: []string{"dim_orders_v2"}},
			// A name that is no identifier, in a schema with capitals that
			// dbt quotes: the table is written quoted.
			"Orders_2026": {kind: "model", table: `"Sales"."Orders-2026"`, column: "order_date", grain: "day", selector: "Orders-2026", upstream: []string{"shop2__customers"}},
			"weird":       {kind: "model", why: WhyName},
			// quoting.identifier false: the capitals are folded as dbt's
			// unquoted SQL folded them, so the name is written plain.
			"upper_t": {kind: "model", table: "staging.UPPER_T", column: "ts", grain: "hour", selector: "upper_t", upstream: []string{"weird"}},
			"multi":   {kind: "model", table: "marts.multi", why: WhyColumns, upstream: []string{"upper_t"}},
		},
	}
	for v, wants := range cases {
		t.Run(v, func(t *testing.T) {
			got := byName(load(t, "testdata/manifest_"+v+".json"))
			if len(got) != len(wants) {
				t.Errorf("%d datasets %v, want %d", len(got), slices.Sorted(mapKeys(got)), len(wants))
			}
			for name, w := range wants {
				d, ok := got[name]
				if !ok {
					t.Errorf("no dataset %s (have %v)", name, slices.Sorted(mapKeys(got)))
					continue
				}
				col, grain := "", ""
				if d.Partition != nil && d.LineageOnly == "" {
					col, grain = d.Partition.Column, d.Partition.Grain
				}
				if d.Kind != w.kind || d.Table != w.table || col != w.column || grain != w.grain || d.LineageOnly != w.why ||
					!slices.Equal(d.Upstream, w.upstream) || !slices.Equal(d.Tags, w.tags) {
					t.Errorf("%s = %+v %+v, want %+v", name, d, d.Partition, w)
				}
				switch {
				case w.selector == "" && d.Job != nil:
					t.Errorf("%s has a job %v, want none", name, d.Job.Command)
				case w.selector != "" && d.Job == nil:
					t.Errorf("%s has no job", name)
				case w.selector != "":
					want := []string{"dbt", "build", "--select", w.selector, "--vars",
						`{"refill_from": "{{from}}", "refill_to": "{{to}}", "refill_partition": "{{partition}}"}`}
					if !slices.Equal(d.Job.Command, want) || !slices.Equal(d.Job.Env, DefaultEnv) || !strings.HasPrefix(d.Job.Checksum, "sha256:") {
						t.Errorf("%s job = %+v, want command %q", name, d.Job, want)
					}
				}
			}
		})
	}
}

// TestRealManifests imports the two real manifests and checks what every
// dataset must be: a plain unique name, upstreams that exist, a table refill
// can name, a job only for a partitioned model, with its checksum.
func TestRealManifests(t *testing.T) {
	dir := fixtures.Dir(t, "dbt")
	for _, tt := range []struct {
		file                          string
		datasets, jobs, lineageOnly   int
		views, ephemeral, noPartition int
	}{
		{jaffle, 8, 0, 8, 3, 0, 5},
		// The 4 jobs are the incremental models partitioned by date_day;
		// the 56 shared are sources declared over the project's own seeds.
		{hubspot, 271, 4, 267, 56, 4, 151},
	} {
		t.Run(tt.file, func(t *testing.T) {
			imp := load(t, filepath.Join(dir, tt.file))
			s := imp.Summary()
			if imp.Version != 12 || s.Datasets != tt.datasets || s.Jobs != tt.jobs || s.LineageOnly != tt.lineageOnly ||
				s.Why[WhyView] != tt.views || s.Why[WhyEphemeral] != tt.ephemeral || s.Why[WhyNoPartition] != tt.noPartition {
				t.Errorf("summary = %+v (v%d)", s, imp.Version)
			}
			checkInvariants(t, imp)
			if !slices.Equal(imp.Databases, []string{"postgres"}) {
				t.Errorf("databases = %v", imp.Databases)
			}
		})
	}
	hub := byName(load(t, filepath.Join(dir, hubspot)))
	for _, name := range []string{"hubspot__daily_ticket_history", "int_hubspot__pivot_daily_ticket_history", "int_hubspot__daily_ticket_history", "int_hubspot__ticket_calendar_spine"} {
		if d := hub[name]; d.Job == nil || d.Partition == nil || d.Partition.Column != "date_day" || d.Partition.Grain != "day" {
			t.Errorf("%s = %+v, want a dbt job partitioned by date_day", name, d)
		}
	}
	if d := hub["hubspot__daily_ticket_history"]; d.Job == nil || d.Job.Checksum != "sha256:d967208f05231e3cd0d4c2a8df5e1c3b4a3301d4f1c60253636a976c330680d5" {
		t.Errorf("checksum = %+v, want the manifest's checksum.checksum", d.Job)
	}
	if d := hub["hubspot__company"]; d.LineageOnly != WhyShared || d.Table != "" || !strings.Contains(d.Note, "company_data_postgres") {
		t.Errorf("source over a seed = %+v, want lineage only without a table, naming the seed", d)
	}
}

var ident = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func checkInvariants(t *testing.T, imp *Import) {
	t.Helper()
	names := map[string]bool{}
	tables := map[string]string{}
	for _, d := range imp.Datasets {
		if !ident.MatchString(d.Name) || len(d.Name) > 63 || names[d.Name] {
			t.Errorf("name %q is not a unique identifier of at most 63 bytes", d.Name)
		}
		names[d.Name] = true
		if d.Table != "" {
			if parts, err := sqltext.ParseName(d.Table); err != nil || len(parts) > 2 {
				t.Errorf("%s: table %q does not parse as schema.name: %v", d.Name, d.Table, err)
			}
			key := strings.ToLower(strings.ReplaceAll(d.Table, `"`, ""))
			if other, ok := tables[key]; ok {
				t.Errorf("%s and %s share table %s", d.Name, other, d.Table)
			}
			tables[key] = d.Name
		}
		if d.Job != nil && (d.Kind != "model" || d.LineageOnly != "" || d.Partition == nil || d.Job.Checksum == "") {
			t.Errorf("%s: job %+v on a %s (lineage only %q)", d.Name, d.Job, d.Kind, d.LineageOnly)
		}
		if d.LineageOnly == "" && (d.Table == "" || d.Partition == nil) {
			t.Errorf("%s: neither lineage only nor partitioned: %+v", d.Name, d)
		}
	}
	for _, d := range imp.Datasets {
		for _, up := range d.Upstream {
			if !names[up] || up == d.Name {
				t.Errorf("%s: upstream %q is not another imported dataset", d.Name, up)
			}
		}
	}
}

// TestEdgesMatchChildMap: for every imported node, the imported datasets
// that list it as upstream are exactly its children in the manifest's own
// child_map, less tests and every other kind refill does not import — and
// its upstreams are its parent_map, likewise.
func TestEdgesMatchChildMap(t *testing.T) {
	check := func(t *testing.T, path string) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var m struct {
				Nodes, Sources map[string]struct {
					ResourceType string `json:"resource_type"`
				}
				ChildMap  map[string][]string `json:"child_map"`
				ParentMap map[string][]string `json:"parent_map"`
			}
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			kinds := map[string]bool{"model": true, "seed": true, "snapshot": true, "source": true}
			imported := map[string]bool{}
			for id, n := range m.Nodes {
				imported[id] = kinds[n.ResourceType]
			}
			for id, n := range m.Sources {
				imported[id] = kinds[n.ResourceType]
			}
			imp := load(t, path)
			node := map[string]string{} // dataset -> node
			children := map[string][]string{}
			parents := map[string][]string{}
			for _, d := range imp.Datasets {
				node[d.Name] = d.Node
			}
			for _, d := range imp.Datasets {
				for _, up := range d.Upstream {
					children[node[up]] = append(children[node[up]], d.Node)
					parents[d.Node] = append(parents[d.Node], node[up])
				}
			}
			n := 0
			for id, ok := range imported {
				if !ok {
					continue
				}
				n++
				for _, c := range []struct {
					what     string
					manifest []string
					got      []string
				}{{"children", m.ChildMap[id], children[id]}, {"parents", m.ParentMap[id], parents[id]}} {
					want := slices.DeleteFunc(slices.Clone(c.manifest), func(x string) bool { return !imported[x] })
					slices.Sort(want)
					got := slices.Sorted(slices.Values(c.got))
					if !slices.Equal(slices.Compact(got), slices.Compact(want)) {
						t.Errorf("%s of %s = %v, manifest says %v", c.what, id, got, want)
					}
				}
			}
			if n != len(imp.Datasets) || n == 0 {
				t.Errorf("%d imported datasets, %d nodes of imported kinds", len(imp.Datasets), n)
			}
		})
	}
	check(t, "testdata/manifest_v10.json")
	check(t, "testdata/manifest_v11.json")
	t.Run("real", func(t *testing.T) {
		dir := fixtures.Dir(t, "dbt")
		check(t, filepath.Join(dir, jaffle))
		check(t, filepath.Join(dir, hubspot))
	})
}

// manifestWith returns a minimal manifest with the given schema URL and
// one model, as text.
func manifestWith(schemaURL string, model string) string {
	meta := `"metadata": {"dbt_version": "1.9.0"}`
	if schemaURL != "-" {
		meta = fmt.Sprintf(`"metadata": {"dbt_schema_version": %q, "dbt_version": "1.9.0"}`, schemaURL)
	}
	if model == "" {
		model = `{"resource_type": "model", "name": "m", "package_name": "p", "schema": "s", "alias": "m",
			"config": {"materialized": "table", "event_time": "at"}, "checksum": {"name": "sha256", "checksum": "ab"}, "depends_on": {"nodes": []}}`
	}
	return fmt.Sprintf(`{%s, "nodes": {"model.p.m": %s}, "sources": {}}`, meta, model)
}

func TestVersions(t *testing.T) {
	for _, v := range []string{"v10", "v11", "v12"} {
		imp, err := Parse(strings.NewReader(manifestWith("https://schemas.getdbt.com/dbt/manifest/"+v+".json", "")), "m.json", Options{})
		if err != nil || imp.Version != int(v[2]-'0')+10 || len(imp.Datasets) != 1 || imp.Datasets[0].Job == nil {
			t.Errorf("%s: %+v, %v", v, imp, err)
		}
	}
	for _, tt := range []struct{ url, want string }{
		{"https://schemas.getdbt.com/dbt/manifest/v9.json", "m.json is schema v9, written by dbt 1.9.0; refill reads v10 (dbt 1.6), v11 (dbt 1.7) and v12"},
		{"https://schemas.getdbt.com/dbt/manifest/v13.json", "m.json is schema v13"},
		{"https://schemas.getdbt.com/dbt/manifest/v99999999999999999999.json", "schema v99999999999999999999"},
		{"https://schemas.getdbt.com/dbt/run-results/v6.json", `m.json has schema version "https://schemas.getdbt.com/dbt/run-results/v6.json", not a manifest schema URL`},
		{"", "m.json has no metadata.dbt_schema_version"},
		{"-", "m.json has no metadata.dbt_schema_version"},
	} {
		_, err := Parse(strings.NewReader(manifestWith(tt.url, "")), "m.json", Options{})
		if !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want bad input saying %q", tt.url, err, tt.want)
		}
	}
	// An unsupported version is what gets reported even when its nodes have
	// a shape refill does not read.
	_, err := Parse(strings.NewReader(manifestWith("https://schemas.getdbt.com/dbt/manifest/v13.json", `{"resource_type": "model", "tags": 5, "schema": ["x"]}`)), "m.json", Options{})
	if err == nil || !strings.Contains(err.Error(), "schema v13") {
		t.Errorf("v13 with odd nodes: %v, want the version named", err)
	}
}

func TestBadManifests(t *testing.T) {
	v12 := "https://schemas.getdbt.com/dbt/manifest/v12.json"
	model := func(fields string) string {
		return manifestWith(v12, `{"resource_type": "model", "name": "m", "package_name": "p", "schema": "s", "alias": "m", "depends_on": {"nodes": []}, `+fields+`}`)
	}
	for _, tt := range []struct{ name, doc, want string }{
		{"empty", "", "m.json is truncated"},
		{"not json", "hello", "m.json is not valid JSON at byte 1"},
		{"array", "[1, 2]", "not a dbt manifest: want a JSON object, got a list"},
		{"after the end", manifestWith(v12, "") + " {}", "more after the manifest's closing brace"},
		{"truncated", manifestWith(v12, "")[:120], "m.json is truncated"},
		{"nodes a list", `{"metadata": {"dbt_schema_version": "` + v12 + `"}, "nodes": [1, 2]}`, "nodes: want an object of nodes by unique_id, got a list"},
		{"no nodes", `{"metadata": {"dbt_schema_version": "` + v12 + `"}}`, "has no nodes"},
		{"node null", manifestWith(v12, "null"), "nodes.model.p.m is null"},
		{"twice", `{"metadata": {"dbt_schema_version": "` + v12 + `"}, "nodes": {}, "nodes": {}}`, `has the key "nodes" twice`},
		{"schema a number", model(`"config": {"materialized": "table"}, "schema": 5`), "nodes.model.p.m.schema: want text, got a JSON number"},
		{"metadata a list", `{"metadata": [], "nodes": {}}`, "metadata: want an object, got a JSON array"},
		{"tags a number", model(`"tags": 7`), "model.p.m: tags: want a list of text"},
		{"config tags", model(`"config": {"tags": {"a": 1}}`), "model.p.m: config.tags: want a list of text"},
		{"meta.refill unknown key", model(`"meta": {"refill": {"partiton": {"column": "d"}}}`), `model.p.m: meta.refill: unknown key "partiton" (known: tags, partition, checks, side_effects)`},
		{"meta.refill partition text", model(`"config": {"meta": {"refill": {"partition": "day"}}}`), "model.p.m: meta.refill.partition: want an object, got a JSON string"},
		{"meta.refill tags", model(`"meta": {"refill": {"tags": "x"}}`), "model.p.m: meta.refill.tags: want a list, got a JSON string"},
		{"meta.refill a list", model(`"meta": {"refill": [1]}`), "model.p.m: meta.refill: want an object with tags, partition, checks and side_effects, got a JSON array"},
		{"partition_by number", model(`"config": {"partition_by": 5}`), "model.p.m: config.partition_by: want an object"},
		{"partition_by field number", model(`"config": {"partition_by": {"field": 5}}`), "model.p.m: config.partition_by: want {field, data_type, granularity}"},
		{"batch_size week", model(`"config": {"event_time": "at", "batch_size": "week"}`), `model.p.m: config.batch_size: "week" is not a dbt batch size`},
		{"granularity", model(`"config": {"partition_by": {"field": "d", "granularity": "fortnight"}}`), `config.partition_by.granularity: "fortnight" is not a granularity`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			imp, err := Parse(strings.NewReader(tt.doc), "m.json", Options{})
			if imp != nil || !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse = %v, %v; want bad input saying %q", imp, err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

// TestTruncatedEverywhere cuts a manifest at every few bytes: every cut is
// a clear error, never a panic or a partial import.
func TestTruncatedEverywhere(t *testing.T) {
	b, err := os.ReadFile("testdata/manifest_v10.json")
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(b)-1; n += 37 {
		imp, err := Parse(strings.NewReader(string(b[:n])), "m.json", Options{})
		if imp != nil || !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), "m.json") {
			t.Fatalf("cut at %d: %v, %v", n, imp, err)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.json")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	// A sparse file: no disk used, but its size is past the limit.
	if err := f.Truncate(MaxManifestBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, tt := range []struct{ path, want string }{
		{big, "big.json is 512 MiB, more than the 512 MiB refill reads"},
		{dir, "is a directory"},
		{filepath.Join(dir, "missing.json"), "missing.json: cannot read it: no such file or directory; run `dbt parse`"},
		{"/dev/null", "/dev/null is not a regular file"},
	} {
		if _, err := Load(tt.path, Options{}); !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Load(%s) = %v, want bad input saying %q", tt.path, err, tt.want)
		}
	}
}

func TestOptions(t *testing.T) {
	doc := manifestWith("https://schemas.getdbt.com/dbt/manifest/v12.json", "")
	imp, err := Parse(strings.NewReader(doc), "m.json", Options{ProjectDir: "transform", Env: []string{"PGPASSWORD", "DBT_TARGET=prod"}})
	if err != nil {
		t.Fatal(err)
	}
	j := imp.Datasets[0].Job
	// m has config.event_time and the manifest is dbt 1.9's: dbt run for
	// the partition's bounds.
	if want := fill(append(slices.Clone(EventTimeCommand), "--project-dir", "transform"), "m"); !slices.Equal(j.Command, want) {
		t.Errorf("command = %q, want %q", j.Command, want)
	}
	if j.SideEffects || j.ProofCommand != nil {
		t.Errorf("side_effects %v, proof_command %q: want an ordinary job without a proof target", j.SideEffects, j.ProofCommand)
	}
	if want := []string{"DBT_PROFILES_DIR", "DBT_PROJECT_DIR", "PGPASSWORD", "DBT_TARGET=prod"}; !slices.Equal(j.Env, want) {
		t.Errorf("env = %q, want %q (a fixed DBT_TARGET replaces the pass-through)", j.Env, want)
	}
	custom := Options{Command: []string{"./bin/dbt", "run", "-s", "{{select}}", "--project-dir", "{{project_dir}}", "--vars", "{day: '{{partition}}'}"}, ProjectDir: "t"}
	imp, err = Parse(strings.NewReader(doc), "m.json", custom)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"./bin/dbt", "run", "-s", "m", "--project-dir", "t", "--vars", "{day: '{{partition}}'}"}; !slices.Equal(imp.Datasets[0].Job.Command, want) {
		t.Errorf("command = %q, want %q", imp.Datasets[0].Job.Command, want)
	}
	// The version dbt --version prints decides, before the manifest's;
	// a proof target adds --target to what a proof runs; meta.refill
	// may declare side effects.
	for _, c := range []struct {
		version, manifest string
		eventTime         bool
		note              string
	}{
		{"Core:\n  - installed: 1.9.1\n  - latest:    1.9.1 - Up to date!\n", "1.8.0", true, "dbt 1.9.1 (dbt --version)"},
		{"Core:\n  - installed: 1.8.7\n", "1.9.0", false, "dbt 1.8.7 (dbt --version) is older than 1.9"},
		{"installed version: 1.4.6\n   latest version: 1.5.0\n", "1.9.0", false, "dbt 1.4.6 (dbt --version) is older than 1.9"},
		{"", "1.10.2", true, "dbt 1.10.2 (the manifest's; dbt --version could not be read)"},
		{"command not found", "1.7.3", false, "dbt 1.7.3 (the manifest's) is older than 1.9"},
	} {
		doc := strings.Replace(manifestWith("https://schemas.getdbt.com/dbt/manifest/v12.json", ""), `"dbt_version": "1.9.0"`, `"dbt_version": "`+c.manifest+`"`, 1)
		imp, err := Parse(strings.NewReader(doc), "m.json", Options{Version: c.version, ProofTarget: "proof"})
		if err != nil {
			t.Fatal(err)
		}
		d := imp.Datasets[0]
		if got := d.Job.Command[1] == "run" && slices.Contains(d.Job.Command, "--event-time-start"); got != c.eventTime {
			t.Errorf("%q / manifest %s: command %q, want event time %v", c.version, c.manifest, d.Job.Command, c.eventTime)
		}
		if !strings.Contains(d.Note, c.note) {
			t.Errorf("%q / manifest %s: note %q, want %q", c.version, c.manifest, d.Note, c.note)
		}
		if want := append(slices.Clone(d.Job.Command), "--target", "proof"); !slices.Equal(d.Job.ProofCommand, want) {
			t.Errorf("proof command %q, want %q", d.Job.ProofCommand, want)
		}
	}
	withEffects := manifestWith("https://schemas.getdbt.com/dbt/manifest/v12.json", `{"resource_type": "model", "name": "m", "package_name": "p", "schema": "s", "alias": "m",
		"config": {"materialized": "table", "event_time": "at", "meta": {"refill": {"side_effects": true}}}, "checksum": {"name": "sha256", "checksum": "ab"}, "depends_on": {"nodes": []}}`)
	if imp, err := Parse(strings.NewReader(withEffects), "m.json", Options{}); err != nil || !imp.Datasets[0].Job.SideEffects {
		t.Errorf("meta.refill.side_effects: %+v, %v", imp, err)
	}
	for _, tt := range []struct {
		opts Options
		want string
	}{
		{Options{Command: []string{}}, "want a non-empty argv list"},
		{Options{Command: []string{"", "{{select}}"}}, "want a non-empty argv list"},
		{Options{Command: []string{"dbt", "run"}}, "put {{select}} in it"},
		{Options{Command: []string{"dbt", "run", "-s", "{{select}}", "{{partiton}}"}}, "unknown placeholder {{partiton}}"},
		{Options{Command: []string{"dbt", "run", "-s", "{{ select }}"}}, "unknown placeholder {{ select }}"},
		{Options{Command: []string{"dbt", "run", "-s", "{{select}}"}, ProjectDir: "t"}, "the command does not use it"},
		{Options{Env: []string{"1X"}}, `env: "1X": want NAME`},
	} {
		if _, err := Parse(strings.NewReader(doc), "m.json", tt.opts); !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want bad input saying %q", tt.opts, err, tt.want)
		}
	}
}

// TestNames: names are identifiers, unique, and do not depend on the order
// nodes come in.
func TestNames(t *testing.T) {
	long := strings.Repeat("x", 70)
	nodes := []*node{
		{ID: "model.a.orders", ResourceType: "model", Name: "orders", PackageName: "a"},
		{ID: "model.b.orders", ResourceType: "model", Name: "orders", PackageName: "b"},
		{ID: "model.a.a__orders", ResourceType: "model", Name: "a__orders", PackageName: "a"},
		{ID: "source.a.raw.events", ResourceType: "source", Name: "events", SourceName: "raw", PackageName: "a"},
		{ID: "model.a.9-lives", ResourceType: "model", Name: "9-lives", PackageName: "a"},
		{ID: "model.a." + long, ResourceType: "model", Name: long, PackageName: "a"},
		{ID: "model.a.dim.v2", ResourceType: "model", Name: "dim", PackageName: "a", Version: "2"},
		{ID: "model.a.dim.v3", ResourceType: "model", Name: "dim", PackageName: "a", Version: float64(3)},
	}
	names := datasetNames(nodes)
	want := map[string]string{
		"model.a.orders":      hashed("a__orders", "model.a.orders"),
		"model.a.a__orders":   hashed("a__orders", "model.a.a__orders"),
		"model.b.orders":      "b__orders",
		"source.a.raw.events": "raw__events",
		"model.a.9-lives":     "_9_lives",
		"model.a." + long:     hashed(long, "model.a."+long),
		"model.a.dim.v2":      "dim_v2",
		"model.a.dim.v3":      "dim_v3",
	}
	for id, w := range want {
		if names[id] != w || !ident.MatchString(names[id]) || len(names[id]) > 63 {
			t.Errorf("name of %s = %q, want %q", id, names[id], w)
		}
	}
	slices.Reverse(nodes)
	if again := datasetNames(nodes); !mapsEqual(again, names) {
		t.Errorf("names depend on node order: %v vs %v", again, names)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func TestSummarize(t *testing.T) {
	ds := map[string]*refill.Dataset{
		"a": {Name: "a", From: "dbt:m.json", Job: &refill.Job{Kind: refill.JobCommand}},
		"b": {Name: "b", From: "dbt:m.json", LineageOnly: true, Why: WhyView},
		"c": {Name: "c", From: "dbt:m.json", LineageOnly: true, Why: WhyView},
		"d": {Name: "d", From: "dbt:m.json", Table: "d"},
		"e": {Name: "e"},
	}
	got := Summarize(ds)
	if len(got) != 1 || got[0].Datasets != 4 || got[0].Jobs != 1 || got[0].Sources != 1 || got[0].LineageOnly != 2 || got[0].Why[WhyView] != 2 {
		t.Fatalf("Summarize = %+v", got)
	}
	want := "dbt:m.json: 4 datasets: 1 rebuilt by dbt, 1 source the gate checks, 2 lineage only\n     2 lineage only, " + WhyView
	if got[0].String() != want {
		t.Errorf("String =\n%s\nwant\n%s", got[0], want)
	}
}

// TestSelectorsThatSelectMore: a model whose name dbt would read as more
// than one node (graph operators, wildcards, a flag, spaces) gets no job.
func TestSelectorsThatSelectMore(t *testing.T) {
	for sel, safe := range map[string]bool{
		"orders": true, "Orders-2026": true, "pkg.dir.orders": true, "orders.v2": true,
		"*": false, "orders+": false, "+orders": false, "@orders": false, "--full-refresh": false,
		"x.v1 tag:pii": false, "tag:pii": false, "a,b": false, "": false, "orders\n": false,
	} {
		if got := safeSelector.MatchString(sel); got != safe {
			t.Errorf("selector %q: safe %v, want %v", sel, got, safe)
		}
	}
}

// dbt's generic tests become the tested dataset's checks, in refill.yaml's
// shape, and what cannot be one is named; meta.refill.checks wins.
func TestGenericTestsBecomeChecks(t *testing.T) {
	test := func(id, name, ns, col string, kwargs, config string) string {
		nsJSON := "null"
		if ns != "" {
			nsJSON = fmt.Sprintf("%q", ns)
		}
		colJSON := "null"
		if col != "" {
			colJSON = fmt.Sprintf("%q", col)
		}
		if config == "" {
			config = `{"severity": "ERROR", "where": null}`
		}
		return fmt.Sprintf(`%q: {"resource_type": "test", "name": %q, "package_name": "p", "attached_node": "model.p.m", "column_name": %s,
			"test_metadata": {"name": %q, "namespace": %s, "kwargs": %s}, "config": %s, "depends_on": {"nodes": ["model.p.m"]}}`, id, id, colJSON, name, nsJSON, kwargs, config)
	}
	tests := strings.Join([]string{
		test("test.p.nn_id", "not_null", "", "id", `{"column_name": "id"}`, ""),
		test("test.p.nn_day", "not_null", "", "day", `{"column_name": "day"}`, ""),
		test("test.p.u_id", "unique", "", "id", `{"column_name": "id"}`, ""),
		test("test.p.u_code", "unique", "", "code", `{"column_name": "code"}`, ""),
		test("test.p.av", "accepted_values", "", "status", `{"column_name": "status", "values": ["new", "done"]}`, ""),
		test("test.p.avn", "accepted_values", "", "qty", `{"column_name": "qty", "values": [1, 2]}`, ""),
		test("test.p.rel", "relationships", "", "user_id", `{"column_name": "user_id", "to": "ref('users')", "field": "id"}`, ""),
		test("test.p.warn", "not_null", "", "note", `{"column_name": "note"}`, `{"severity": "warn"}`),
		test("test.p.where", "not_null", "", "x", `{"column_name": "x"}`, `{"where": "x > 0"}`),
	}, ",\n")
	model := func(meta string) string {
		return fmt.Sprintf(`{"metadata": {"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json", "dbt_version": "1.9.0"},
 "nodes": {"model.p.m": {"resource_type": "model", "name": "m", "package_name": "p", "schema": "s", "alias": "m",
   "config": {"materialized": "table", "event_time": "day", "meta": %s}, "checksum": {"name": "sha256", "checksum": "ab"}, "depends_on": {"nodes": []}},
 %s}, "sources": {}}`, meta, tests)
	}
	imp, err := Parse(strings.NewReader(model("{}")), "m.json", Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := imp.Datasets[0]
	got, _ := json.Marshal(d.Checks)
	want := `{"accepted_values":{"status":["new","done"]},"not_null":{"columns":["day","id"]},"unique":["code"]}`
	if string(got) != want {
		t.Errorf("checks = %s, want %s", got, want)
	}
	for _, w := range []string{"checks from dbt tests: not_null(day, id), unique(code), accepted_values(status)",
		"dbt tests not used: unique(id) (refill checks one key), accepted_values(qty) (values that are not text: refill compares them as text), relationships, not_null (severity warn), not_null (a where filter)"} {
		if !strings.Contains(d.Note, w) {
			t.Errorf("note %q does not say %q", d.Note, w)
		}
	}
	imp, err = Parse(strings.NewReader(model(`{"refill": {"checks": {"not_null": {"columns": ["id"], "max_ratio": 0.1}}}}`)), "m.json", Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, _ = json.Marshal(imp.Datasets[0].Checks)
	if !strings.Contains(string(got), `"not_null":{"columns":["id"],"max_ratio":0.1}`) || !strings.Contains(string(got), `"unique":["code"]`) {
		t.Errorf("with meta.refill.checks: %s; want its not_null kept and dbt's unique added", got)
	}
}

// dbt --version that hangs, with a child holding its output open, is
// given up on at the timeout and its process group killed.
func TestReadVersionGivesUp(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "dbt")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\nsleep 300 &\nsleep 300\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	old := versionTimeout
	versionTimeout = 200 * time.Millisecond
	defer func() { versionTimeout = old }()
	if out, err := ReadVersion(prog, []string{"PATH=/usr/bin:/bin"}); err == nil {
		t.Errorf("a hanging dbt --version gave %q and no error", out)
	}
}
