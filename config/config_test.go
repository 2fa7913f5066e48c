package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/refill-dev/refill"
)

// head is the smallest valid start of a file; cases append to it.
const head = "version: 1\nwarehouse: sqlite:w.db\n"

// marker ends the line a case expects its error on, so that the expected line
// is written where it is, not counted by hand.
const marker = "# <-"

func markedLine(t *testing.T, doc string) int {
	t.Helper()
	for i, l := range strings.Split(doc, "\n") {
		if strings.Contains(l, marker) {
			return i + 1
		}
	}
	t.Fatalf("case has no %q marker:\n%s", marker, doc)
	return 0
}

// requireBadInput checks that err is a config error that names file:line and
// key, classifies as bad input, and says msg.
func requireBadInput(t *testing.T, err error, line int, key, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("Parse succeeded, want an error at line %d key %s (%s)", line, key, msg)
	}
	if !errors.Is(err, refill.ErrBadInput) {
		t.Errorf("errors.Is(err, ErrBadInput) = false for %v", err)
	}
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("errors.As(*Error) failed for %T %v", err, err)
	}
	prefix := fmt.Sprintf("refill.yaml:%d: ", line)
	if key != "" {
		prefix += key + ": "
	}
	for _, l := range strings.Split(err.Error(), "\n") {
		if strings.HasPrefix(l, prefix) && strings.Contains(l, msg) {
			return
		}
	}
	t.Errorf("no error line starts with %q and contains %q; got:\n%v", prefix, msg, err)
}

func TestLoadExample(t *testing.T) {
	cfg, err := Load("testdata/refill.yaml")
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs("testdata/refill.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := &refill.Config{
		File:           abs,
		Dir:            filepath.Dir(abs),
		Warehouse:      "sqlite:warehouse.db",
		State:          "sqlite:.refill/state.db",
		ProofWarehouse: "sqlite:scratch.db",
		Run:            refill.RunConfig{MaxActive: 3, MaxActiveTotal: 8, Attempts: 3, Backoff: refill.Duration(time.Second), RescueAfter: refill.Duration(10 * time.Minute), Tolerance: 0.1, Path: refill.DefaultJobPath, OutagePatience: refill.Duration(2 * time.Minute)},
		Notify: refill.NotifyConfig{
			Slack:    &refill.SlackConfig{WebhookURLEnv: "SLACK_WEBHOOK_URL", SigningSecretEnv: "SLACK_SIGNING_SECRET"},
			Webhooks: []refill.WebhookConfig{{URL: "http://127.0.0.1:9000/hook", SecretEnv: "HOOK_SECRET"}},
		},
		Policy: refill.Policy{
			AutoMaxDays:    7,
			ManualOverDays: 30,
			ManualTags:     []string{"billing", "external"},
			AggregateTags:  []string{"aggregate"},
			Rules: []refill.Rule{{
				Name:   "watcher-small-only",
				When:   "request.requested_by == 'watcher' && request.days > 3",
				Tier:   refill.TierManual,
				Reason: "the watcher may fill at most 3 days on its own",
			}},
		},
		Users: map[string]refill.User{
			"alice": {Name: "alice", Roles: []string{"engineer"}, Slack: "U012ABCDEF"},
			"carol": {Name: "carol", Roles: []string{"lead"}, Slack: "U034GHIJKL"},
		},
		Datasets: map[string]*refill.Dataset{
			"events_raw": {
				Name:      "events_raw",
				Table:     "events_raw",
				Partition: refill.PartitionSpec{Column: "event_date", Grain: refill.GrainDay},
				Checks: &refill.Checks{
					NotNull:   &refill.NotNullCheck{Columns: []string{"user_id", "amount"}, MaxRatio: 0.01},
					Volume:    &refill.VolumeCheck{Lookback: 28, MaxZ: 3},
					TimeOrder: []refill.TimeOrderCheck{{Earlier: "event_time", Later: "ingested_at"}},
					NoFuture:  []string{"event_time"},
				},
				Line: 25,
			},
			"events_daily": {
				Name:      "events_daily",
				Table:     "events_daily",
				Partition: refill.PartitionSpec{Column: "day", Grain: refill.GrainDay},
				Upstream:  []string{"events_raw"},
				Tags:      []string{"aggregate"},
				Schedule:  &refill.Schedule{Every: refill.GrainDay, Lag: refill.Duration(2 * time.Hour), Horizon: 35},
				Job: &refill.Job{Kind: refill.JobQuery, Query: "SELECT event_date AS day,\n" +
					"       event_type, count(*) AS events, sum(amount) AS amount\n" +
					"FROM events_raw WHERE event_date = :partition\n" +
					"GROUP BY event_date, event_type\n"},
				Line: 33,
			},
			"revenue_daily": {
				Name:      "revenue_daily",
				Table:     "revenue_daily",
				Partition: refill.PartitionSpec{Column: "day", Grain: refill.GrainDay},
				Upstream:  []string{"events_daily"},
				Tags:      []string{"aggregate", "billing"},
				Job: &refill.Job{Kind: refill.JobSQL, SQL: "INSERT OR IGNORE INTO revenue_daily (day, amount)\n" +
					"SELECT day, sum(amount) FROM events_daily WHERE day = :partition GROUP BY day\n"},
				Line: 48,
			},
			"partner_feed": {
				Name:      "partner_feed",
				Partition: refill.PartitionSpec{Grain: refill.GrainDay},
				Upstream:  []string{"events_daily"},
				Tags:      []string{"external"},
				Job: &refill.Job{Kind: refill.JobCommand, Command: []string{"./export.sh", "{{partition}}"},
					Env: []string{"PARTNER_SFTP_KEY", "EXPORT_MODE=full"}, SideEffects: true, Path: refill.DefaultJobPath},
				Line: 57,
			},
		},
		MaxRangeDays:   refill.DefaultMaxRangeDays,
		Audit:          refill.AuditConfig{KeyEnv: "REFILL_AUDIT_KEY"},
		Housekeeping:   refill.DefaultHousekeeping(),
		AcceptLeadTags: []string{"billing", "external"},
		Watch:          refill.WatchConfig{Interval: refill.Duration(5 * time.Minute)},
		Plan:           refill.PlanConfig{DiffBudget: refill.DefaultDiffBudget},
	}
	if !reflect.DeepEqual(cfg, want) {
		got, _ := json.MarshalIndent(cfg, "", "  ")
		exp, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("Load mismatch\ngot:  %s\nwant: %s", got, exp)
		for name, d := range want.Datasets {
			if g := cfg.Datasets[name]; g != nil && g.Line != d.Line {
				t.Errorf("dataset %s: Line = %d, want %d", name, g.Line, d.Line)
			}
		}
	}
}

