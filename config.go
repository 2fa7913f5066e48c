package refill

import (
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
)

// Config is a loaded and validated refill.yaml.
type Config struct {
	// File is the absolute path the configuration was read from; Dir is its
	// directory, against which relative sqlite: paths resolve.
	File string
	Dir  string `json:"-"`

	Warehouse string `json:"warehouse"`
	// State is the state store's DSN as state: gives it. StateEnv or
	// StateFile (state_env, state_file) keep it out of refill.yaml, which
	// a command job can read, running in its directory: then State is
	// empty and the DSN is a secret (StateSecret).
	State          string              `json:"state"`
	StateEnv       string              `json:"state_env,omitempty"`
	StateFile      string              `json:"state_file,omitempty"`
	ProofWarehouse string              `json:"proof_warehouse,omitempty"`
	Run            RunConfig           `json:"run"`
	Notify         NotifyConfig        `json:"notify"`
	Server         ServerConfig        `json:"server"`
	Watch          WatchConfig         `json:"watch"`
	Policy         Policy              `json:"policy"`
	Users          map[string]User     `json:"users,omitempty"`
	Datasets       map[string]*Dataset `json:"datasets"`
	// MaxRangeDays bounds any request's range (default 3,660 days).
	MaxRangeDays int `json:"max_range_days"`
	// Audit says where the audit chain's key lives.
	Audit AuditConfig `json:"audit"`
	// Housekeeping is policy.plan_ttl and policy.snapshot_ttl.
	Housekeeping Housekeeping `json:"housekeeping"`
	// AcceptLeadTags is policy.accept_lead_tags: on datasets with any of
	// these tags only a lead may accept a finding as real data (refill
	// accept). It defaults to the manual tags: data whose backfills need a
	// lead needs one to declare an anomaly real. It is checked when a
	// finding is accepted, so no plan seals it.
	AcceptLeadTags []string `json:"accept_lead_tags"`
	// Plan is how dry runs are made.
	Plan PlanConfig `json:"plan"`
	// OpenLineage is where runs are told to lineage tools (nil: nowhere).
	OpenLineage *OpenLineageConfig `json:"openlineage,omitempty"`
}

// Defaults of the openlineage: section.
const (
	DefaultOpenLineageEndpoint  = "api/v1/lineage"
	DefaultOpenLineageNamespace = "refill"
)

// OpenLineageConfig is the openlineage: section: every plan run is sent
// as OpenLineage RunEvents to URL + Endpoint (the OpenLineage HTTP
// transport's two settings), with the API key, if any, as a bearer token.
// Namespace is the jobs' namespace.
type OpenLineageConfig struct {
	URL        string `json:"url"`
	Endpoint   string `json:"endpoint"`
	APIKeyEnv  string `json:"api_key_env,omitempty"`
	APIKeyFile string `json:"api_key_file,omitempty"`
	Namespace  string `json:"namespace"`
}

// APIKey is where the receiver's API key is kept (optional).
func (o *OpenLineageConfig) APIKey() Secret {
	return secretOf("openlineage.api_key", o.APIKeyEnv, o.APIKeyFile, true)
}

// PlanConfig is the config's plan: section.
type PlanConfig struct {
	// DiffBudget is plan.diff_budget: how many rows a plan's content
	// diffs compare in all (each partition's rows before and after). 0
	// makes no diffs.
	DiffBudget int64 `json:"diff_budget"`
}

// DefaultAuditKeyEnv names the environment variable holding the audit
// chain's key when the config does not say.
const DefaultAuditKeyEnv = "REFILL_AUDIT_KEY"

// AuditConfig says where the key of the audit chain is kept: the
// environment variable KeyEnv or the file KeyFile. The key itself never
// lives in refill.yaml or the state store.
type AuditConfig struct {
	KeyEnv  string `json:"key_env"`
	KeyFile string `json:"key_file,omitempty"`
}

