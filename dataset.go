package refill

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Grain is the width of one partition.
type Grain string

// Partition grains.
const (
	GrainDay  Grain = "day"
	GrainHour Grain = "hour"
)

// PartitionSpec says which column holds a dataset's partition key.
type PartitionSpec struct {
	Column string `json:"column"`
	Grain  Grain  `json:"grain"`
	// Timezone is the IANA zone whose week the data follows (default UTC).
	// Partition keys stay in UTC; the zone only places each partition in
	// the local week, so seasonal history and calendar days follow local
	// time across daylight-saving changes.
	Timezone string `json:"timezone,omitempty"`
}

// Dataset is a table (or other output) refill knows. A dataset without a job
// is a source: refill checks it but never rewrites it — unless it is
// lineage only (LineageOnly), which refill neither checks nor rewrites.
type Dataset struct {
	Name      string        `json:"name"`
	Table     string        `json:"table,omitempty"`
	Partition PartitionSpec `json:"partition"`
	Upstream  []string      `json:"upstream,omitempty"`
	Tags      []string      `json:"tags,omitempty"`
	Checks    *Checks       `json:"checks,omitempty"`
	Schedule  *Schedule     `json:"schedule,omitempty"`
	Job       *Job          `json:"job,omitempty"`
	// LineageOnly marks a dataset that is part of the lineage but is never
	// rebuilt and never gated: a dbt view or ephemeral model, or a model
	// refill cannot partition. It has no job, so IsSource holds, but the
	// lineage treats it as a pass-through rather than a source: a view's
	// rows follow its upstream's, so a plan that rebuilds the upstream
	// also rebuilds what reads the view (after the upstream), and the
	// view's tags count for the plan's tier (lineage.Closure.LineageOnly).
	LineageOnly bool `json:"lineage_only,omitempty"`
	// Why says, for people, why a dataset is lineage only ("materialized
	// as a view ...").
	Why string `json:"why,omitempty"`
	// From names where the dataset was declared when it was not under
	// refill.yaml's datasets: "dbt:target/manifest.json" for one imported
	// by datasets_from, so that a picture or message can say so.
	From string `json:"from,omitempty"`
	// OpenLineage, when set, is the dataset's name in OpenLineage events,
	// compared exactly instead of its table (openlineage.Matcher).
	OpenLineage *OpenLineageName `json:"openlineage,omitempty"`
	// Key names the columns that identify a row within a partition, for
	// the dry run's content diff; DiffSpec defaults it to the unique
	// check's columns.
	Key []string `json:"key,omitempty"`
	// Private columns are never shown in a content diff's sample, nor
	// their sums.
	Private []string `json:"private,omitempty"`
	// Line is where the dataset is defined in the config file, for errors.
	// An imported dataset has the line of datasets_from.
	Line int `json:"-"`
}

// Why a dataset is lineage only, when its rows follow its upstream's on
// their own: a view reads them live, an ephemeral model is inlined into its
// readers. Any other lineage-only dataset (an unpartitioned table, say)
// keeps its rows when its upstream is rebuilt, so what reads it downstream
// would read it stale.
const (
	WhyView      = "materialized as a view: it reads its upstream live, so there is nothing to rebuild"
	WhyEphemeral = "ephemeral: dbt inlines it into the models that use it, so it has no table"
)

// FollowsUpstream reports whether a lineage-only dataset's rows follow its
// upstream's by themselves (a view, an ephemeral model): its reason is
// WhyView or WhyEphemeral as refill import dbt writes them, or begins with
// the same words as a person writes them by hand ("materialized as a
// view", "view", "ephemeral"), the words the config's error suggests.
func (d *Dataset) FollowsUpstream() bool {
	if !d.LineageOnly {
		return false
	}
	why := strings.ToLower(strings.TrimSpace(d.Why))
	for _, w := range []string{"materialized as a view", "view", "ephemeral"} {
		rest, ok := strings.CutPrefix(why, w)
		next, _ := utf8.DecodeRuneInString(rest)
		if ok && (rest == "" || !unicode.IsLetter(next) && !unicode.IsDigit(next) && next != '_') {
			return true
		}
	}
	return false
}

