package dbt

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/refill-dev/refill"
)

// Import is what a manifest yields: its datasets in refill.yaml's shape and
// what the manifest said about itself.
type Import struct {
	// File names the manifest as the caller gave it.
	File string
	// Version is the manifest's schema version (10, 11 or 12).
	Version    int
	DBTVersion string
	Project    string
	Adapter    string
	// Databases are the databases the imported tables live in. A refill
	// table is schema.name (the warehouse connection picks the database),
	// so the database part of dbt's database.schema.alias is left out of
	// every table and recorded here, and in the printed YAML's header.
	Databases []string
	// Datasets are sorted by name.
	Datasets []Dataset
}

// Dataset is one imported node in refill.yaml's shape: the YAML `refill
// import dbt` prints is this struct marshalled, and datasets_from reads
// that same YAML, so the two cannot disagree.
type Dataset struct {
	Name string `yaml:"-"`
	// Node is the manifest's unique_id, as in model.jaffle_shop.orders;
	// Kind is its resource type: model, seed, snapshot or source.
	Node string `yaml:"-"`
	Kind string `yaml:"-"`
	// Note is said in the comment above the dataset in printed YAML.
	Note string `yaml:"-"`

	Table     string     `yaml:"table,omitempty"`
	Partition *Partition `yaml:"partition,omitempty,flow"`
	Upstream  []string   `yaml:"upstream,omitempty,flow"`
	Tags      []string   `yaml:"tags,omitempty,flow"`
	// Checks is meta.refill.checks as the manifest has it (JSON objects,
	// lists, text and numbers); the config loader checks its shape and
	// meaning as it checks refill.yaml's.
	Checks any `yaml:"checks,omitempty"`
	// LineageOnly says why the dataset is lineage only; empty for one
	// that is rebuilt (a job) or gated (a source).
	LineageOnly string `yaml:"lineage_only,omitempty"`
	Job         *Job   `yaml:"job,omitempty"`
}

// Partition is refill.yaml's partition: {column, grain}.
type Partition struct {
	Column string `yaml:"column,omitempty"`
	Grain  string `yaml:"grain,omitempty"`
}

// Job is the command job that rebuilds one partition of a model with dbt.
type Job struct {
	Command []string `yaml:"command,flow"`
	// DbtProject is the dbt project the model runs from, relative to
	// refill.yaml: its models, macros and packages are sealed with the job
	// (ProjectFiles).
	DbtProject string   `yaml:"dbt_project,omitempty"`
	Env        []string `yaml:"env,omitempty,flow"`
	// Checksum is the model's checksum in the manifest, part of the job's
	// fingerprint (refill.Job.Checksum).
	Checksum string `yaml:"checksum,omitempty"`
	// SideEffects is meta.refill.side_effects: a model that writes
	// outside the warehouse is never proven by rerunning, never auto.
	SideEffects bool `yaml:"side_effects,omitempty"`
	// ProofCommand is Command with --target PROOF_TARGET, when
	// datasets_from names one: what a proof runs, in the proof warehouse.
	ProofCommand []string `yaml:"proof_command,omitempty,flow"`
}

// Why a dataset is lineage only. They are fixed sentences, one per cause,
// so that a summary can count datasets by cause.
const (
	WhyView        = refill.WhyView
	WhyEphemeral   = refill.WhyEphemeral
	WhyNoPartition = "no partition column: set meta.refill.partition (or config.event_time, or config.partition_by)"
	WhyGrain       = "partitioned by month or year: refill rebuilds day or hour partitions"
	WhyRange       = "partitioned by an integer range, not by time"
	WhyColumns     = "partitioned by several columns: refill rebuilds by one date or time column"
	WhyShared      = "its table is another imported dataset's, and refill names each table once"
	WhyName        = "its table cannot be named in refill.yaml (schema.name, each part at most 63 bytes, with no dot or double quote)"
	WhySelector    = "its name cannot be selected safely: dbt would read it as a selector of more than this model (graph operators, wildcards, spaces, a flag)"
)

// Placeholders of the command template. {{select}} and {{project_dir}} are
// filled at import; {{partition}}, {{from}}, {{to}}, {{start}} and {{end}}
// are left for the command job to fill at run time (jobs/command).
var placeholders = []string{"select", "project_dir", "partition", "from", "to", "start", "end"}