// A Secret says where one of refill's secrets is kept: in the environment
// variable Env or in the file File (relative to the config's directory
// unless absolute), never both. The value never lives in refill.yaml,
// which every command job can read.
type Secret struct {
	// Key is the config key that names it, for messages.
	Key  string
	Env  string
	File string
	// Own marks a secret only refill may hold — the audit key, Slack's
	// secrets, webhook secrets, the state store's DSN or password: with
	// it a job could forge the audit log or a decision. A command job
	// that names its variable is a config error, and no job is ever
	// given it. Others (an Airflow job's credentials, the warehouse's
	// password) a command job may name under env:.
	Own bool
}

// IsSet reports whether the config names the secret at all.
func (s Secret) IsSet() bool { return s.Env != "" || s.File != "" }

// String says where the secret is kept, for messages: $NAME or the file.
func (s Secret) String() string {
	if s.File != "" {
		return "the file " + s.File
	}
	if s.Env != "" {
		return "$" + s.Env
	}
	return "nowhere"
}

// In returns s with a relative File resolved against dir.
func (s Secret) In(dir string) Secret {
	if s.File != "" && !filepath.IsAbs(s.File) {
		s.File = filepath.Join(dir, s.File)
	}
	return s
}

// PGPasswordEnv is the variable PostgreSQL's clients read a password from
// when the DSN gives none. refill withholds it from its own environment
// like a secret the config names, and writes it into the DSNs it
// connects with.
const PGPasswordEnv = "PGPASSWORD"

// AuditKey is where the audit chain's key is kept.
func (c *Config) AuditKey() Secret {
	if c.Audit.KeyFile != "" {
		return Secret{Key: "audit.key_file", File: c.Audit.KeyFile, Own: true}
	}
	return Secret{Key: "audit.key_env", Env: c.Audit.KeyEnv, Own: true}
}

// StateSecret is where the state store's DSN is kept when state_env or
// state_file keeps it out of refill.yaml; not set when state: gives it.
func (c *Config) StateSecret() Secret {
	switch {
	case c.StateEnv != "":
		return Secret{Key: "state_env", Env: c.StateEnv, Own: true}
	case c.StateFile != "":
		return Secret{Key: "state_file", File: c.StateFile, Own: true}
	}
	return Secret{}
}

// Secrets lists every secret the config names: the audit key, the state
// store's DSN, Slack's and the webhooks' secrets, and each Airflow job's
// credentials, in that order.
func (c *Config) Secrets() []Secret {
	out := []Secret{c.AuditKey()}
	if s := c.StateSecret(); s.IsSet() {
		out = append(out, s)
	}
	if s := c.Notify.Slack; s != nil {
		out = append(out, s.WebhookURL(), s.SigningSecret(), s.BotToken())
	}
	for i, w := range c.Notify.Webhooks {
		out = append(out, w.Secret(i))
	}
	if c.OpenLineage != nil {
		out = append(out, c.OpenLineage.APIKey())
	}
	for _, name := range c.DatasetNames() {
		if d := c.Datasets[name]; d != nil && d.Job != nil && d.Job.Airflow != nil {
			key := "datasets." + name + ".job.airflow."
			out = append(out, d.Job.Airflow.Username(key), d.Job.Airflow.Password(key))
		}
	}
	return slices.DeleteFunc(out, func(s Secret) bool { return !s.IsSet() })
}