// OpenLineageName is a dataset as OpenLineage events name it: a namespace
// (the data source, such as postgres://db:5432) and a name within it.
type OpenLineageName struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// Ref names the dataset's partitioned table for the warehouse. A dataset
// built without a grain (the config loader always sets one) is day-grained.
func (d *Dataset) Ref() TableRef {
	g := d.Partition.Grain
	if g == "" {
		g = GrainDay
	}
	ref := TableRef{Table: d.Table, Column: d.Partition.Column, Grain: g}
	if g == GrainHour {
		// A day partition is a calendar date: a timezone changes nothing
		// about it, so it is neither used nor sealed.
		ref.Timezone = d.Partition.Timezone
	}
	return ref
}

// IsSource reports whether the dataset has no job.
func (d *Dataset) IsSource() bool { return d.Job == nil }

// HasTag reports whether the dataset carries any of tags.
func (d *Dataset) HasTag(tags ...string) bool {
	for _, t := range tags {
		if slices.Contains(d.Tags, t) {
			return true
		}
	}
	return false
}

// Schedule tells the watcher when a partition is due.
type Schedule struct {
	Every   Grain    `json:"every"`
	Lag     Duration `json:"lag"`
	Horizon int      `json:"horizon"`
}

// Duration is a time.Duration that encodes as Go duration text.
type Duration time.Duration

// MarshalJSON encodes the duration as text such as "2h0m0s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads the text MarshalJSON writes (a sealed plan carries
// its jobs' timeouts).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// JobKind names how a dataset's partition is rebuilt.
type JobKind string

// Job kinds (docs/design.md §6).
const (
	JobQuery   JobKind = "query"
	JobSQL     JobKind = "sql"
	JobCommand JobKind = "command"
	JobAirflow JobKind = "airflow"
)

// Job rebuilds one partition of a dataset. Exactly one kind is set.
type Job struct {
	Kind    JobKind  `json:"kind"`
	Query   string   `json:"query,omitempty"`
	SQL     string   `json:"sql,omitempty"`
	Command []string `json:"command,omitempty"`
	// ProofCommand, when set, is the argv a proof runs instead of
	// Command: the same program told to write where the proof warehouse
	// is (a dbt job's --target PROOF_TARGET). Its program is Command's.
	ProofCommand []string    `json:"proof_command,omitempty"`
	Env          []string    `json:"env,omitempty"`
	Timeout      Duration    `json:"timeout,omitempty"`
	Airflow      *AirflowJob `json:"airflow,omitempty"`
	// SideEffects declares that the job writes outside the warehouse (an
	// export, an upload): it is never proven by running it three times, and
	// never auto.
	SideEffects bool `json:"side_effects,omitempty"`
	// Files are globs, relative to the config's directory, of what a
	// command sources or imports (job.files: ["scripts/**", "lib/*.py"]),
	// and, for a dbt job, those of its dbt project: sealed with it.
	Files []string `json:"files,omitempty"`
	// DbtProject is the dbt project a dbt job runs from, relative to the
	// config's directory: its dbt_project.yml, packages, models, macros,
	// seeds, snapshots, tests and analyses are among Files.
	DbtProject string `json:"dbt_project,omitempty"`
	// Sealed holds the SHA-256 of every file the command executes or
	// reads as code: each argv element that names a file, under its path
	// as written, and each of Files, under "files:" and the glob, with the
	// digest of everything it matches. It is part of the fingerprint, so
	// editing a script, or a file it sources, is editing the job: its
	// proofs go stale, a plan that sealed it is stale, and a run refuses
	// to start it (package jobs/jobfiles).
	Sealed map[string]string `json:"sealed,omitempty"`
	// Script is what plans made before Sealed sealed: the SHA-256 of
	// argv[0] alone. Kept to read those plans; never set now.
	Script string `json:"script,omitempty"`
	// Path is the PATH the command runs with and its program is found on:
	// run.path, or the system's default, never the environment of whoever
	// plans or applies (a PATH with their own directory in front would
	// otherwise run their python3).
	Path string `json:"path,omitempty"`
	// EnvSeal holds, for each variable the job's env passes through from
	// refill's environment, a keyed digest of its value (never the value):
	// a plan sealed with one value does not run with another. It is not
	// part of the fingerprint: a rotated password is the same job.
	EnvSeal map[string]string `json:"env_seal,omitempty"`
	// Checksum is a digest of what the command builds that refill cannot
	// read itself: for a job imported from a dbt manifest, the model's
	// checksum there ("sha256:..."), so that editing the model's SQL is
	// editing the job and makes its proofs stale, as Script does for a
	// script of the project.
	Checksum string `json:"checksum,omitempty"`
}