func TestDefaults(t *testing.T) {
	cfg, err := Parse([]byte(head+`
datasets:
  src:
    table: analytics.src
    partition: {column: day}
    checks:
      not_null: {columns: [a]}
      volume: {}
    schedule: {lag: 90m}
  hourly:
    table: hourly
    partition: {column: hour, grain: hour}
    upstream: [src]
    schedule: {}
    job: {query: "SELECT * FROM src WHERE day = :partition", timeout: 10m}
  feed:
    upstream: [src]
    job: {command: [./feed], env: {B: "2", A: 1}}
  feed2:
    job: {command: [./feed], env: ["X=1", "Y="]}
  dag:
    job:
      airflow: {url: "https://airflow.example.com", dag_id: rebuild}
`), "refill.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.State != "sqlite:.refill/state.db" {
		t.Errorf("State = %q", cfg.State)
	}
	if want := (refill.RunConfig{MaxActive: 3, MaxActiveTotal: 8, Attempts: 3, Backoff: refill.Duration(time.Second), RescueAfter: refill.Duration(10 * time.Minute), Tolerance: 0.1, Path: refill.DefaultJobPath, OutagePatience: refill.Duration(2 * time.Minute)}); cfg.Run != want {
		t.Errorf("Run = %+v, want %+v", cfg.Run, want)
	}
	if !reflect.DeepEqual(cfg.Policy, refill.DefaultPolicy()) {
		t.Errorf("Policy = %+v, want %+v", cfg.Policy, refill.DefaultPolicy())
	}
	if cfg.MaxRangeDays != refill.DefaultMaxRangeDays {
		t.Errorf("MaxRangeDays = %d", cfg.MaxRangeDays)
	}
	if cfg.Notify.Slack != nil || cfg.Notify.Webhooks != nil {
		t.Errorf("Notify = %+v, want empty", cfg.Notify)
	}
	if len(cfg.Users) != 0 || cfg.Users == nil {
		t.Errorf("Users = %#v, want an empty map", cfg.Users)
	}
	if cfg.File == "" || !filepath.IsAbs(cfg.File) || cfg.Dir != filepath.Dir(cfg.File) {
		t.Errorf("File = %q, Dir = %q", cfg.File, cfg.Dir)
	}

	src := cfg.Datasets["src"]
	if src.Partition.Grain != refill.GrainDay {
		t.Errorf("src grain = %q, want day", src.Partition.Grain)
	}
	if nn := src.Checks.NotNull; nn.MaxRatio != 0 {
		t.Errorf("not_null max_ratio = %g, want 0", nn.MaxRatio)
	}
	if v := src.Checks.Volume; !reflect.DeepEqual(*v, refill.VolumeCheck{Lookback: 28, MaxZ: 3}) {
		t.Errorf("volume = %+v", *v)
	}
	if s := src.Schedule; *s != (refill.Schedule{Every: refill.GrainDay, Lag: refill.Duration(90 * time.Minute), Horizon: 35}) {
		t.Errorf("src schedule = %+v", *s)
	}
	if !src.IsSource() {
		t.Error("src is not a source")
	}

	hourly := cfg.Datasets["hourly"]
	if s := hourly.Schedule; *s != (refill.Schedule{Every: refill.GrainHour, Horizon: 35}) {
		t.Errorf("hourly schedule = %+v, want every hour (its grain) and no lag", *s)
	}
	if hourly.Job.Timeout != refill.Duration(10*time.Minute) {
		t.Errorf("timeout = %v", hourly.Job.Timeout)
	}
	if hourly.Checks != nil {
		t.Errorf("hourly checks = %+v, want nil", hourly.Checks)
	}

	feed := cfg.Datasets["feed"]
	if feed.Table != "" || feed.Job.Kind != refill.JobCommand || feed.Job.Timeout != 0 {
		t.Errorf("feed = %+v, job %+v", feed, feed.Job)
	}
	if want := []string{"A=1", "B=2"}; !reflect.DeepEqual(feed.Job.Env, want) {
		t.Errorf("feed env = %q, want %q", feed.Job.Env, want)
	}
	if want := []string{"X=1", "Y="}; !reflect.DeepEqual(cfg.Datasets["feed2"].Job.Env, want) {
		t.Errorf("feed2 env = %q, want %q", cfg.Datasets["feed2"].Job.Env, want)
	}

	dag := cfg.Datasets["dag"].Job
	if dag.Kind != refill.JobAirflow || dag.Airflow.API != "v1" || dag.Airflow.DagID != "rebuild" {
		t.Errorf("airflow job = %+v %+v", dag, dag.Airflow)
	}
}

