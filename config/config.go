// Package config reads refill.yaml (docs/design.md §6) into a refill.Config.
//
// The file is the one place where people describe their warehouse, datasets
// and policy, and a mistake in it decides what gets rewritten, so the package
// is strict: unknown keys, values of the wrong type, unknown upstreams, lineage
// cycles, unsafe SQL identifiers and contradictory limits are all errors.
// Every error names the file, line and key, and all problems found are
// reported together rather than one per run.
package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/refill-dev/refill"
)

// Load reads and validates the configuration file at path. A file that cannot
// be read is reported as bad input, because the usual cause is a wrong
// --config flag rather than a broken machine.
func Load(path string) (*refill.Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		msg := err.Error()
		if pe, ok := err.(*os.PathError); ok {
			msg = "cannot read config: " + pe.Err.Error()
		}
		return nil, Errors{{File: path, Msg: msg}}
	}
	cfg, err := Parse(data, path)
	if err != nil {
		return nil, err
	}
	return cfg, nil
}

// Parse validates data as the contents of a refill.yaml. file names the file
// in error messages and sets Config.File (made absolute) and Config.Dir, which
// relative sqlite: paths are resolved against; it need not exist.
//
// The returned error, if any, is an Errors listing every problem found, each
// an *Error wrapping refill.ErrBadInput, sorted by line. The checks run in
// three stages, and a stage with problems ends the run, since what follows
// could not trust its input: YAML syntax (goccy stops at the first error),
// then the shape of the document (every unknown key and mistyped value), then
// the meaning (every missing, contradictory or unsafe setting).
func Parse(data []byte, file string) (*refill.Config, error) {
	name := file
	if name == "" {
		name = "refill.yaml"
	}
	errs := &errorList{file: name}
	ix := newIndex()

	f, err := parseAST(data)
	if err != nil {
		errs.errs = append(errs.errs, fromYAML(name, err, nil, data))
		return nil, errs.err()
	}
	var body ast.Node
	for i, doc := range f.Docs {
		if i == 0 {
			body = doc.Body
			continue
		}
		if doc.Body != nil {
			errs.add(nodeLine(doc.Body), "", "found a second YAML document; refill.yaml holds exactly one")
			return nil, errs.err()
		}
	}
	checkShape(body, reflect.TypeFor[rawConfig](), "", ix, errs)
	if len(errs.errs) > 0 {
		return nil, errs.err()
	}

	var raw rawConfig
	if err := decode(data, &raw, true); err != nil {
		errs.errs = append(errs.errs, fromYAML(name, err, ix, data))
		return nil, errs.err()
	}

	// The directory is known before conversion: datasets_from's paths are
	// relative to it (the working directory for a file named "").
	var abs string
	if file != "" {
		if abs, err = filepath.Abs(file); err != nil {
			return nil, Errors{{File: name, Msg: "cannot resolve path: " + err.Error()}}
		}
	}
	cfg := (&converter{ix: ix, errs: errs, dir: filepath.Dir(abs)}).config(&raw)
	if err := errs.err(); err != nil {
		return nil, err
	}
	if file != "" {
		cfg.File, cfg.Dir = abs, filepath.Dir(abs)
	}
	return cfg, nil
}

// parseAST and decode call into goccy/go-yaml with a recover: the input is
// outside text, and a parser bug on some odd byte sequence should reach the
// user as "this file is not valid YAML", not as a crash of refill.
func parseAST(data []byte) (f *ast.File, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, err = nil, fmt.Errorf("the YAML parser failed on this file: %v", r)
		}
	}()
	return parser.ParseBytes(data, 0)
}

// decode allows duplicate keys because the parser has already rejected true
// duplicates, and goccy's decoder otherwise takes a key that overrides a
// merged one ("<<: *base" then "table: b") for a duplicate. strict refuses
// keys raw has no field for.
func decode(data []byte, raw any, strict bool) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the YAML decoder failed on this file: %v", r)
		}
	}()
	opts := []yaml.DecodeOption{yaml.AllowDuplicateMapKey()}
	if strict {
		opts = append(opts, yaml.Strict())
	}
	return yaml.UnmarshalWithOptions(data, raw, opts...)
}

func nodeLine(n ast.Node) int {
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return tk.Position.Line
	}
	return 1
}