// DefaultCommand builds the one model it names for one partition, telling
// the model the partition in dbt vars. A project_dir adds --project-dir.
var DefaultCommand = []string{"dbt", "build", "--select", "{{select}}", "--vars",
	`{"refill_from": "{{from}}", "refill_to": "{{to}}", "refill_partition": "{{partition}}"}`}

// DefaultEnv is passed through from refill's environment to every dbt job,
// besides PATH, HOME and REFILL_* (command.Environment): where dbt finds its
// profiles and project, and which target it builds. Options.Env adds to it
// the variables the profile reads (a password, say).
var DefaultEnv = []string{"DBT_PROFILES_DIR", "DBT_PROJECT_DIR", "DBT_TARGET"}

// Options shape the jobs of an import: datasets_from's command, env and
// project_dir keys.
type Options struct {
	// Command is the argv template; nil means DefaultCommand.
	Command []string
	// Env is added to DefaultEnv: NAME (passed through) or NAME=value.
	Env []string
	// ProjectDir is the dbt project's directory, relative to refill.yaml.
	ProjectDir string
	// Name names the manifest in messages and in Import.File; Load's
	// path when empty.
	Name string
	// ProofTarget is the dbt target (profiles.yml) that writes to refill's
	// proof_warehouse: with it, a proof runs each model's command with
	// --target ProofTarget, and the model can be proven, and auto.
	ProofTarget string
	// Version is what dbt --version printed (ReadVersion), "" when dbt
	// could not be asked: it decides how a model with config.event_time
	// is run (EventTimeCommand from dbt 1.9 on), else the manifest's
	// metadata.dbt_version does.
	Version string
	// AskVersion, when set and Version is "", is called once, only if a
	// model has config.event_time, for what dbt --version prints.
	AskVersion func() string
}