// AirflowJob triggers a DAG run and waits for its state.
type AirflowJob struct {
	URL         string `json:"url"`
	DagID       string `json:"dag_id"`
	API         string `json:"api"`
	UsernameEnv string `json:"username_env,omitempty"`
	PasswordEnv string `json:"password_env,omitempty"`
	// UsernameFile and PasswordFile are the credentials kept in files
	// instead (relative to the config's directory, as written: In
	// resolves them where the job runs).
	UsernameFile string `json:"username_file,omitempty"`
	PasswordFile string `json:"password_file,omitempty"`
	// Poll is how often the DAG run's state is read (default 5s).
	Poll Duration `json:"poll,omitempty"`
}

// Username is where the job's Airflow user name is kept; key is the
// dotted config path of the job's airflow: mapping, with its dot.
func (a *AirflowJob) Username(key string) Secret {
	return secretOf(key+"username", a.UsernameEnv, a.UsernameFile, false)
}

// Password is where the job's Airflow password is kept.
func (a *AirflowJob) Password(key string) Secret {
	return secretOf(key+"password", a.PasswordEnv, a.PasswordFile, false)
}

// HasCredentials reports whether the job names credentials at all.
func (a *AirflowJob) HasCredentials() bool {
	return a.Username("").IsSet() || a.Password("").IsSet()
}

// In returns a copy of a whose relative credential files are resolved
// against dir, the directory of the config the job runs under: a sealed
// job keeps its paths as written, so that a project moved with its plans
// still finds them.
func (a *AirflowJob) In(dir string) *AirflowJob {
	if a == nil {
		return nil
	}
	c := *a
	c.UsernameFile = a.Username("").In(dir).File
	c.PasswordFile = a.Password("").In(dir).File
	return &c
}