// The raw types mirror docs/design.md §6 key for key. Pointers mark the keys whose
// absence means "use the default" while an explicit zero or empty list must be
// kept (or rejected) as written.
type rawConfig struct {
	Version        *int                   `yaml:"version"`
	Warehouse      string                 `yaml:"warehouse"`
	State          string                 `yaml:"state"`
	StateEnv       string                 `yaml:"state_env"`
	StateFile      string                 `yaml:"state_file"`
	ProofWarehouse string                 `yaml:"proof_warehouse"`
	DatasetsFrom   *rawDatasetsFrom       `yaml:"datasets_from"`
	Run            *rawRun                `yaml:"run"`
	Notify         *rawNotify             `yaml:"notify"`
	Policy         *rawPolicy             `yaml:"policy"`
	Users          map[string]*rawUser    `yaml:"users"`
	Datasets       map[string]*rawDataset `yaml:"datasets"`
	MaxRangeDays   *int                   `yaml:"max_range_days"`
	Audit          *rawAudit              `yaml:"audit"`
	Server         *rawServer             `yaml:"server"`
	Watch          *rawWatch              `yaml:"watch"`
	Plan           *rawPlan               `yaml:"plan"`
	OpenLineage    *rawOpenLineageOut     `yaml:"openlineage"`
}

// rawOpenLineageOut is where refill sends the OpenLineage events of its
// runs.
type rawOpenLineageOut struct {
	URL        string `yaml:"url"`
	Endpoint   string `yaml:"endpoint"`
	APIKeyEnv  string `yaml:"api_key_env"`
	APIKeyFile string `yaml:"api_key_file"`
	Namespace  string `yaml:"namespace"`
}

type rawPlan struct {
	DiffBudget *int64 `yaml:"diff_budget"`
}

type rawWatch struct {
	Interval string `yaml:"interval"`
}

type rawServer struct {
	PublicURL string `yaml:"public_url"`
}

// Every secret is named by a *_env key (an environment variable) or the
// *_file key beside it (a file, relative to refill.yaml), never both.
type rawAudit struct {
	KeyEnv  string `yaml:"key_env"`
	KeyFile string `yaml:"key_file"`
}

// rawDatasetsFrom names a dbt manifest whose models, seeds, snapshots and
// sources join datasets: (package dbt; datasetsFrom in validate.go).
// Command, Env and ProjectDir shape the dbt jobs (dbt.Options).
type rawDatasetsFrom struct {
	DbtManifest string    `yaml:"dbt_manifest"`
	ProofTarget string    `yaml:"proof_target"`
	Command     *[]string `yaml:"command"`
	Env         []string  `yaml:"env"`
	ProjectDir  string    `yaml:"project_dir"`
}

type rawRun struct {
	MaxActive      *int    `yaml:"max_active"`
	MaxActiveTotal *int    `yaml:"max_active_total"`
	Attempts       *int    `yaml:"attempts"`
	Backoff        *string `yaml:"backoff"`
	RescueAfter    *string `yaml:"rescue_after"`
	OutagePatience *string `yaml:"outage_patience"`
	// Path lists the directories of command jobs' PATH, in order.
	Path      []string `yaml:"path"`
	Tolerance *float64 `yaml:"tolerance"`
	JobUser   *string  `yaml:"job_user"`
}

type rawNotify struct {
	Slack    *rawSlack    `yaml:"slack"`
	Webhooks []rawWebhook `yaml:"webhooks"`
}

type rawSlack struct {
	WebhookURLEnv     string `yaml:"webhook_url_env"`
	WebhookURLFile    string `yaml:"webhook_url_file"`
	SigningSecretEnv  string `yaml:"signing_secret_env"`
	SigningSecretFile string `yaml:"signing_secret_file"`
	BotTokenEnv       string `yaml:"bot_token_env"`
	BotTokenFile      string `yaml:"bot_token_file"`
	Channel           string `yaml:"channel"`
	APIURL            string `yaml:"api_url"`
	TeamID            string `yaml:"team_id"`
}

type rawWebhook struct {
	URL        string `yaml:"url"`
	SecretEnv  string `yaml:"secret_env"`
	SecretFile string `yaml:"secret_file"`
}

type rawPolicy struct {
	AutoMaxDays    *int      `yaml:"auto_max_days"`
	ManualOverDays *int      `yaml:"manual_over_days"`
	ManualTags     *[]string `yaml:"manual_tags"`
	AggregateTags  *[]string `yaml:"aggregate_tags"`
	Rules          []rawRule `yaml:"rules"`
	PlanTTL        *string   `yaml:"plan_ttl"`
	SnapshotTTL    *string   `yaml:"snapshot_ttl"`
	AcceptLeadTags *[]string `yaml:"accept_lead_tags"`
}