func TestPolicyOverrides(t *testing.T) {
	cfg, err := Parse([]byte(head+`
policy:
  auto_max_days: 0
  manual_tags: []
max_range_days: 400
run: {max_active: 2}
`), "refill.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Policy
	if p.AutoMaxDays != 0 || p.ManualOverDays != 30 {
		t.Errorf("days = %d/%d, want 0 (given) and 30 (default)", p.AutoMaxDays, p.ManualOverDays)
	}
	if p.ManualTags == nil || len(p.ManualTags) != 0 {
		t.Errorf("ManualTags = %#v, want an explicit empty list", p.ManualTags)
	}
	if !reflect.DeepEqual(p.AggregateTags, []string{"aggregate"}) {
		t.Errorf("AggregateTags = %q, want the default", p.AggregateTags)
	}
	if cfg.MaxRangeDays != 400 {
		t.Errorf("MaxRangeDays = %d", cfg.MaxRangeDays)
	}
	if cfg.Run != (refill.RunConfig{MaxActive: 2, MaxActiveTotal: 8, Attempts: 3, Backoff: refill.Duration(time.Second), RescueAfter: refill.Duration(10 * time.Minute), Tolerance: 0.1, Path: refill.DefaultJobPath, OutagePatience: refill.Duration(2 * time.Minute)}) {
		t.Errorf("Run = %+v", cfg.Run)
	}
}

// TestAnchors shows YAML anchors and merge keys work, so shared job or check
// settings need not be repeated.
func TestAnchors(t *testing.T) {
	cfg, err := Parse([]byte(head+`
datasets:
  a: &base
    table: a
    partition: {column: day, grain: hour}
  b:
    <<: *base
    table: b
`), "refill.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if b := cfg.Datasets["b"]; b.Table != "b" || b.Partition.Column != "day" || b.Partition.Grain != refill.GrainHour {
		t.Errorf("b = %+v", b)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		key  string
		msg  string
	}{
		// Top level.
		{"version missing", "warehouse: sqlite:w.db # <-\n", "version", "required"},
		{"version wrong", "version: 2 # <-\nwarehouse: sqlite:w.db\n", "version", "unsupported version 2"},
		{"version as text", "version: \"1\" # <-\nwarehouse: sqlite:w.db\n", "version", `want a whole number, got the text "1"`},
		{"warehouse missing", "version: 1 # <-\n", "warehouse", "required"},
		{"warehouse scheme", "version: 1\nwarehouse: mysql://x # <-\n", "warehouse", "none of sqlite:PATH, duckdb:PATH and postgres://"},
		{"sqlite without path", "version: 1\nwarehouse: 'sqlite:' # <-\n", "warehouse", "needs a file path"},
		{"state scheme", head + "state: postgress://x # <-\n", "state", "neither sqlite:PATH nor postgres://"},
		{"datasets_from missing manifest", head + "datasets_from: {dbt_manifest: target/manifest.json} # <-\n", "datasets_from.dbt_manifest", "dbt manifest target/manifest.json: cannot read it: no such file or directory; run `dbt parse`"},
		{"datasets_from without manifest", head + "datasets_from: {env: [X]} # <-\n", "datasets_from.dbt_manifest", "required: the path of the dbt project's target/manifest.json"},
		{"datasets_from command", head + "datasets_from:\n  dbt_manifest: m.json\n  command: [dbt, run] # <-\n", "datasets_from.command", "put {{select}} in it"},
		{"datasets_from placeholder", head + "datasets_from:\n  dbt_manifest: m.json\n  command: [dbt, run, -s, '{{select}}', '{{day}}'] # <-\n", "datasets_from.command", "unknown placeholder {{day}} (known: {{select}}, {{project_dir}}, {{partition}}, {{from}}, {{to}}, {{start}}, {{end}})"},
		{"datasets_from env", head + "datasets_from:\n  dbt_manifest: m.json\n  env:\n    - 'pass word' # <-\n", "datasets_from.env[0]", "want NAME"},
		{"datasets_from project_dir", head + "datasets_from:\n  dbt_manifest: m.json\n  project_dir: no/such/dir # <-\n", "datasets_from.project_dir", `"no/such/dir" is not a directory`},
		{"datasets_from project_dir unused", head + "datasets_from:\n  dbt_manifest: m.json\n  command: [dbt, run, -s, '{{select}}']\n  project_dir: testdata # <-\n", "datasets_from.project_dir", "the command does not use it"},
		{"datasets_from a list", head + "datasets_from: [m.json] # <-\n", "datasets_from", "want a mapping, got a list"},
		{"max_range_days zero", head + "max_range_days: 0 # <-\n", "max_range_days", "at least 1"},
		{"run zero", head + "run:\n  attempts: 0 # <-\n", "run.attempts", "at least 1"},
		{"run contradiction", head + "run:\n  max_active: 9 # <-\n", "run.max_active", "more than max_active_total 8"},

		{"plan diff_budget negative", head + "plan:\n  diff_budget: -1 # <-\n", "plan.diff_budget", "must be 0 (no content diffs) or more rows, got -1"},
		{"plan unknown key", head + "plan:\n  diff_budgte: 9 # <-\n", "plan.diff_budgte", `unknown field "diff_budgte" (known: diff_budget)`},
		{"key empty", head + "datasets:\n  a:\n    table: a\n    partition: {column: d}\n    key: [] # <-\n", "datasets.a.key", "list the columns that identify a row"},
		{"key twice", head + "datasets:\n  a:\n    table: a\n    partition: {column: d}\n    key: [id, id] # <-\n", "datasets.a.key[1]", `column "id" is listed twice`},
		{"key qualified", head + "datasets:\n  a:\n    table: a\n    partition: {column: d}\n    key: [a.id] # <-\n", "datasets.a.key[0]", "must be one name"},
		{"private qualified", head + "datasets:\n  a:\n    table: a\n    partition: {column: d}\n    private: [a.email] # <-\n", "datasets.a.private[0]", "must be one name"},

		// Notify.
		{"webhook url", head + "notify:\n  webhooks:\n    - url: 'ftp://x/hook' # <-\n", "notify.webhooks[0].url", "http:// or https://"},
		{"webhook url unparsable", head + "notify:\n  webhooks:\n    - url: 'http://[::1' # <-\n", "notify.webhooks[0].url", "not a valid URL"},
		{"webhook url missing", head + "notify:\n  webhooks:\n    - secret_env: S # <-\n", "notify.webhooks[0].url", "required"},
		{"openlineage url", head + "openlineage:\n  url: 'marquez:5000' # <-\n", "openlineage.url", "http:// or https://"},
		{"openlineage url missing", head + "openlineage: # <-\n  api_key_env: OL_KEY\n", "openlineage.url", "required"},
		{"openlineage endpoint", head + "openlineage:\n  url: http://marquez:5000\n  endpoint: 'http://x/api' # <-\n", "openlineage.endpoint", "want a path"},
		{"openlineage key pasted", head + "openlineage:\n  url: http://marquez:5000\n  api_key_env: 'sk-123 456' # <-\n", "openlineage.api_key_env", "environment variable"},
		{"openlineage namespace", head + "openlineage:\n  url: http://marquez:5000\n  namespace: ' x' # <-\n", "openlineage.namespace", "without surrounding space"},
		{"slack env is a value", head + "notify:\n  slack:\n    webhook_url_env: https://hooks.slack.com/x # <-\n", "notify.slack.webhook_url_env", "name of an environment variable"},

		// Policy.
		{"auto negative", head + "policy:\n  auto_max_days: -1 # <-\n", "policy.auto_max_days", "0 or more"},
		{"manual zero", head + "policy:\n  manual_over_days: 0 # <-\n", "policy.manual_over_days", "at least 1"},
		{"auto over manual", head + "policy:\n  auto_max_days: 40 # <-\n", "policy.auto_max_days", "more than manual_over_days 30"},
		{"manual under default auto", head + "policy:\n  manual_over_days: 5 # <-\n", "policy.manual_over_days", "auto_max_days 7 is more than manual_over_days 5"},
		{"rule without name", head + "policy:\n  rules:\n    - when: 'true' # <-\n      tier: manual\n", "policy.rules[0].name", "required"},
		{"rule name twice", head + "policy:\n  rules:\n    - {name: r, when: 'true', tier: manual}\n    - {name: r, when: 'true', tier: manual} # <-\n", "policy.rules[1].name", `rule "r" is already defined at line 5`},
		{"rule tier", head + "policy:\n  rules:\n    - name: r\n      when: 'true'\n      tier: automatic # <-\n", "policy.rules[0].tier", `unknown tier "automatic"`},
		{"rule when does not compile", head + "policy:\n  rules:\n    - name: r\n      when: 'request.days >' # <-\n      tier: manual\n", "policy.rules[0].when", "does not compile"},
		{"rule misspelled field", head + "policy:\n  rules:\n    - name: r\n      when: \"request.requester == 'watcher'\" # <-\n      tier: manual\n", "policy.rules[0].when", "undefined field 'requester'"},
		{"side effects on a query job", head + "datasets:\n  e:\n    table: e\n    partition: {column: day}\n    job:\n      query: 'SELECT :partition'\n      side_effects: true # <-\n", "datasets.e.job.side_effects", "side_effects applies to command and airflow jobs"},
		{"plan ttl", head + "policy:\n  plan_ttl: 0d # <-\n", "policy.plan_ttl", "must be at least 1d"},
		{"snapshot ttl", head + "policy:\n  snapshot_ttl: soon # <-\n", "policy.snapshot_ttl", "is not a duration"},
		{"audit key env", head + "audit: {key_env: 'my secret'} # <-\n", "audit.key_env", "name of an environment variable"},
		{"rule when not boolean", head + "policy:\n  rules:\n    - name: r\n      when: 'request.reason + \"x\"' # <-\n      tier: manual\n", "policy.rules[0].when", "want a boolean"},
		{"rule when empty", head + "policy:\n  rules:\n    - name: r\n      when: '  ' # <-\n      tier: manual\n", "policy.rules[0].when", "required"},

		// Users.
		{"unknown role", head + "users:\n  bob: {roles: [engineer, admin]} # <-\n", "users.bob.roles[1]", `unknown role "admin" (known: `},
		{"no roles", head + "users:\n  bob: {slack: U1} # <-\n", "users.bob", "has no roles"},
		{"roles not a list", head + "users:\n  bob: {roles: lead} # <-\n", "users.bob.roles", "want a list, got the text \"lead\""},

		// Lineage.
		{"unknown upstream", head + "datasets:\n  events_raw: {table: events_raw, partition: {column: day}}\n  events_daily:\n    table: events_daily\n    partition: {column: day}\n    upstream: [event_raw] # <-\n    job: {query: 'SELECT 1 WHERE :partition'}\n",
			"datasets.events_daily.upstream", `unknown dataset "event_raw" (known: events_raw)`},
		{"upstream itself", head + "datasets:\n  a:\n    table: a\n    partition: {column: day}\n    upstream: [a] # <-\n", "datasets.a.upstream", "lists itself"},
		{"upstream twice", head + "datasets:\n  a: {table: a, partition: {column: day}}\n  b:\n    table: b\n    partition: {column: day}\n    upstream:\n      - a\n      - a # <-\n", "datasets.b.upstream", "listed twice"},
		{"cycle", head + "datasets:\n  c: {table: c, partition: {column: d}, upstream: [b], job: {query: ':partition'}}\n  a: {table: a, partition: {column: d}, upstream: [c], job: {query: ':partition'}} # <-\n  b: {table: b, partition: {column: d}, upstream: [a], job: {query: ':partition'}}\n",
			"datasets.a.upstream", "cycle: a -> b -> c -> a"},
		{"table twice", head + "datasets:\n  a: {table: events, partition: {column: d}}\n  b: {table: Events, partition: {column: d}} # <-\n", "datasets.b.table", `table "Events" is also the table of dataset a (line 4)`},
		{"quoted table twice", head + "datasets:\n  a: {table: 'analytics.\"Events\"', partition: {column: d}}\n  b: {table: analytics.events, partition: {column: d}} # <-\n", "datasets.b.table", `table "analytics.events" is also the table of dataset a (line 4)`},

		// Names that reach SQL.
		{"dataset name", head + "datasets:\n  'events; DROP TABLE x': # <-\n    table: events\n    partition: {column: day}\n", `datasets."events; DROP TABLE x"`, "must be a plain identifier"},
		{"table name", head + "datasets:\n  events:\n    table: 'events; DROP TABLE x' # <-\n    partition: {column: day}\n", "datasets.events.table", `table "events; DROP TABLE x" is not a plain name`},
		{"table three parts", head + "datasets:\n  events:\n    table: db.s.events # <-\n    partition: {column: day}\n", "datasets.events.table", "has 3 parts; write name or schema.name"},
		{"partition column", head + "datasets:\n  events:\n    table: events\n    partition: {column: 'day)--'} # <-\n", "datasets.events.partition.column", `column "day)--" is not a plain name`},
		{"table quote unbalanced", head + "datasets:\n  events:\n    table: 'analytics.\"Events' # <-\n    partition: {column: day}\n", "datasets.events.table", `table 'analytics."Events' has a part "Events that has an unbalanced double quote`},
		{"table quote around a dot", head + "datasets:\n  events:\n    table: '\"analytics.Events\"' # <-\n    partition: {column: day}\n", "datasets.events.table", `has a part "analytics that has an unbalanced double quote`},
		{"table quote inside a part", head + "datasets:\n  events:\n    table: 'analytics.Ev\"ents\"' # <-\n    partition: {column: day}\n", "datasets.events.table", "quotes go around a whole name"},
		{"table doubled quote", head + "datasets:\n  events:\n    table: '\"Ev\"\"ents\"' # <-\n    partition: {column: day}\n", "datasets.events.table", "double quote inside a quoted name"},
		{"table empty part", head + "datasets:\n  events:\n    table: analytics. # <-\n    partition: {column: day}\n", "datasets.events.table", `table "analytics." has an empty part`},
		{"table empty schema", head + "datasets:\n  events:\n    table: '.events' # <-\n    partition: {column: day}\n", "datasets.events.table", "has an empty part"},
		{"table empty quoted part", head + "datasets:\n  events:\n    table: 'analytics.\"\"' # <-\n    partition: {column: day}\n", "datasets.events.table", `has a part "" that is an empty quoted name`},
		{"table quoted part too long", head + "datasets:\n  events:\n    table: '\"" + strings.Repeat("E", 64) + "\"' # <-\n    partition: {column: day}\n", "datasets.events.table", "64 bytes long, more than PostgreSQL's 63"},
		{"column quote unbalanced", head + "datasets:\n  events:\n    table: events\n    partition: {column: '\"EventDate'} # <-\n", "datasets.events.partition.column", `column '"EventDate' has an unbalanced double quote`},
		{"column empty quotes", head + "datasets:\n  events:\n    table: events\n    partition: {column: '\"\"'} # <-\n", "datasets.events.partition.column", `column '""' is an empty quoted name`},
		{"column quoted dot", head + "datasets:\n  events:\n    table: events\n    partition: {column: '\"a\".\"b\"'} # <-\n", "datasets.events.partition.column", "must be one name, not qualified with a dot"},
		{"check column quote", head + "datasets:\n  e:\n    table: e\n    partition: {column: day}\n    checks:\n      not_null:\n        columns: [a, 'b\"'] # <-\n", "datasets.e.checks.not_null.columns[1]", `column 'b"' has a double quote inside it`},
		{"partition column missing", head + "datasets:\n  events: # <-\n    table: events\n", "datasets.events.partition.column", "required"},
		{"grain", head + "datasets:\n  events:\n    table: events\n    partition: {column: day, grain: week} # <-\n", "datasets.events.partition.grain", `unknown grain "week"`},
		{"not_null column", head + "datasets:\n  e:\n    table: e\n    partition: {column: day}\n    checks:\n      not_null:\n        columns: [a, 'b c'] # <-\n", "datasets.e.checks.not_null.columns[1]", `column "b c"`},
		{"time_order column", head + "datasets:\n  e:\n    table: e\n    partition: {column: day}\n    checks:\n      time_order:\n        - {earlier: a, later: 1b} # <-\n", "datasets.e.checks.time_order[0].later", `column "1b"`},
		{"no_future column", head + "datasets:\n  e:\n    table: e\n    partition: {column: day}\n    checks:\n      no_future:\n        - 'x.y' # <-\n", "datasets.e.checks.no_future[0]", `column "x.y"`},

		// Jobs.
		{"no job kind", head + "datasets:\n  e:\n    table: e\n    partition: {column: day}\n    job: {timeout: 1h} # <-\n", "datasets.e.job", "names no kind"},
		{"two job kinds", head + "datasets:\n  e:\n    table: e\n    partition: {column: day}\n    job: # <-\n      query: 'SELECT :partition'\n      command: [./x]\n", "datasets.e.job", "has both query and command"},
		{"source without table", head + "datasets:\n  e: # <-\n    partition: {column: day}\n", "datasets.e.table", "required for a source"},
		{"query without table", head + "datasets:\n  e: # <-\n    partition: {column: day}\n    job: {query: 'SELECT :partition'}\n", "datasets.e.table", "required for a query job"},
		{"sql without table", head + "datasets:\n  e: # <-\n    partition: {column: day}\n    job: {sql: 'DELETE FROM x WHERE d = :partition'}\n", "datasets.e.table", "required for a sql job"},
		{"query without partition", head + "datasets:\n  e:\n    table: e\n    partition: {column: day}\n    job:\n      query: 'SELECT * FROM raw WHERE day = :partitions' # <-\n", "datasets.e.job.query", "does not use :partition"},
		{"sql without partition", head + "datasets:\n  e:\n    table: e\n    partition: {column: day}\n    job:\n      sql: # <-\n        INSERT INTO e SELECT * FROM raw\n", "datasets.e.job.sql", "does not use :partition"},
		{"query empty", head + "datasets:\n  e:\n    table: e\n    partition: {column: day}\n    job: {query: ''} # <-\n", "datasets.e.job.query", "is empty"},
		{"command empty", head + "datasets:\n  e:\n    job: {command: []} # <-\n", "datasets.e.job.command", "non-empty argv"},
		{"command not a list", head + "datasets:\n  e:\n    job: {command: ./export.sh} # <-\n", "datasets.e.job.command", "want a list"},
		{"env on query", head + "datasets:\n  e:\n    table: e\n    partition: {column: day}\n    job:\n      query: 'SELECT :partition'\n      env: {A: b} # <-\n", "datasets.e.job.env", "only to command jobs"},
		{"env bad entry", head + "datasets:\n  e:\n    job:\n      command: [./x]\n      env: [A=1, 1B] # <-\n", "datasets.e.job.env[1]", "want NAME (passed through from refill's environment) or NAME=value"},
		{"timeout", head + "datasets:\n  e:\n    job:\n      command: [./x]\n      timeout: 10 # <-\n", "datasets.e.job.timeout", `"10" is not a duration`},
		{"timeout negative", head + "datasets:\n  e:\n    job:\n      command: [./x]\n      timeout: -1m # <-\n", "datasets.e.job.timeout", "must not be negative"},
		{"airflow url missing", head + "datasets:\n  e:\n    job:\n      airflow: {dag_id: d} # <-\n", "datasets.e.job.airflow.url", "required"},
		{"airflow url scheme", head + "datasets:\n  e:\n    job:\n      airflow:\n        url: airflow.example.com # <-\n        dag_id: d\n", "datasets.e.job.airflow.url", "http:// or https://"},
		{"airflow dag missing", head + "datasets:\n  e:\n    job:\n      airflow: {url: 'http://af'} # <-\n", "datasets.e.job.airflow.dag_id", "required"},
		{"airflow api", head + "datasets:\n  e:\n    job:\n      airflow:\n        url: http://af\n        dag_id: d\n        api: v3 # <-\n", "datasets.e.job.airflow.api", `unknown Airflow API "v3"`},
		{"airflow half credentials", head + "datasets:\n  e:\n    job:\n      airflow: # <-\n        url: http://af\n        dag_id: d\n        username_env: AF_USER\n", "datasets.e.job.airflow", "both username_env and password_env"},

		// Checks and schedules.
		{"checks without table", head + "datasets:\n  e:\n    job: {command: [./x]}\n    checks: {no_future: [t]} # <-\n", "datasets.e.checks", "need a table"},
		{"not_null ratio", head + "datasets:\n  e:\n    table: e\n    partition: {column: day}\n    checks:\n      not_null: {columns: [a], max_ratio: 1.5} # <-\n", "datasets.e.checks.not_null.max_ratio", "between 0 and 1, got 1.5"},
		{"not_null no columns", head + "datasets:\n  e:\n    table: e\n    partition: {column: day}\n    checks:\n      not_null: {max_ratio: 0.1} # <-\n", "datasets.e.checks.not_null.columns", "required"},
		{"checks ratio", head + "datasets:\n  e:\n    table: e\n    partition: {column: day}\n    checks:\n      max_ratio: -0.1 # <-\n", "datasets.e.checks.max_ratio", "between 0 and 1"},
		{"lookback zero", head + "datasets:\n  e:\n    table: e\n    partition: {column: day}\n    checks:\n      volume:\n        lookback: 0 # <-\n", "datasets.e.checks.volume.lookback", "at least 1"},
		{"max_z zero", head + "datasets:\n  e:\n    table: e\n    partition: {column: day}\n    checks:\n      volume: {max_z: 0} # <-\n", "datasets.e.checks.volume.max_z", "more than 0"},
		{"min_change zero", head + "datasets:\n  e:\n    table: e\n    partition: {column: day}\n    checks:\n      volume: {min_change: 0} # <-\n", "datasets.e.checks.volume.min_change", "above 0"},
		{"calendar not a day", head + "datasets:\n  e:\n    table: e\n    partition: {column: day}\n    checks:\n      volume: {calendar: [12-25, 02-30]} # <-\n", "datasets.e.checks.volume.calendar[1]", `"02-30" is not a calendar day`},
		{"calendar an hour", head + "datasets:\n  e:\n    table: e\n    partition: {column: day}\n    checks:\n      volume: {calendar: [2026-12-25T10]} # <-\n", "datasets.e.checks.volume.calendar[0]", "want YYYY-MM-DD"},
		{"unknown timezone", head + "datasets:\n  e:\n    table: e\n    partition: {column: day, timezone: Mars/Olympus} # <-\n", "datasets.e.partition.timezone", `unknown timezone "Mars/Olympus"`},
		{"Local timezone", head + "datasets:\n  e:\n    table: e\n    partition: {column: day, timezone: Local} # <-\n", "datasets.e.partition.timezone", "IANA name"},
		{"max_z nan", head + "datasets:\n  e:\n    table: e\n    partition: {column: day}\n    checks:\n      volume: {max_z: .nan} # <-\n", "datasets.e.checks.volume.max_z", "finite number"},
		{"lookback text", head + "datasets:\n  e:\n    table: e\n    partition: {column: day}\n    checks:\n      volume:\n        lookback: four weeks # <-\n", "datasets.e.checks.volume.lookback", `want a whole number, got the text "four weeks"`},
		{"lookback fraction", head + "datasets:\n  e:\n    table: e\n    partition: {column: day}\n    checks:\n      volume:\n        lookback: 1.5 # <-\n", "datasets.e.checks.volume.lookback", "want a whole number, got the number 1.5"},
		{"lookback overflow", head + "datasets:\n  e:\n    table: e\n    partition: {column: day}\n    checks:\n      volume:\n        lookback: 18446744073709551615 # <-\n", "datasets.e.checks.volume.lookback", "the number 18446744073709551615 is too large"},
		{"lag", head + "datasets:\n  e:\n    table: e\n    partition: {column: day}\n    schedule: {lag: 2 hours} # <-\n", "datasets.e.schedule.lag", "not a duration"},
		{"every", head + "datasets:\n  e:\n    table: e\n    partition: {column: day}\n    schedule:\n      every: daily # <-\n", "datasets.e.schedule.every", `unknown grain "daily"`},
		{"horizon", head + "datasets:\n  e:\n    table: e\n    partition: {column: day}\n    schedule: {horizon: 0} # <-\n", "datasets.e.schedule.horizon", "from 1 to 366 days, got 0"},
		{"one table named with its schema", head + "datasets:\n  a:\n    table: events\n    partition: {column: day}\n  b:\n    table: main.events # <-\n    partition: {column: day}\n", "datasets.b.table", "also the table of dataset a"},
		{"horizon too far", head + "datasets:\n  e:\n    table: e\n    partition: {column: day}\n    schedule: {horizon: 100000000} # <-\n", "datasets.e.schedule.horizon", "from 1 to 366 days"},
		{"every against the grain", head + "datasets:\n  e:\n    table: e\n    partition: {column: hour, grain: hour}\n    schedule: {every: day} # <-\n", "datasets.e.schedule.every", "partitions are by hour"},
		{"partition not a mapping", head + "datasets:\n  e:\n    table: e\n    partition: day # <-\n", "datasets.e.partition", "want a mapping"},
		{"datasets a list", head + "datasets:\n  - e # <-\n", "datasets", "want a mapping, got a list"},

		// Unknown keys at several depths.
		{"unknown top key", head + "warehous: sqlite:x # <-\n", "warehous", `unknown field "warehous" (known: warehouse,`},
		{"unknown dataset key", head + "datasets:\n  e:\n    tabel: e # <-\n", "datasets.e.tabel", `unknown field "tabel" (known: table,`},
		{"unknown partition key", head + "datasets:\n  e:\n    table: e\n    partition: {column: day, grian: day} # <-\n", "datasets.e.partition.grian", `unknown field "grian" (known: grain,`},
		{"unknown volume key", head + "datasets:\n  e:\n    table: e\n    partition: {column: day}\n    checks:\n      volume:\n        lookbak: 3 # <-\n", "datasets.e.checks.volume.lookbak", `unknown field "lookbak"`},
		{"unknown airflow key", head + "datasets:\n  e:\n    job:\n      airflow:\n        url: http://af\n        dagid: d # <-\n", "datasets.e.job.airflow.dagid", `unknown field "dagid" (known: dag_id,`},
		{"unknown rule key", head + "policy:\n  rules:\n    - name: r\n      when: 'true'\n      tiers: manual # <-\n", "policy.rules[0].tiers", `unknown field "tiers" (known: tier,`},
		{"unknown user key", head + "users:\n  bob:\n    role: [lead] # <-\n", "users.bob.role", `unknown field "role" (known: roles,`},
		{"unknown slack key", head + "notify:\n  slack: {webhook: X} # <-\n", "notify.slack.webhook", `unknown field "webhook"`},
		{"slack team_id a name", head + "notify:\n  slack:\n    signing_secret_env: S\n    team_id: acme-data # <-\n", "notify.slack.team_id", `"acme-data" is not a Slack team ID: want T and capital letters or digits`},
		{"slack team_id in lower case", head + "notify:\n  slack: {team_id: t0123abcd} # <-\n", "notify.slack.team_id", "is not a Slack team ID"},
		{"slack team_id a user", head + "notify:\n  slack: {team_id: U0123ABCD} # <-\n", "notify.slack.team_id", "is not a Slack team ID"},
		{"unknown datasets_from key", head + "datasets_from: {dbt: x} # <-\n", "datasets_from.dbt", `unknown field "dbt" (known: env, command, dbt_manifest, project_dir, proof_target)`},

		// Malformed YAML.
		{"unclosed flow", head + "datasets:\n  e:\n    upstream: [a, b # <-\n", "datasets.e.upstream", "not found"},
		{"unclosed quote", head + "datasets:\n  e:\n    table: 'e # <-\n", "datasets.e.table", "single-quoted"},
		{"duplicate key", head + "datasets:\n  e:\n    table: a\n    table: b # <-\n", "datasets.e.table", `mapping key "table" already defined at line 5`},
		{"bad indentation", head + "datasets:\n  e:\n    table: a\n   partition: {column: d} # <-\n", "", ""},
		{"tab indentation", head + "datasets:\n\te: # <-\n", "datasets", `found character '\t' that cannot start any token`},
		{"second document", head + "---\nversion: 1 # <-\n", "", "second YAML document"},
		{"not a mapping", "- version: 1 # <-\n", "", "want a mapping, got a list"},
		{"merge after keys", head + "datasets:\n  a: &a {table: a, partition: {column: d}}\n  b:\n    table: b\n    <<: *a # <-\n", "datasets.b", "put the merge key << before the other keys"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc), "refill.yaml")
			requireBadInput(t, err, markedLine(t, tt.doc), tt.key, tt.msg)
		})
	}
}

