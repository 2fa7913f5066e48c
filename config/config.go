// Package config reads refill.yaml (DESIGN.md §5) into a refill.Config.
//
// The file is the one place where people describe their warehouse, datasets
// and policy, and a mistake in it decides what gets rewritten, so the package
// is strict: unknown keys, values of the wrong type, unknown upstreams, lineage
// cycles, unsafe SQL identifiers and contradictory limits are all errors.
// Every error names the file, line and key, and all problems found are
// reported together rather than one per run.
package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

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
	digestScripts(cfg)
	return cfg, nil
}

// digestScripts records, for each command job whose program is a file of
// the project (argv[0] names a path, like ./export.sh), the SHA-256 of that
// file in the job definition. The job's fingerprint — and so its proofs
// and the plans that seal it — then changes when the script does: a
// hurried edit to the script is a different job, as an edit to its argv is.
// A program found on PATH (sh, dbt) is not the project's, and is not read.
func digestScripts(cfg *refill.Config) {
	for _, d := range cfg.Datasets {
		if d.Job == nil || d.Job.Kind != refill.JobCommand || len(d.Job.Command) == 0 {
			continue
		}
		prog := d.Job.Command[0]
		if !strings.Contains(prog, "/") {
			continue
		}
		if !filepath.IsAbs(prog) {
			prog = filepath.Join(cfg.Dir, prog)
		}
		b, err := os.ReadFile(prog)
		if err != nil {
			continue // run time says it is missing, with the path
		}
		sum := sha256.Sum256(b)
		d.Job.Script = "sha256:" + hex.EncodeToString(sum[:])
	}
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
	if err := decode(data, &raw); err != nil {
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
// merged one ("<<: *base" then "table: b") for a duplicate.
func decode(data []byte, raw any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the YAML decoder failed on this file: %v", r)
		}
	}()
	return yaml.UnmarshalWithOptions(data, raw, yaml.Strict(), yaml.AllowDuplicateMapKey())
}

func nodeLine(n ast.Node) int {
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return tk.Position.Line
	}
	return 1
}

// The raw types mirror DESIGN.md §5 key for key. Pointers mark the keys whose
// absence means "use the default" while an explicit zero or empty list must be
// kept (or rejected) as written.
type rawConfig struct {
	Version        *int                   `yaml:"version"`
	Warehouse      string                 `yaml:"warehouse"`
	State          string                 `yaml:"state"`
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
}

type rawWatch struct {
	Interval string `yaml:"interval"`
}

type rawServer struct {
	PublicURL string `yaml:"public_url"`
}

type rawAudit struct {
	KeyEnv string `yaml:"key_env"`
}

// rawDatasetsFrom names a dbt manifest whose models, seeds, snapshots and
// sources join datasets: (package dbt; datasetsFrom in validate.go).
// Command, Env and ProjectDir shape the dbt jobs (dbt.Options).
type rawDatasetsFrom struct {
	DbtManifest string    `yaml:"dbt_manifest"`
	Command     *[]string `yaml:"command"`
	Env         []string  `yaml:"env"`
	ProjectDir  string    `yaml:"project_dir"`
}

type rawRun struct {
	MaxActive      *int     `yaml:"max_active"`
	MaxActiveTotal *int     `yaml:"max_active_total"`
	Attempts       *int     `yaml:"attempts"`
	Backoff        *string  `yaml:"backoff"`
	RescueAfter    *string  `yaml:"rescue_after"`
	Tolerance      *float64 `yaml:"tolerance"`
}

type rawNotify struct {
	Slack    *rawSlack    `yaml:"slack"`
	Webhooks []rawWebhook `yaml:"webhooks"`
}

type rawSlack struct {
	WebhookURLEnv    string `yaml:"webhook_url_env"`
	SigningSecretEnv string `yaml:"signing_secret_env"`
	BotTokenEnv      string `yaml:"bot_token_env"`
	Channel          string `yaml:"channel"`
	APIURL           string `yaml:"api_url"`
	TeamID           string `yaml:"team_id"`
}

type rawWebhook struct {
	URL       string `yaml:"url"`
	SecretEnv string `yaml:"secret_env"`
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
	Env     any       `yaml:"env"`
	Timeout string    `yaml:"timeout"`
	// SideEffects declares writes outside the warehouse (an export, an
	// upload): such a job is never proven by running it and never auto.
	SideEffects *bool       `yaml:"side_effects"`
	Airflow     *rawAirflow `yaml:"airflow"`
	// Checksum is a digest of what a command builds that refill cannot
	// read itself (a dbt model's SQL), part of the job's fingerprint.
	Checksum string `yaml:"checksum"`
}

type rawAirflow struct {
	URL         string `yaml:"url"`
	DagID       string `yaml:"dag_id"`
	API         string `yaml:"api"`
	UsernameEnv string `yaml:"username_env"`
	PasswordEnv string `yaml:"password_env"`
	Poll        string `yaml:"poll"`
}