var (
	envEntry    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(=.*)?$`)
	placeholder = regexp.MustCompile(`\{\{[^{}]*\}\}`)
)

// CheckCommand checks a command template: a program, {{select}} somewhere
// (else every model would run one command), and no placeholder refill does
// not fill, which would reach dbt as literal braces.
func CheckCommand(argv []string) error {
	if len(argv) == 0 || argv[0] == "" {
		return refill.BadInputf(`want a non-empty argv list, as in ["dbt", "build", "--select", "{{select}}"]`)
	}
	hasSelect := false
	for _, a := range argv {
		for _, p := range placeholder.FindAllString(a, -1) {
			name := strings.TrimSpace(p[2 : len(p)-2])
			if !slices.Contains(placeholders, name) || p != "{{"+name+"}}" {
				return refill.BadInputf("unknown placeholder %s (known: {{%s}})", clip(p), strings.Join(placeholders, "}}, {{"))
			}
			hasSelect = hasSelect || name == "select"
		}
	}
	if !hasSelect {
		return refill.BadInputf("the command never says which model to build: put {{select}} in it, as in --select {{select}}")
	}
	return nil
}

// check reports the first problem of o; the config loader reports each at
// its key before it gets here.
func (o Options) check() error {
	if o.Command != nil {
		if err := CheckCommand(o.Command); err != nil {
			return fmt.Errorf("command: %w", err)
		}
		if o.ProjectDir != "" && !slices.ContainsFunc(o.Command, func(a string) bool { return strings.Contains(a, "{{project_dir}}") }) {
			return refill.BadInputf("project_dir is given but the command does not use it: put {{project_dir}} in the command (as in --project-dir {{project_dir}}), or drop project_dir")
		}
	}
	for _, e := range o.Env {
		if !envEntry.MatchString(e) {
			return refill.BadInputf("env: %q: want NAME (passed through from refill's environment) or NAME=value", clip(e))
		}
	}
	return nil
}

// command is the template with {{project_dir}} in place; {{select}} is
// filled per model.
func (o Options) command() []string {
	argv := o.Command
	if argv == nil {
		argv = slices.Clone(DefaultCommand)
		if o.ProjectDir != "" {
			argv = append(argv, "--project-dir", "{{project_dir}}")
		}
	}
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = strings.ReplaceAll(a, "{{project_dir}}", o.ProjectDir)
	}
	return out
}

// withProjectDir is argv with --project-dir when the project has one.
func (o Options) withProjectDir(argv []string) []string {
	argv = slices.Clone(argv)
	if o.ProjectDir != "" {
		argv = append(argv, "--project-dir", o.ProjectDir)
	}
	return argv
}

// eventTime reports whether models with config.event_time run with
// --event-time-start/end (dbt 1.9 on), by dbt --version or else the
// manifest's dbt_version, and says which and why.
func (o Options) eventTime(manifestVersion string) (bool, string) {
	if major, minor, text, ok := ParseVersion(o.Version); ok {
		if atLeast(major, minor, EventTimeVersion) {
			return true, fmt.Sprintf("dbt %s (dbt --version): dbt run --event-time-start/--event-time-end, one run per partition", text)
		}
		return false, fmt.Sprintf("dbt %s (dbt --version) is older than 1.9: the partition goes in --vars", text)
	}
	if major, minor, ok := manifestVersionOf(manifestVersion); ok {
		if atLeast(major, minor, EventTimeVersion) {
			return true, fmt.Sprintf("dbt %s (the manifest's; dbt --version could not be read): dbt run --event-time-start/--event-time-end, one run per partition", manifestVersion)
		}
		return false, fmt.Sprintf("dbt %s (the manifest's) is older than 1.9: the partition goes in --vars", manifestVersion)
	}
	return false, "dbt's version is unknown: the partition goes in --vars"
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func (o Options) env() []string {
	env := slices.Clone(DefaultEnv)
	for _, e := range o.Env {
		name, _, _ := strings.Cut(e, "=")
		env = slices.DeleteFunc(env, func(d string) bool { return d == name })
		env = append(env, e)
	}
	return env
}

// refillMeta is meta.refill: the keys refill.yaml would give the dataset.
type refillMeta struct {
	Tags []string `json:"tags"`
	// SideEffects says the model writes outside the warehouse (a
	// post-hook that exports): never proven by rerunning, never auto.
	SideEffects bool `json:"side_effects"`
	Partition   *struct {
		Column string `json:"column"`
		Grain  string `json:"grain"`
	} `json:"partition"`
	Checks json.RawMessage `json:"checks"`
}

// build maps the manifest's models, seeds, snapshots and sources to
// datasets. Errors name the manifest and the node.
func build(m *manifest, file string, opts Options) (*Import, error) {
	imp := &Import{File: file, Version: m.Version, DBTVersion: m.Metadata.DBTVersion,
		Project: m.Metadata.ProjectName, Adapter: m.Metadata.AdapterType}
	all := append(slices.Clone(m.Nodes), m.Sources...)
	byID := make(map[string]*node, len(all))
	for _, n := range all {
		if _, dup := byID[n.ID]; dup {
			return nil, refill.BadInputf("dbt manifest %s: %s is both a node and a source", file, clip(n.ID))
		}
		byID[n.ID] = n
	}
	names := datasetNames(all)
	tested := checksFromTests(m.Tests)
	selectors := selectorsOf(m.Nodes)
	command, env := opts.command(), opts.env()
	if opts.Version == "" && opts.AskVersion != nil && slices.ContainsFunc(m.Nodes, func(n *node) bool { return n.Config.EventTime != nil }) {
		opts.Version = opts.AskVersion()
	}
	eventTime, runNote := opts.eventTime(m.Metadata.DBTVersion)
	eventTimeCommand := opts.withProjectDir(EventTimeCommand)
	databases := map[string]bool{}
	for _, n := range all {
		where := fmt.Sprintf("dbt manifest %s: %s", file, clip(n.ID))
		rm, err := parseRefillMeta(n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		d := Dataset{Name: names[n.ID], Node: n.ID, Kind: n.ResourceType}
		if d.Tags, err = tagsOf(n, rm); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if len(rm.Checks) > 0 && string(rm.Checks) != "null" {
			if d.Checks, err = plainJSON(rm.Checks); err != nil {
				return nil, fmt.Errorf("%s: meta.refill.checks: %w", where, err)
			}
		}
		for _, up := range n.DependsOn.Nodes {
			if _, ok := byID[up]; ok && up != n.ID && !slices.Contains(d.Upstream, names[up]) {
				d.Upstream = append(d.Upstream, names[up])
			}
		}
		slices.Sort(d.Upstream)

		table, named := tableOf(n, m.Metadata.Quoting)
		if n.Config.Materialized != "ephemeral" {
			d.Table = table
		}
		col, grain, why, err := partitionOf(n, rm)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if col != "" {
			d.Partition = &Partition{Column: col, Grain: grain}
		}
		switch {
		case n.ResourceType == "model" && n.Config.Materialized == "view":
			why = WhyView
		case n.ResourceType == "model" && n.Config.Materialized == "ephemeral":
			why = WhyEphemeral
		case !named:
			why = WhyName
		case why == "" && col == "":
			why = WhyNoPartition
		}
		if why == "" && n.ResourceType == "model" && !safeSelector.MatchString(selectors[n.ID]) {
			why = WhySelector
		}
		d.LineageOnly = why
		// Tests of a dataset refill checks by partition become its checks;
		// one without partitions has nothing for them to scan.
		if tc := tested[n.ID]; tc != nil && why == "" && d.Partition != nil && (!tc.empty() || len(tc.skipped) > 0) {
			var note string
			d.Checks, note = tc.merge(d.Checks)
			d.Note = joinNote(d.Note, note)
		}
		if d.LineageOnly == "" && n.ResourceType == "model" {
			argv := command
			if n.Config.EventTime != nil && opts.Command == nil && eventTime {
				argv = eventTimeCommand
			}
			d.Job = &Job{Command: fill(argv, selectors[n.ID]), Env: env, Checksum: checksumOf(n), SideEffects: rm.SideEffects}
			if opts.ProofTarget != "" {
				d.Job.ProofCommand = append(slices.Clone(d.Job.Command), "--target", opts.ProofTarget)
			}
			if n.Config.EventTime != nil && opts.Command == nil {
				d.Note = joinNote(d.Note, runNote)
			}
			if d.Job.Checksum == "" {
				// The checksum is how an edit to the model's SQL reaches the
				// job's fingerprint; without it a proof would outlive the edit.
				return nil, fmt.Errorf("%s: %w", where, refill.BadInputf("checksum.checksum is missing: refill ties the proofs of a dbt job to it, so that editing the model makes them stale"))
			}
		}
		if d.Table != "" && n.Database != nil && *n.Database != "" {
			databases[*n.Database] = true
		}
		imp.Datasets = append(imp.Datasets, d)
	}
	shareTables(imp.Datasets)
	slices.SortFunc(imp.Datasets, func(a, b Dataset) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(imp.Datasets); i++ {
		if a, b := imp.Datasets[i-1], imp.Datasets[i]; a.Name == b.Name {
			// datasetNames makes names unique; this guards a hash collision.
			return nil, refill.BadInputf("dbt manifest %s: %s and %s map to one dataset name %s", file, clip(a.Node), clip(b.Node), a.Name)
		}
	}
	for db := range databases {
		imp.Databases = append(imp.Databases, db)
	}
	slices.Sort(imp.Databases)
	return imp, nil
}

// shareTables keeps each table on one dataset. A source may name the
// relation a seed or model writes (dbt's integration-test projects declare
// their sources over their own seeds), and refill.yaml names each table
// once, so the others keep their place in the lineage without a table:
// lineage only (WhyShared), with a note naming the dataset that has it. The
// one that keeps the table is one that is not lineage only, else a model,
// seed or snapshot before a source, else the first by unique_id.
func shareTables(ds []Dataset) {
	rank := func(d *Dataset) int {
		r := 0
		if d.LineageOnly != "" {
			r += 2
		}
		if d.Kind == "source" {
			r++
		}
		return r
	}
	owner := map[string]*Dataset{}
	order := make([]*Dataset, len(ds))
	for i := range ds {
		order[i] = &ds[i]
	}
	slices.SortStableFunc(order, func(a, b *Dataset) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a.Node, b.Node)
	})
	for _, d := range order {
		if d.Table == "" {
			continue
		}
		// SQLite ignores case and PostgreSQL folds plain names, as the
		// config loader's own check of shared tables says.
		key := strings.ToLower(strings.ReplaceAll(d.Table, `"`, ""))
		o, ok := owner[key]
		if !ok {
			owner[key] = d
			continue
		}
		d.Note = fmt.Sprintf("its table %s is %s's (%s)", d.Table, o.Name, o.Node)
		if d.Checks != nil {
			d.Note += "; its meta.refill.checks belong on that node"
		}
		d.Table, d.Partition, d.Job, d.LineageOnly, d.Checks = "", nil, nil, WhyShared, nil
	}
}

