package refill

import (
	"slices"
)

// Config is a loaded and validated refill.yaml.
type Config struct {
	// File is the absolute path the configuration was read from; Dir is its
	// directory, against which relative sqlite: paths resolve.
	File string `json:"-"`
	Dir  string `json:"-"`

	Warehouse      string              `json:"warehouse"`
	State          string              `json:"state"`
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
}

// DefaultAuditKeyEnv names the environment variable holding the audit
// chain's key when the config does not say.
const DefaultAuditKeyEnv = "REFILL_AUDIT_KEY"

// AuditConfig names the environment variable that holds the key of the
// audit chain. The key itself never lives in the file or the state store.
type AuditConfig struct {
	KeyEnv string `json:"key_env"`
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
}

// NotifyConfig names where dry runs and alerts go.
type NotifyConfig struct {
	Slack    *SlackConfig    `json:"slack,omitempty"`
	Webhooks []WebhookConfig `json:"webhooks,omitempty"`
}

// SlackConfig names the environment variables holding Slack secrets; the
// secrets themselves never live in the file.
type SlackConfig struct {
	WebhookURLEnv    string `json:"webhook_url_env,omitempty"`
	SigningSecretEnv string `json:"signing_secret_env,omitempty"`
	// BotTokenEnv names the bot token's variable: with it, messages go
	// through chat.postMessage to Channel and are updated in place with
	// each outcome (an incoming webhook cannot update what it posted).
	BotTokenEnv string `json:"bot_token_env,omitempty"`
	Channel     string `json:"channel,omitempty"`
	// APIURL is Slack's Web API base (default https://slack.com/api/).
	APIURL string `json:"api_url,omitempty"`
	// TeamID, when set, is the one Slack workspace whose button presses
	// refill takes: an interaction from another (an app installed in
	// two workspaces, a signing secret that leaked with it) is refused.
	TeamID string `json:"team_id,omitempty"`
}

// ServerConfig is refill serve's: PublicURL is where people reach it, for
// links in Slack messages and webhooks.
type ServerConfig struct {
	PublicURL string `json:"public_url,omitempty"`
}

// WebhookConfig is one generic webhook receiver.
type WebhookConfig struct {
	URL       string `json:"url"`
	SecretEnv string `json:"secret_env,omitempty"`
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
	if name == Watcher {
		return "", NotPermittedf("%q is refill's own identity (the watcher plans and applies as it): nobody may act as it", Watcher)
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