// OwnSecretEnvs lists the environment variables holding secrets only
// refill may hold (Secret.Own): those the config names, the default
// audit key variable whatever the config says, and PGPASSWORD when it is
// the state store's password alone — the state store is a PostgreSQL URL
// without a password of its own while no warehouse (which a command job
// must reach anyway) relies on PGPASSWORD.
func (c *Config) OwnSecretEnvs() []Secret {
	var out []Secret
	for _, s := range c.Secrets() {
		if s.Own && s.Env != "" {
			out = append(out, s)
		}
	}
	if c.AuditKey().Env != DefaultAuditKeyEnv {
		out = append(out, Secret{Key: "audit.key_env, by default", Env: DefaultAuditKeyEnv, Own: true})
	}
	if needsPGPassword(c.State) && !needsPGPassword(c.Warehouse) && !needsPGPassword(c.ProofWarehouse) {
		out = append(out, Secret{Key: "state, for its PostgreSQL password", Env: PGPasswordEnv, Own: true})
	}
	return out
}

// needsPGPassword reports whether dsn is a PostgreSQL URL that gives no
// password, so that the client reads PGPASSWORD.
func needsPGPassword(dsn string) bool {
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return false
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return false
	}
	_, has := u.User.Password()
	return !has && !u.Query().Has("password")
}

// Name is how messages name the config file: its path, or refill.yaml for
// a config built in memory.
func (c *Config) Name() string {
	if c.File == "" {
		return "refill.yaml"
	}
	return c.File
}