// parseRefillMeta reads meta.refill strictly: an unknown key there is a
// typo that would otherwise silently not partition or not check a model.
// config.meta wins over the node's own meta, as it does in dbt.
func parseRefillMeta(n *node) (refillMeta, error) {
	raw := n.Config.Meta.Refill
	if len(raw) == 0 || string(raw) == "null" {
		raw = n.Meta.Refill
	}
	var rm refillMeta
	if len(raw) == 0 || string(raw) == "null" {
		return rm, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rm); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te) && te.Field != "":
			return rm, refill.BadInputf("meta.refill.%s: want %s, got a JSON %s", te.Field, describeGo(te.Type.Kind().String()), te.Value)
		case errors.As(err, &te):
			return rm, refill.BadInputf("meta.refill: want an object with tags, partition, checks and side_effects, got a JSON %s", te.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return rm, refill.BadInputf("meta.refill: unknown key %s (known: tags, partition, checks, side_effects)", strings.TrimPrefix(err.Error(), "json: unknown field "))
		}
		return rm, refill.BadInputf("meta.refill: %v", strings.TrimPrefix(err.Error(), "json: "))
	}
	return rm, nil
}

// tagsOf is the node's tags, its config's and meta.refill's, each once, in
// that order.
func tagsOf(n *node, rm refillMeta) ([]string, error) {
	var out []string
	add := func(tags []string) {
		for _, t := range tags {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	for _, f := range []struct {
		key string
		raw json.RawMessage
	}{{"tags", n.Tags}, {"config.tags", n.Config.Tags}} {
		tags, err := textList(f.raw)
		if err != nil {
			return nil, refill.BadInputf("%s: %v", f.key, err)
		}
		add(tags)
	}
	add(rm.Tags)
	return out, nil
}

// textList reads a list of text, or one text (dbt_project.yml lets tags be
// written either way), or null.
func textList(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []string{one}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, errors.New("want a list of text")
	}
	return list, nil
}

// partitionOf finds the partition column and grain: meta.refill.partition
// first, then dbt's own settings — config.event_time (dbt 1.9's
// microbatch) and config.partition_by.field (BigQuery; a column name or a
// one-column list on Spark) for the column, config.batch_size and
// partition_by.granularity for the grain — else day. why is set when the
// node is partitioned in a way refill cannot rebuild.
func partitionOf(n *node, rm refillMeta) (col, grain, why string, err error) {
	if rm.Partition != nil {
		col, grain = rm.Partition.Column, rm.Partition.Grain
	}
	if col == "" && n.Config.EventTime != nil {
		col = *n.Config.EventTime
	}
	var pb partitionBy
	if col == "" || grain == "" {
		if pb, err = parsePartitionBy(n.Config.PartitionBy); err != nil {
			return "", "", "", err
		}
	}
	if col == "" {
		col, why = pb.field, pb.why
	}
	if grain == "" && n.Config.BatchSize != nil && *n.Config.BatchSize != "" {
		switch g := strings.ToLower(*n.Config.BatchSize); g {
		case "day", "hour":
			grain = g
		case "month", "year":
			why = cmp.Or(why, WhyGrain)
		default:
			return "", "", "", refill.BadInputf("config.batch_size: %q is not a dbt batch size (hour, day, month, year)", clip(*n.Config.BatchSize))
		}
	}
	if grain == "" && pb.granularity != "" {
		switch g := strings.ToLower(pb.granularity); g {
		case "day", "hour":
			grain = g
		case "month", "year":
			why = cmp.Or(why, WhyGrain)
		default:
			return "", "", "", refill.BadInputf("config.partition_by.granularity: %q is not a granularity (hour, day, month, year)", clip(pb.granularity))
		}
	}
	if grain == "" {
		grain = string(refill.GrainDay)
	}
	if why != "" {
		col = ""
	}
	return col, grain, why, nil
}

type partitionBy struct {
	field, granularity, why string
}

// parsePartitionBy reads config.partition_by in the shapes dbt adapters
// give it: BigQuery's {field, data_type, granularity, range}, or Spark's
// column name or list of names.
func parsePartitionBy(raw json.RawMessage) (partitionBy, error) {
	var pb partitionBy
	if len(raw) == 0 || string(raw) == "null" {
		return pb, nil
	}
	switch raw[0] {
	case '{':
		var bq struct {
			Field       *string         `json:"field"`
			DataType    *string         `json:"data_type"`
			Granularity *string         `json:"granularity"`
			Range       json.RawMessage `json:"range"`
		}
		if err := json.Unmarshal(raw, &bq); err != nil {
			return pb, refill.BadInputf("config.partition_by: want {field, data_type, granularity}: %v", strings.TrimPrefix(err.Error(), "json: "))
		}
		if bq.Field != nil {
			pb.field = *bq.Field
		}
		if bq.Granularity != nil {
			pb.granularity = *bq.Granularity
		}
		dt := ""
		if bq.DataType != nil {
			dt = strings.ToLower(*bq.DataType)
		}
		if (len(bq.Range) > 0 && string(bq.Range) != "null") || dt == "int64" || dt == "integer" || dt == "int" {
			pb.why = WhyRange
		}
		return pb, nil
	case '"':
		if err := json.Unmarshal(raw, &pb.field); err != nil {
			return pb, refill.BadInputf("config.partition_by: %v", strings.TrimPrefix(err.Error(), "json: "))
		}
		return pb, nil
	case '[':
		var cols []string
		if err := json.Unmarshal(raw, &cols); err != nil {
			return pb, refill.BadInputf("config.partition_by: want a list of column names")
		}
		switch len(cols) {
		case 0:
		case 1:
			pb.field = cols[0]
		default:
			pb.why = WhyColumns
		}
		return pb, nil
	}
	return pb, refill.BadInputf("config.partition_by: want an object {field, ...}, a column name or a list of them")
}

// tableOf names the node's relation as refill.yaml writes a table:
// schema.alias (a source's schema.identifier). A part that is a plain
// lower-case name is written plain; any other is written in double quotes
// when dbt quotes it (the default), so that it names on PostgreSQL the
// relation dbt created. named is false when a part cannot be written at
// all (it holds a dot or a double quote, or is too long).
func tableOf(n *node, project *quoting) (string, bool) {
	rel, q := n.Alias, n.Config.Quoting
	if n.ResourceType == "source" {
		rel, q = n.Identifier, n.Quoting
		if rel == nil || *rel == "" {
			rel = &n.Name
		}
	}
	if rel == nil || *rel == "" || n.Schema == nil || *n.Schema == "" {
		return "", false
	}
	// The node's quoting wins over the project's; dbt quotes by default.
	quoted := func(part func(*quoting) *bool) bool {
		for _, from := range []*quoting{&q, project} {
			if from != nil && part(from) != nil {
				return *part(from)
			}
		}
		return true
	}
	schema, ok1 := namePart(*n.Schema, quoted(func(q *quoting) *bool { return q.Schema }))
	ident, ok2 := namePart(*rel, quoted(func(q *quoting) *bool { return q.Identifier }))
	if !ok1 || !ok2 {
		return "", false
	}
	return schema + "." + ident, true
}

// namePart writes one part of a table name as sqltext.ParseName reads it.
func namePart(s string, quoted bool) (string, bool) {
	if len(s) > 63 || s == "" || !utf8.ValidString(s) {
		return "", false
	}
	if plain(s) && (!quoted || strings.ToLower(s) == s) {
		return s, true
	}
	if strings.ContainsAny(s, `."`) || strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) {
		return "", false
	}
	return `"` + s + `"`, true
}