// Fingerprint is a hash of the job's definition. Proofs are tied to it, so
// any edit to the job makes old evidence stale.
func (j *Job) Fingerprint() string {
	if j == nil {
		return ""
	}
	c := *j
	c.EnvSeal = nil
	b, _ := json.Marshal(c) // a struct of plain fields cannot fail to encode
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Checks are the source gate's rules for a dataset (docs/design.md §9).
type Checks struct {
	NotNull   *NotNullCheck    `json:"not_null,omitempty"`
	Volume    *VolumeCheck     `json:"volume,omitempty"`
	TimeOrder []TimeOrderCheck `json:"time_order,omitempty"`
	NoFuture  []string         `json:"no_future,omitempty"`
	// MaxRatio bounds time_order and no_future violations (default 0).
	MaxRatio float64 `json:"max_ratio,omitempty"`
	// Unique columns together are a key within each partition: any key
	// shared by two rows fails. Rows with a NULL in the key are left to
	// not_null.
	Unique []string `json:"unique,omitempty"`
	// AcceptedValues bounds the share of non-NULL rows whose value is
	// outside a list (NULLs are left to not_null, as in dbt).
	AcceptedValues *AcceptedValuesCheck `json:"accepted_values,omitempty"`
	// Drift scores per-partition profiles of columns against history.
	Drift *DriftCheck `json:"drift,omitempty"`
}

// AcceptedValuesCheck lists the values each column may hold.
type AcceptedValuesCheck struct {
	// Columns are sorted by name, so that the check reads the same every
	// time (a map would not).
	Columns  []AcceptedValues `json:"columns"`
	MaxRatio float64          `json:"max_ratio"`
}

// AcceptedValues is one column's list of values, compared as text.
type AcceptedValues struct {
	Column string   `json:"column"`
	Values []string `json:"values"`
}

// DriftCheck flags partitions whose column profiles are outliers against
// same-slot history, scored like volume (docs/design.md §9): for numeric
// columns the mean and the share of zeros, for every column the distinct
// count and the share of the most frequent value.
type DriftCheck struct {
	Columns  []string `json:"columns"`
	Lookback int      `json:"lookback"`
	MaxZ     float64  `json:"max_z"`
}

// NotNullCheck bounds the share of nulls in each column.
type NotNullCheck struct {
	Columns  []string `json:"columns"`
	MaxRatio float64  `json:"max_ratio"`
}

// VolumeCheck flags partitions whose row count is an outlier against history.
type VolumeCheck struct {
	// Lookback is in days at every grain.
	Lookback int     `json:"lookback"`
	MaxZ     float64 `json:"max_z"`
	// MinChange, when set, is the relative change under which a count
	// never alerts (0.10: ten per cent), replacing the grain's default
	// floor.
	MinChange float64 `json:"min_change,omitempty"`
	// Calendar lists known exceptions, dates (2026-11-26) or recurring
	// month-days (12-25), in the dataset's timezone: on them a volume
	// failure is a warning, and they never count as history.
	Calendar []string `json:"calendar,omitempty"`
}

// TimeOrderCheck says one timestamp column must not be later than another.
type TimeOrderCheck struct {
	Earlier string `json:"earlier"`
	Later   string `json:"later"`
}

// JobRun is one build of one partition: the plan and run it belongs to,
// and, for a job that writes outside refill's transaction, where it writes.
type JobRun struct {
	PlanID    string
	Run       int
	Partition string
	// Warehouse is the DSN an outside job is told to write to
	// (REFILL_WAREHOUSE): the warehouse, or the proof warehouse in a proof.
	Warehouse string
	// AttemptKey names this partition of this run, the same for every
	// retry (REFILL_ATTEMPT_KEY): a job with side effects may make its own
	// writes idempotent with it (an upload's name, a request's id).
	AttemptKey string
	// Proof is set when the job runs in a proof, on the proof warehouse.
	Proof bool
}

// AttemptKey is the key of a plan's partition in one of its runs.
func AttemptKey(planID, dataset, partition string, run int) string {
	return fmt.Sprintf("refill-%s-%s-%s-r%d", planID, dataset, partition, run)
}

// JobRunner rebuilds one partition of a dataset's job: one implementation
// per job kind (jobs/query for query and sql, jobs/command for command,
// jobs/airflow for airflow), chosen by jobs.For and used alike by runs,
// proofs and the planner's rehearsal.
//
// A transactional job (query, sql) builds inside refill's warehouse
// transaction, which Build receives: the caller decides whether it is
// published (a run) or rolled back (a proof, a rehearsal). Any other job
// writes on its own; Build gets a nil transaction and returns the job's
// output, kept with the run.
type JobRunner interface {
	Transactional() bool
	Build(ctx context.Context, tx WarehouseTx, d *Dataset, run JobRun) (output string, err error)
}

// DiffSpec is how the dry run compares the dataset's partitions before
// and after a rebuild: by Key, or by the unique check's columns when it
// has no key of its own, or else whole rows.
func (d *Dataset) DiffSpec() DiffSpec {
	spec := DiffSpec{Key: d.Key, Private: d.Private, Sample: DiffSample}
	if len(spec.Key) == 0 && d.Checks != nil {
		spec.Key = d.Checks.Unique
	}
	return spec
}