// DatasetNames returns the configured dataset names, sorted.
func (c *Config) DatasetNames() []string {
	names := make([]string, 0, len(c.Datasets))
	for n := range c.Datasets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// RunConfig bounds execution.
type RunConfig struct {
	MaxActive      int `json:"max_active"`
	MaxActiveTotal int `json:"max_active_total"`
	Attempts       int `json:"attempts"`
	// Backoff is the first retry delay of a failed partition (doubling).
	Backoff Duration `json:"backoff"`
	// RescueAfter is how long after a worker took a partition job River
	// gives it to another, presuming the worker died (default 10m). Each
	// attempt is cut off at nine tenths of it, so it must exceed the longest
	// partition job.
	RescueAfter Duration `json:"rescue_after"`
	// Tolerance is how far (a fraction) a published partition's rows may
	// differ from the plan's expectation before the report flags it.
	Tolerance float64 `json:"tolerance"`
	// Path is the PATH of command jobs (run.path; DefaultJobPath).
	Path string `json:"path,omitempty"`
	// OutagePatience is how long a partition waits out the warehouse or
	// the state store being unavailable (a connection refused or reset, a
	// lock, a failover) before it fails: such waits do not use up
	// Attempts, which count the job's own failures (default 2m).
	OutagePatience Duration `json:"outage_patience,omitempty"`
	// JobUser is run.job_user: command jobs (runs and proofs) run as this
	// user rather than as refill's, so that a refill running as root does
	// not hand every job the power to read its memory.
	JobUser *JobUser `json:"job_user,omitempty"`
}

// JobUser is an operating-system user command jobs run as, resolved
// when the config is loaded.
type JobUser struct {
	Name   string   `json:"name"`
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"`
	Home   string   `json:"home"`
}

// NotifyConfig names where dry runs and alerts go.
type NotifyConfig struct {
	Slack    *SlackConfig    `json:"slack,omitempty"`
	Webhooks []WebhookConfig `json:"webhooks,omitempty"`
}

// SlackConfig names the environment variables or files holding Slack
// secrets (each *Env or the *File beside it); the secrets themselves
// never live in refill.yaml.
type SlackConfig struct {
	WebhookURLEnv     string `json:"webhook_url_env,omitempty"`
	WebhookURLFile    string `json:"webhook_url_file,omitempty"`
	SigningSecretEnv  string `json:"signing_secret_env,omitempty"`
	SigningSecretFile string `json:"signing_secret_file,omitempty"`
	// BotTokenEnv names the bot token's variable: with it, messages go
	// through chat.postMessage to Channel and are updated in place with
	// each outcome (an incoming webhook cannot update what it posted).
	BotTokenEnv  string `json:"bot_token_env,omitempty"`
	BotTokenFile string `json:"bot_token_file,omitempty"`
	Channel      string `json:"channel,omitempty"`
	// APIURL is Slack's Web API base (default https://slack.com/api/).
	APIURL string `json:"api_url,omitempty"`
	// TeamID, when set, is the one Slack workspace whose button presses
	// refill takes: an interaction from another (an app installed in
	// two workspaces, a signing secret that leaked with it) is refused.
	TeamID string `json:"team_id,omitempty"`
}

// WebhookURL is where the incoming webhook's URL is kept.
func (s *SlackConfig) WebhookURL() Secret {
	return secretOf("notify.slack.webhook_url", s.WebhookURLEnv, s.WebhookURLFile, true)
}

// SigningSecret is where Slack's signing secret is kept.
func (s *SlackConfig) SigningSecret() Secret {
	return secretOf("notify.slack.signing_secret", s.SigningSecretEnv, s.SigningSecretFile, true)
}

// BotToken is where the bot token is kept.
func (s *SlackConfig) BotToken() Secret {
	return secretOf("notify.slack.bot_token", s.BotTokenEnv, s.BotTokenFile, true)
}

// secretOf is the Secret of a key given as key_env or key_file.
func secretOf(key, env, file string, own bool) Secret {
	if file != "" {
		return Secret{Key: key + "_file", File: file, Own: own}
	}
	return Secret{Key: key + "_env", Env: env, Own: own}
}

// ServerConfig is refill serve's: PublicURL is where people reach it, for
// links in Slack messages and webhooks.
type ServerConfig struct {
	PublicURL string `json:"public_url,omitempty"`
}

// WebhookConfig is one generic webhook receiver.
type WebhookConfig struct {
	URL        string `json:"url"`
	SecretEnv  string `json:"secret_env,omitempty"`
	SecretFile string `json:"secret_file,omitempty"`
}

// Secret is where the signing secret of notify.webhooks[i] is kept.
func (w WebhookConfig) Secret(i int) Secret {
	return secretOf(fmt.Sprintf("notify.webhooks[%d].secret", i), w.SecretEnv, w.SecretFile, true)
}

// User is a person refill knows, with the roles that decide what they may
// approve.
type User struct {
	Name  string   `json:"name"`
	Roles []string `json:"roles"`
	Slack string   `json:"slack,omitempty"`
}

// HasRole reports whether the user holds role.
func (u User) HasRole(role string) bool { return slices.Contains(u.Roles, role) }

// Actor resolves who is acting: as (from --as or REFILL_USER), else
// fallback (the operating system's user). When users are configured the
// actor must be one of them, so that approvals and the audit log name real
// people; without users, refill serves a single person under any name.
func (c *Config) Actor(as, fallback string) (string, error) {
	name := as
	if name == "" && len(c.Users) == 0 {
		name = fallback
	}
	if Reserved(name) {
		return "", NotPermittedf("%q is refill's own identity (the watcher, or refill resuming runs nobody holds, acts as it): nobody may act as it", name)
	}
	if name == "" {
		if len(c.Users) > 0 {
			return "", NotPermittedf("who are you? pass --as USER or set REFILL_USER (configured users: %s)", c.userNames())
		}
		return "", BadInputf("who are you? pass --as USER or set REFILL_USER")
	}
	if len(c.Users) > 0 {
		if _, ok := c.Users[name]; !ok {
			return "", NotPermittedf("unknown user %q: configured users are %s", name, c.userNames())
		}
	}
	return name, nil
}

// AcceptNeedsLead reports whether only a lead's acceptance of d's
// findings counts: d has a tag in policy.accept_lead_tags.
func (c *Config) AcceptNeedsLead(d *Dataset) bool {
	return slices.ContainsFunc(d.Tags, func(t string) bool { return slices.Contains(c.AcceptLeadTags, t) })
}

func (c *Config) userNames() string {
	names := make([]string, 0, len(c.Users))
	for n := range c.Users {
		names = append(names, n)
	}
	slices.Sort(names)
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}