// TestSlackTeamID: a workspace's ID is kept for the interactions
// endpoint, which refuses presses from any other.
func TestSlackTeamID(t *testing.T) {
	cfg, err := Parse([]byte(head+"notify:\n  slack: {signing_secret_env: S, team_id: T0123ABCD}\n"), "refill.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Notify.Slack == nil || cfg.Notify.Slack.TeamID != "T0123ABCD" {
		t.Errorf("notify.slack: %+v, want team_id T0123ABCD", cfg.Notify.Slack)
	}
}

// TestValidNames is the other side of the identifier rules: ordinary names,
// schema-qualified tables and tableless command and airflow jobs pass.
func TestValidNames(t *testing.T) {
	docs := map[string]string{
		"schema.table":   "datasets:\n  e: {table: analytics.events_2, partition: {column: _day}}\n",
		"capitals":       "datasets:\n  e: {table: Analytics.EVENTS, partition: {column: Day}, checks: {not_null: {columns: [UserId]}}}\n",
		"quoted":         "datasets:\n  e: {table: 'analytics.\"Events\"', partition: {column: '\"EventDate\"'}, checks: {not_null: {columns: ['\"User Id\"']}, time_order: [{earlier: '\"At\"', later: b}], no_future: ['\"At\"']}}\n",
		"quoted schema":  "datasets:\n  e: {table: '\"Analytics\".events', partition: {column: d}}\n",
		"quoted unicode": "datasets:\n  e: {table: '\"Événements 2026\"', partition: {column: '\"jour-date\"'}}\n",
		"command":        "datasets:\n  e: {job: {command: [./x, '{{partition}}']}}\n",
		"airflow v2":     "datasets:\n  e: {job: {airflow: {url: 'https://af/x', dag_id: d, api: v2, username_env: U, password_env: P}}}\n",
		"sql cast":       "datasets:\n  e: {table: e, partition: {column: d}, job: {sql: 'DELETE FROM e WHERE d = (:partition)::date'}}\n",
		"postgres":       "state: postgres://refill@localhost/refill?sslmode=disable\n",
		"unknown tags":   "datasets:\n  e: {table: e, partition: {column: d}, tags: [whatever]}\npolicy: {manual_tags: [nobody-uses-this]}\n",
	}
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse([]byte(head+doc), "refill.yaml"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestOneTableAsTheWarehouseReadsIt: two datasets may not write one table,
// and whether two names are one table is the warehouse's own rule. On
// PostgreSQL a plain name folds to lower case and a quoted one keeps its
// case, so '"Events"' and events are two tables there; SQLite ignores case
// in names, quoted or not, so there they are one.
func TestOneTableAsTheWarehouseReadsIt(t *testing.T) {
	const (
		pg     = "postgres://refill@localhost/wh?sslmode=disable"
		sqlite = "sqlite:w.db"
	)
	tests := []struct {
		warehouse, a, b string
		one             bool
	}{
		{pg, `'"Events"'`, "events", false},
		{pg, `'"Events"'`, "Events", false},
		{pg, `'analytics."Events"'`, "analytics.events", false},
		{pg, `'"Analytics".events'`, "analytics.events", false},
		{pg, "Events", "events", true},
		{pg, `'"events"'`, "EVENTS", true},
		{pg, `'"Events"'`, `'public."Events"'`, true},
		{pg, "public.events", "Events", true},
		{pg, "Analytics.Events", `'"analytics"."events"'`, true},
		{pg, `'"Public".events'`, "events", false},
		{sqlite, `'"Events"'`, "events", true},
		{sqlite, "Events", "events", true},
		{sqlite, `'analytics."Events"'`, "analytics.events", true},
		{sqlite, "MAIN.events", `'"Events"'`, true},
		{sqlite, `'"Événements"'`, `'"éVénements"'`, false},
	}
	for _, tt := range tests {
		engine, _, _ := strings.Cut(tt.warehouse, ":")
		t.Run(engine+" "+tt.a+" "+tt.b, func(t *testing.T) {
			doc := "version: 1\nwarehouse: " + tt.warehouse + "\ndatasets:\n  a: {table: " + tt.a + ", partition: {column: d}}\n  b: {table: " + tt.b + ", partition: {column: d}} # <-\n"
			_, err := Parse([]byte(doc), "refill.yaml")
			if !tt.one {
				if err != nil {
					t.Fatalf("%s and %s are two tables, yet: %v", tt.a, tt.b, err)
				}
				return
			}
			requireBadInput(t, err, markedLine(t, doc), "datasets.b.table", "is also the table of dataset a (line 4)")
		})
	}
}

func TestMultipleErrors(t *testing.T) {
	doc := head + `
policy:
  auto_max_days: -1
datasets:
  b:
    table: b
    partition: {column: d}
    upstream: [nope]
  a:
    table: 'a b'
    partition: {column: d}
`
	_, err := Parse([]byte(doc), "refill.yaml")
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("err = %T %v, want Errors", err, err)
	}
	want := []string{
		`refill.yaml:5: policy.auto_max_days: must be 0 or more, got -1`,
		`refill.yaml:10: datasets.b.upstream: unknown dataset "nope" (known: a)`,
		`refill.yaml:12: datasets.a.table: table "a b" is not a plain name (ASCII letters, digits and _, not starting with a digit); put a name with other characters in double quotes, as in '"Order Items"'`,
	}
	if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, e := range es {
		if !errors.Is(e, refill.ErrBadInput) {
			t.Errorf("%v does not wrap ErrBadInput", e)
		}
	}
}

// TestUnknownKeysTogether checks that every unknown key is reported at once,
// which goccy's strict mode alone would not do.
func TestUnknownKeysTogether(t *testing.T) {
	doc := head + "warehous: x\ndatasets:\n  e:\n    tabel: e\n    partition: {colum: d}\n"
	_, err := Parse([]byte(doc), "refill.yaml")
	requireBadInput(t, err, 3, "warehous", "unknown field")
	requireBadInput(t, err, 6, "datasets.e.tabel", "unknown field")
	requireBadInput(t, err, 7, "datasets.e.partition.colum", "unknown field")
}

func TestErrorsAreOneLine(t *testing.T) {
	_, err := Parse([]byte(head+"datasets:\n  e: [\n"), "refill.yaml")
	var es Errors
	if !errors.As(err, &es) || len(es) != 1 {
		t.Fatalf("err = %v, want one error", err)
	}
	if strings.Contains(es[0].Error(), "\n") || strings.Contains(es[0].Error(), "^") {
		t.Errorf("error spans lines or quotes source: %q", es[0].Error())
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "refill.yaml")
	_, err := Load(path)
	if !errors.Is(err, refill.ErrBadInput) || !strings.HasPrefix(err.Error(), path+": ") {
		t.Errorf("Load(missing) = %v", err)
	}
	if err := os.WriteFile(path, []byte(head), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.File != path || cfg.Dir != filepath.Dir(path) {
		t.Errorf("File, Dir = %q, %q", cfg.File, cfg.Dir)
	}
}

func TestParseWithoutFileName(t *testing.T) {
	cfg, err := Parse([]byte(head), "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.File != "" || cfg.Dir != "" {
		t.Errorf("File, Dir = %q, %q, want both empty", cfg.File, cfg.Dir)
	}
}

// TestNamesKeptAsWritten checks that table and column names reach the
// drivers as refill.yaml writes them, quotes included: folding is the
// dialect's business (sqltext.Dialect.QuoteName), not the loader's.
func TestNamesKeptAsWritten(t *testing.T) {
	doc := head + `datasets:
  e:
    table: 'analytics."Events"'
    partition: {column: '"EventDate"', grain: hour}
    checks:
      not_null: {columns: [UserId, '"Amount"']}
      time_order: [{earlier: '"At"', later: Later}]
      no_future: ['"At"']
  f:
    table: Analytics.DAILY
    partition: {column: Day}
`
	cfg, err := Parse([]byte(doc), "refill.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e, f := cfg.Datasets["e"], cfg.Datasets["f"]
	got := []string{e.Table, e.Partition.Column, e.Checks.NotNull.Columns[0], e.Checks.NotNull.Columns[1],
		e.Checks.TimeOrder[0].Earlier, e.Checks.TimeOrder[0].Later, e.Checks.NoFuture[0], f.Table, f.Partition.Column}
	want := []string{`analytics."Events"`, `"EventDate"`, "UserId", `"Amount"`, `"At"`, "Later", `"At"`, "Analytics.DAILY", "Day"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("names = %q, want %q", got, want)
	}
}

// TestDiffKeys: a dataset's key and private columns reach the content
// diff, the key defaulting to the unique check's columns; plan.diff_budget
// is kept as written, 0 included.
func TestDiffKeys(t *testing.T) {
	cfg, err := Parse([]byte(head+`
plan: {diff_budget: 0}
datasets:
  orders:
    table: orders
    partition: {column: day}
    key: [order_id]
    private: [email]
    checks: {unique: [day, order_id]}
  daily:
    table: daily
    partition: {column: day}
    checks: {unique: [day, region]}
  plain:
    table: plain
    partition: {column: day}
`), "refill.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Plan.DiffBudget != 0 {
		t.Errorf("DiffBudget = %d, want 0 as written", cfg.Plan.DiffBudget)
	}
	for name, want := range map[string]refill.DiffSpec{
		"orders": {Key: []string{"order_id"}, Private: []string{"email"}, Sample: refill.DiffSample},
		"daily":  {Key: []string{"day", "region"}, Sample: refill.DiffSample},
		"plain":  {Sample: refill.DiffSample},
	} {
		if got := cfg.Datasets[name].DiffSpec(); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: DiffSpec() = %+v, want %+v", name, got, want)
		}
	}
}