type rawRule struct {
	Name   string `yaml:"name"`
	When   string `yaml:"when"`
	Tier   string `yaml:"tier"`
	Reason string `yaml:"reason"`
}

type rawUser struct {
	Roles []string `yaml:"roles"`
	Slack string   `yaml:"slack"`
}

type rawDataset struct {
	Table     string        `yaml:"table"`
	Partition *rawPartition `yaml:"partition"`
	Upstream  []string      `yaml:"upstream"`
	Tags      []string      `yaml:"tags"`
	Checks    *rawChecks    `yaml:"checks"`
	Schedule  *rawSchedule  `yaml:"schedule"`
	Job       *rawJob       `yaml:"job"`
	// LineageOnly says why the dataset is lineage only: never rebuilt and
	// never gated (refill.Dataset.LineageOnly). refill import dbt writes
	// it for views, ephemeral models and models without a partition.
	LineageOnly *string `yaml:"lineage_only"`
	// OpenLineage pins the dataset's name in OpenLineage events.
	OpenLineage *rawOpenLineage `yaml:"openlineage"`
	// Key and Private shape the dry run's content diff.
	Key     []string `yaml:"key"`
	Private []string `yaml:"private"`
}

type rawPartition struct {
	Column   string  `yaml:"column"`
	Grain    string  `yaml:"grain"`
	Timezone *string `yaml:"timezone"`
}

type rawChecks struct {
	NotNull   *rawNotNull    `yaml:"not_null"`
	Volume    *rawVolume     `yaml:"volume"`
	TimeOrder []rawTimeOrder `yaml:"time_order"`
	NoFuture  []string       `yaml:"no_future"`
	MaxRatio  *float64       `yaml:"max_ratio"`
	Unique    []string       `yaml:"unique"`
	// AcceptedValues takes two forms, {col: [v, ...]} or {columns: {col:
	// [v, ...]}, max_ratio: r}, so its shape is checked by conversion.
	AcceptedValues any       `yaml:"accepted_values"`
	Drift          *rawDrift `yaml:"drift"`
}

type rawDrift struct {
	Columns  []string `yaml:"columns"`
	Lookback *int     `yaml:"lookback"`
	MaxZ     *float64 `yaml:"max_z"`
}

type rawNotNull struct {
	Columns  []string `yaml:"columns"`
	MaxRatio *float64 `yaml:"max_ratio"`
}

type rawVolume struct {
	Lookback  *int     `yaml:"lookback"`
	MaxZ      *float64 `yaml:"max_z"`
	MinChange *float64 `yaml:"min_change"`
	Calendar  []string `yaml:"calendar"`
}

type rawTimeOrder struct {
	Earlier string `yaml:"earlier"`
	Later   string `yaml:"later"`
}

type rawSchedule struct {
	Every   string `yaml:"every"`
	Lag     string `yaml:"lag"`
	Horizon *int   `yaml:"horizon"`
}

// rawJob holds every job kind's keys side by side so that a dataset naming two
// kinds can be told which two, instead of failing on whichever key a decoder
// happened to see second.
type rawJob struct {
	Query   *string   `yaml:"query"`
	SQL     *string   `yaml:"sql"`
	Command *[]string `yaml:"command"`
	// ProofCommand is the argv a proof runs instead (refill.Job.ProofCommand).
	ProofCommand []string `yaml:"proof_command"`
	// Files are globs of what the command sources or imports, sealed
	// with it (refill.Job.Files).
	Files []string `yaml:"files"`
	// DbtProject is the dbt project a dbt command runs from: its files
	// are sealed with the job (refill.Job.DbtProject).
	DbtProject string `yaml:"dbt_project"`
	Env        any    `yaml:"env"`
	Timeout    string `yaml:"timeout"`
	// SideEffects declares writes outside the warehouse (an export, an
	// upload): such a job is never proven by running it and never auto.
	SideEffects *bool       `yaml:"side_effects"`
	Airflow     *rawAirflow `yaml:"airflow"`
	// Checksum is a digest of what a command builds that refill cannot
	// read itself (a dbt model's SQL), part of the job's fingerprint.
	Checksum string `yaml:"checksum"`
}

type rawAirflow struct {
	URL          string `yaml:"url"`
	DagID        string `yaml:"dag_id"`
	API          string `yaml:"api"`
	UsernameEnv  string `yaml:"username_env"`
	UsernameFile string `yaml:"username_file"`
	PasswordEnv  string `yaml:"password_env"`
	PasswordFile string `yaml:"password_file"`
	Poll         string `yaml:"poll"`
}