// plain is sqltext's plain name: ASCII letters, digits and _, not starting
// with a digit.
func plain(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func checksumOf(n *node) string {
	if n.Checksum.Checksum == "" {
		return ""
	}
	algo := n.Checksum.Name
	if algo == "" {
		algo = "sha256"
	}
	return algo + ":" + n.Checksum.Checksum
}

func fill(argv []string, sel string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = strings.ReplaceAll(a, "{{select}}", sel)
	}
	return out
}

// safeSelector is a --select argument that names one node: dotted words,
// never dbt's graph or set operators (+ @ * , space), methods (:) or a
// flag (a leading -).
var safeSelector = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*$`)

// maxName is the longest dataset name refill accepts (config's limit,
// PostgreSQL's identifier length).
const maxName = 63

// datasetNames gives every imported node a dataset name that is a plain
// identifier, readable and unique, and the same on every import of the
// same manifest: a model, seed or snapshot is called by its name (a
// versioned model name_v2), a source source_name__table. Names that two
// nodes would share are qualified with the node's package
// (package__name); any still shared, or too long, end in a hash of the
// unique_id.
func datasetNames(nodes []*node) map[string]string {
	base := make(map[string]string, len(nodes))
	for _, n := range nodes {
		name := n.Name
		if n.ResourceType == "source" {
			name = n.SourceName + "__" + n.Name
		} else if v := versionOf(n); v != "" {
			name += "_v" + v
		}
		base[n.ID] = identifier(name, n.ID)
	}
	byID := make(map[string]*node, len(nodes))
	for _, n := range nodes {
		byID[n.ID] = n
	}
	names := resolve(base, func(id string) string { return identifier(byID[id].PackageName+"__"+base[id], id) })
	return resolve(names, func(id string) string { return hashed(names[id], id) })
}

// resolve renames, with rename, every node whose name another node shares.
func resolve(names map[string]string, rename func(id string) string) map[string]string {
	count := map[string]int{}
	for _, name := range names {
		count[name]++
	}
	out := make(map[string]string, len(names))
	for id, name := range names {
		if count[name] > 1 {
			name = rename(id)
		}
		out[id] = name
	}
	return out
}

// identifier makes s a dataset name: every character that is not an ASCII
// letter, digit or _ becomes _, a leading digit gets a _ before it, and a
// name too long is cut and ended with a hash of id.
func identifier(s, id string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	s = string(b)
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		s = "_" + s
	}
	if len(s) > maxName {
		s = hashed(s, id)
	}
	return s
}

// hashed ends name with 8 hex digits of id's SHA-256, within maxName.
func hashed(name, id string) string {
	sum := sha256.Sum256([]byte(id))
	suffix := "_" + hex.EncodeToString(sum[:4])
	if len(name) > maxName-len(suffix) {
		name = name[:maxName-len(suffix)]
	}
	return name + suffix
}

// versionOf is a versioned model's version as text ("2", "1_5"), or "".
func versionOf(n *node) string {
	switch v := n.Version.(type) {
	case string:
		return v
	case float64:
		return strings.ReplaceAll(fmt.Sprint(v), ".", "_")
	}
	return ""
}

// selectorsOf gives each model the --select argument that picks exactly
// it: its name, name.vN for a versioned model, or, when another package
// has a node of the same name, its fully qualified name (dbt's fqn
// selector, package.path.name).
func selectorsOf(nodes []*node) map[string]string {
	count := map[string]int{}
	for _, n := range nodes {
		count[n.Name]++
	}
	out := map[string]string{}
	for _, n := range nodes {
		sel := n.Name
		if v := versionOf(n); v != "" {
			sel += ".v" + strings.ReplaceAll(v, "_", ".")
		}
		if count[n.Name] > 1 && len(n.FQN) > 0 && versionOf(n) == "" {
			sel = strings.Join(n.FQN, ".")
		}
		out[n.ID] = sel
	}
	return out
}

// plainJSON decodes meta.refill.checks into plain values the YAML encoder
// writes as refill.yaml would have them: whole numbers as integers (a
// lookback of 28, not 28.0), other numbers as floats.
func plainJSON(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, refill.BadInputf("%v", strings.TrimPrefix(err.Error(), "json: "))
	}
	return numbers(v), nil
}

func numbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		if f, err := x.Float64(); err == nil {
			return f
		}
		return x.String()
	}
	return v
}
