package config

import (
	"fmt"
	"maps"
	"math"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/lineage"
	"github.com/refill-dev/refill/policy"
	"github.com/refill-dev/refill/warehouse/sqltext"
)

// Defaults of docs/design.md §6 and §9 that are not policy (policy defaults come
// from refill.DefaultPolicy and run defaults from refill.DefaultRunConfig, so
// the planner, the runner and this package cannot disagree).
const (
	defaultState    = "sqlite:.refill/state.db"
	defaultLookback = 28
	defaultMaxZ     = 3.0
	// defaultDriftMaxZ is wider than volume's: a partition has several
	// drift metrics per column, so each is held to a stricter bar.
	defaultDriftMaxZ = 4.0
	defaultHorizon   = 35
	// maxHorizon bounds how far back the watcher looks (days).
	maxHorizon = 366
	// defaultWatchInterval is how often refill serve's watcher ticks.
	defaultWatchInterval = 5 * time.Minute
	defaultAirflowAPI    = "v1"
)

// knownRoles are the roles docs/design.md §10 gives meaning to: anyone may approve a
// semi-auto plan that is not their own, only a lead a manual one. Any other
// role name would be a typo that silently grants nothing.
var knownRoles = []string{"engineer", "lead"}

var (
	// identifier is a dataset name. It is refill's own name, not one the
	// warehouse knows, and people type it on the command line, so it stays
	// plain; table and column names follow SQL's rules (sqltext.ParseName).
	identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	envName    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// slackTeamID is a Slack workspace's ID: T and capitals or digits.
	slackTeamID = regexp.MustCompile(`^T[A-Z0-9]{2,31}$`)
	// partitionParam finds the :partition parameter but not ::partition (a
	// PostgreSQL cast) or :partition_key.
	partitionParam = regexp.MustCompile(`(^|[^:A-Za-z0-9_]):partition([^A-Za-z0-9_]|$)`)
)

// maxIdentifier is PostgreSQL's limit; longer names are silently truncated
// there, which could make two configured tables the same table.
const maxIdentifier = sqltext.MaxNameBytes

// converter turns raw structs into a refill.Config, recording every problem
// at the line of the key it concerns.
type converter struct {
	ix   *index
	errs *errorList
	// dir is the config file's directory, which datasets_from's paths
	// are relative to.
	dir string
	// nodes maps each imported dataset to its dbt node, for messages.
	nodes map[string]string
	// secretFiles are the secrets' files, which run.job_user must not
	// be able to read.
	secretFiles []secretPath
}

func (c *converter) errorf(path, format string, args ...any) {
	c.errs.add(c.ix.line(path), path, format, args...)
}

func (c *converter) config(raw *rawConfig) *refill.Config {
	cfg := &refill.Config{
		Warehouse:      raw.Warehouse,
		ProofWarehouse: raw.ProofWarehouse,
		Users:          map[string]refill.User{},
		Datasets:       map[string]*refill.Dataset{},
		MaxRangeDays:   refill.DefaultMaxRangeDays,
	}

	switch {
	case raw.Version == nil:
		c.errorf("version", "required: put version: 1 at the top of the file")
	case *raw.Version != 1:
		c.errorf("version", "unsupported version %d; this refill reads version 1", *raw.Version)
	}

	if raw.Warehouse == "" {
		c.errorf("warehouse", "required: give sqlite:PATH, duckdb:PATH or postgres://...")
	} else {
		c.storeURL("warehouse", raw.Warehouse)
	}
	c.state(cfg, raw)
	if raw.ProofWarehouse != "" {
		c.storeURL("proof_warehouse", raw.ProofWarehouse)
	}
	var imported []*refill.Dataset
	if raw.DatasetsFrom != nil {
		jobPath := refill.DefaultJobPath
		if raw.Run != nil && len(raw.Run.Path) > 0 {
			jobPath = strings.Join(raw.Run.Path, ":")
		}
		imported = c.datasetsFrom(raw.DatasetsFrom, jobPath)
	}
	if raw.MaxRangeDays != nil {
		if *raw.MaxRangeDays < 1 {
			c.errorf("max_range_days", "must be at least 1, got %d", *raw.MaxRangeDays)
		}
		cfg.MaxRangeDays = *raw.MaxRangeDays
	}

	cfg.Plan.DiffBudget = refill.DefaultDiffBudget
	if raw.Plan != nil && raw.Plan.DiffBudget != nil {
		if *raw.Plan.DiffBudget < 0 {
			c.errorf("plan.diff_budget", "must be 0 (no content diffs) or more rows, got %d", *raw.Plan.DiffBudget)
		}
		cfg.Plan.DiffBudget = *raw.Plan.DiffBudget
	}

	cfg.Audit = c.audit(raw.Audit)
	cfg.Run = c.run(raw.Run)
	cfg.Notify = c.notify(raw.Notify)
	cfg.OpenLineage = c.openLineageOut(raw.OpenLineage)
	cfg.Watch.Interval = refill.Duration(defaultWatchInterval)
	if raw.Watch != nil && raw.Watch.Interval != "" {
		cfg.Watch.Interval = refill.Duration(c.duration("watch.interval", raw.Watch.Interval))
		if time.Duration(cfg.Watch.Interval) < time.Second {
			c.errorf("watch.interval", "must be at least 1s, got %s", raw.Watch.Interval)
		}
	}
	if raw.Server != nil && raw.Server.PublicURL != "" {
		c.httpURL("server.public_url", raw.Server.PublicURL)
		cfg.Server.PublicURL = strings.TrimRight(raw.Server.PublicURL, "/")
	}
	cfg.Policy = c.policy(raw.Policy)
	cfg.Housekeeping = refill.DefaultHousekeeping()
	cfg.AcceptLeadTags = slices.Clone(cfg.Policy.ManualTags)
	if raw.Policy != nil && raw.Policy.AcceptLeadTags != nil {
		cfg.AcceptLeadTags = nonNil(*raw.Policy.AcceptLeadTags)
	}
	if raw.Policy != nil && raw.Policy.PlanTTL != nil {
		cfg.Housekeeping.PlanTTL = refill.Duration(c.days("policy.plan_ttl", *raw.Policy.PlanTTL))
	}
	if raw.Policy != nil && raw.Policy.SnapshotTTL != nil {
		cfg.Housekeeping.SnapshotTTL = refill.Duration(c.days("policy.snapshot_ttl", *raw.Policy.SnapshotTTL))
	}
	for _, name := range sortedKeys(raw.Users) {
		cfg.Users[name] = c.user(name, raw.Users[name])
	}
	for _, name := range sortedKeys(raw.Datasets) {
		cfg.Datasets[name] = c.dataset(name, raw.Datasets[name])
	}
	c.merge(cfg, imported)
	c.lineage(cfg)
	c.openLineageNames(cfg)
	c.sealCommands(cfg)
	c.jobsNameNoSecret(cfg)
	if raw.Run != nil && raw.Run.JobUser != nil {
		cfg.Run.JobUser = c.jobUser(cfg, *raw.Run.JobUser)
	}
	return cfg
}

// storeURL checks the shape of a warehouse or state store location. Opening
// it is the drivers' business; catching "postgress://" here saves a
// confusing driver error later.
func (c *converter) storeURL(path, s string) {
	switch {
	case strings.HasPrefix(s, "sqlite:"):
		if strings.TrimPrefix(s, "sqlite:") == "" {
			c.errorf(path, "sqlite: needs a file path, as in sqlite:warehouse.db")
		}
	case strings.HasPrefix(s, "duckdb:") && path != "state":
		if strings.TrimPrefix(s, "duckdb:") == "" {
			c.errorf(path, "duckdb: needs a file path, as in duckdb:warehouse.duckdb")
		}
	case strings.HasPrefix(s, "postgres://"), strings.HasPrefix(s, "postgresql://"):
		if _, err := url.Parse(s); err != nil {
			c.errorf(path, "not a valid PostgreSQL URL: %v", unwrapURLError(err))
		}
	default:
		if path == "state" {
			c.errorf(path, "%q is neither sqlite:PATH nor postgres://...", clip(s))
		} else {
			c.errorf(path, "%q is none of sqlite:PATH, duckdb:PATH and postgres://...", clip(s))
		}
	}
}

func (c *converter) run(raw *rawRun) refill.RunConfig {
	r := refill.DefaultRunConfig()
	if raw == nil {
		return r
	}
	if raw.Backoff != nil {
		d, err := time.ParseDuration(*raw.Backoff)
		switch {
		case err != nil:
			c.errorf("run.backoff", "%q is not a duration (e.g. 1s, 500ms)", clip(*raw.Backoff))
		case d <= 0:
			c.errorf("run.backoff", "must be positive, got %s", d)
		default:
			r.Backoff = refill.Duration(d)
		}
	}
	if raw.RescueAfter != nil {
		d, err := time.ParseDuration(*raw.RescueAfter)
		switch {
		case err != nil:
			c.errorf("run.rescue_after", "%q is not a duration (e.g. 10m)", clip(*raw.RescueAfter))
		case d < time.Second:
			c.errorf("run.rescue_after", "must be at least 1s, got %s", d)
		default:
			r.RescueAfter = refill.Duration(d)
		}
	}
	if raw.Path != nil {
		ok := len(raw.Path) > 0
		for i, dir := range raw.Path {
			if !filepath.IsAbs(dir) || strings.ContainsAny(dir, ":\x00") {
				c.errorf(elem("run.path", i), "%q is not an absolute directory: a job's PATH holds only absolute directories, so that nothing is found where the job runs", clip(dir))
				ok = false
			}
		}
		if len(raw.Path) == 0 {
			c.errorf("run.path", "is empty: list the directories command jobs find their programs in, or leave it out for %s", refill.DefaultJobPath)
		}
		if ok {
			r.Path = strings.Join(raw.Path, ":")
		}
	}
	if raw.OutagePatience != nil {
		d, err := time.ParseDuration(*raw.OutagePatience)
		switch {
		case err != nil:
			c.errorf("run.outage_patience", "%q is not a duration (e.g. 2m)", clip(*raw.OutagePatience))
		case d < 0:
			c.errorf("run.outage_patience", "must be 0 (fail at once) or more, got %s", d)
		default:
			r.OutagePatience = refill.Duration(d)
		}
	}
	if raw.Tolerance != nil {
		if *raw.Tolerance < 0 || math.IsNaN(*raw.Tolerance) || math.IsInf(*raw.Tolerance, 0) {
			c.errorf("run.tolerance", "must be a fraction of 0 or more (0.1 is 10%%), got %v", *raw.Tolerance)
		} else {
			r.Tolerance = *raw.Tolerance
		}
	}
	set := func(key string, v *int, dst *int) {
		if v == nil {
			return
		}
		if *v < 1 {
			c.errorf(child("run", key), "must be at least 1, got %d", *v)
		}
		*dst = *v
	}
	set("max_active", raw.MaxActive, &r.MaxActive)
	set("max_active_total", raw.MaxActiveTotal, &r.MaxActiveTotal)
	set("attempts", raw.Attempts, &r.Attempts)
	if r.MaxActive > r.MaxActiveTotal && r.MaxActiveTotal >= 1 {
		c.errorf("run.max_active", "max_active %d is more than max_active_total %d", r.MaxActive, r.MaxActiveTotal)
	}
	return r
}

func (c *converter) notify(raw *rawNotify) refill.NotifyConfig {
	if raw == nil {
		return refill.NotifyConfig{}
	}
	if s := raw.Slack; s != nil {
		c.secret("notify.slack", "webhook_url", s.WebhookURLEnv, s.WebhookURLFile)
		c.secret("notify.slack", "signing_secret", s.SigningSecretEnv, s.SigningSecretFile)
		c.secret("notify.slack", "bot_token", s.BotTokenEnv, s.BotTokenFile)
		if (s.BotTokenEnv != "" || s.BotTokenFile != "") && s.Channel == "" {
			c.errorf("notify.slack.channel", "required with bot_token_env (or bot_token_file): the channel the bot posts to")
		}
		if s.APIURL != "" {
			c.httpURL("notify.slack.api_url", s.APIURL)
		}
		if s.TeamID != "" && !slackTeamID.MatchString(s.TeamID) {
			c.errorf("notify.slack.team_id", "%q is not a Slack team ID: want T and capital letters or digits, as in T0123ABCD (the workspace's ID, not its name or domain)", clip(s.TeamID))
		}
	}
	for i, w := range raw.Webhooks {
		p := elem("notify.webhooks", i)
		if w.URL == "" {
			c.errorf(child(p, "url"), "required")
		} else {
			c.httpURL(child(p, "url"), w.URL)
		}
		c.secret(p, "secret", w.SecretEnv, w.SecretFile)
	}
	return notifyOf(raw)
}

// notifyOf is the notify: section as written.
func notifyOf(raw *rawNotify) refill.NotifyConfig {
	var n refill.NotifyConfig
	if raw == nil {
		return n
	}
	if s := raw.Slack; s != nil {
		n.Slack = &refill.SlackConfig{WebhookURLEnv: s.WebhookURLEnv, WebhookURLFile: s.WebhookURLFile,
			SigningSecretEnv: s.SigningSecretEnv, SigningSecretFile: s.SigningSecretFile,
			BotTokenEnv: s.BotTokenEnv, BotTokenFile: s.BotTokenFile, Channel: s.Channel, APIURL: s.APIURL, TeamID: s.TeamID}
	}
	for _, w := range raw.Webhooks {
		n.Webhooks = append(n.Webhooks, refill.WebhookConfig{URL: w.URL, SecretEnv: w.SecretEnv, SecretFile: w.SecretFile})
	}
	return n
}

func (c *converter) httpURL(path, s string) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		c.errorf(path, "not a valid URL: %v", unwrapURLError(err))
	case u.Scheme != "http" && u.Scheme != "https":
		c.errorf(path, "want an http:// or https:// URL, got %q", clip(s))
	case u.Host == "":
		c.errorf(path, "URL %q has no host", clip(s))
	}
}

func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

func (c *converter) policy(raw *rawPolicy) refill.Policy {
	p := refill.DefaultPolicy()
	if raw == nil {
		return p
	}
	if raw.AutoMaxDays != nil {
		p.AutoMaxDays = *raw.AutoMaxDays
		if p.AutoMaxDays < 0 {
			c.errorf("policy.auto_max_days", "must be 0 or more, got %d", p.AutoMaxDays)
		}
	}
	if raw.ManualOverDays != nil {
		p.ManualOverDays = *raw.ManualOverDays
		if p.ManualOverDays < 1 {
			c.errorf("policy.manual_over_days", "must be at least 1, got %d", p.ManualOverDays)
		}
	}
	if p.AutoMaxDays > p.ManualOverDays && p.ManualOverDays >= 1 {
		// Report at whichever key the user wrote, so the line is theirs.
		key := "policy.auto_max_days"
		if raw.AutoMaxDays == nil {
			key = "policy.manual_over_days"
		}
		c.errorf(key, "auto_max_days %d is more than manual_over_days %d: a range could be both auto and manual", p.AutoMaxDays, p.ManualOverDays)
	}
	if raw.ManualTags != nil {
		p.ManualTags = nonNil(*raw.ManualTags)
	}
	if raw.AggregateTags != nil {
		p.AggregateTags = nonNil(*raw.AggregateTags)
	}
	seen := map[string]int{}
	for i, r := range raw.Rules {
		path := elem("policy.rules", i)
		switch {
		case r.Name == "":
			c.errorf(child(path, "name"), "required: every rule needs a name, which plans cite as the reason for their tier")
		case seen[r.Name] > 0:
			c.errorf(child(path, "name"), "rule %q is already defined at line %d", r.Name, seen[r.Name])
		default:
			seen[r.Name] = c.ix.line(child(path, "name"))
		}
		if strings.TrimSpace(r.When) == "" {
			c.errorf(child(path, "when"), "required: a CEL expression saying when the rule applies")
		} else if err := policy.CheckExpr(r.When); err != nil {
			c.errorf(child(path, "when"), "%q %s (variables: request.{targets,from,to,days,reason,requested_by}, datasets, tags, tier)", clip(r.When), err)
		}
		switch refill.Tier(r.Tier) {
		case refill.TierAuto:
			c.errorf(child(path, "tier"), "a rule may only raise a tier, and auto raises nothing: want semi-auto or manual")
		case refill.TierSemiAuto, refill.TierManual:
		case "":
			c.errorf(child(path, "tier"), "required: one of auto, semi-auto, manual")
		default:
			c.errorf(child(path, "tier"), "unknown tier %q: want auto, semi-auto or manual", clip(r.Tier))
		}
		p.Rules = append(p.Rules, refill.Rule{Name: r.Name, When: r.When, Tier: refill.Tier(r.Tier), Reason: r.Reason})
	}
	return p
}

func (c *converter) user(name string, raw *rawUser) refill.User {
	path := child("users", name)
	u := refill.User{Name: name}
	if raw == nil {
		raw = &rawUser{}
	}
	if strings.TrimSpace(name) == "" {
		c.errorf(path, "a user needs a name")
	}
	if refill.Reserved(name) {
		c.errorf(path, "%q is refill's own identity (the watcher, or refill resuming runs nobody holds, acts as it) and cannot be a user", name)
	}
	if len(raw.Roles) == 0 {
		c.errorf(path, "user %s has no roles: give roles: [engineer] or [lead]", name)
	}
	for i, r := range raw.Roles {
		if !slices.Contains(knownRoles, r) {
			c.errorf(elem(child(path, "roles"), i), "unknown role %q %s", clip(r), known(r, knownRoles, len(knownRoles)))
		}
	}
	u.Roles = nonNil(raw.Roles)
	u.Slack = raw.Slack
	return u
}

func (c *converter) dataset(name string, raw *rawDataset) *refill.Dataset {
	path := child("datasets", name)
	if raw == nil {
		raw = &rawDataset{}
	}
	d := &refill.Dataset{
		Name:     name,
		Table:    raw.Table,
		Upstream: raw.Upstream,
		Tags:     raw.Tags,
		Line:     c.ix.line(path),
	}
	if !identifier.MatchString(name) || len(name) > maxIdentifier {
		c.errorf(path, "dataset name %q must be a plain identifier (letters, digits and _, not starting with a digit, at most %d characters)", clip(name), maxIdentifier)
	}

	d.Job = c.job(path, raw.Job)
	lineageOnly := raw.LineageOnly != nil
	if lineageOnly {
		c.lineageOnly(path, raw, d)
	}

	switch {
	case lineageOnly && raw.Table == "":
		// Lineage only: the table is optional (an ephemeral model has
		// none), since refill neither reads nor writes it.
	case raw.Table == "" && raw.Job != nil && d.Job == nil:
		// The job's own error says what is missing; whether a table is
		// needed depends on the kind the user meant.
	case raw.Table == "" && (d.Job == nil || d.Job.Kind == refill.JobQuery || d.Job.Kind == refill.JobSQL):
		what := "a source"
		if d.Job != nil {
			what = "a " + string(d.Job.Kind) + " job"
		}
		c.errorf(child(path, "table"), "required for %s: name the table refill reads and writes", what)
	case raw.Table != "":
		c.table(child(path, "table"), raw.Table)
	}

	d.Partition = refill.PartitionSpec{Grain: refill.GrainDay}
	if rp := raw.Partition; rp != nil {
		d.Partition.Column = rp.Column
		if rp.Grain != "" {
			d.Partition.Grain = refill.Grain(rp.Grain)
		}
		if tz := rp.Timezone; tz != nil {
			switch _, err := refill.LoadZone(*tz); {
			case *tz == "" || err != nil:
				c.errorf(child(path, "partition", "timezone"), "unknown timezone %q: want an IANA name such as Europe/Berlin or America/New_York", clip(*tz))
			case *tz != "UTC":
				// UTC is the default: written or not, the same dataset.
				d.Partition.Timezone = *tz
			}
		}
	}
	switch col := d.Partition.Column; {
	case col == "" && raw.Table != "" && !lineageOnly:
		c.errorf(child(path, "partition", "column"), "required: name the column that holds the partition date, as in partition: {column: day}")
	case col != "":
		c.column(child(path, "partition", "column"), col)
	}
	c.grain(child(path, "partition", "grain"), d.Partition.Grain)

	if raw.Checks != nil {
		switch {
		case raw.Table == "":
			c.errorf(child(path, "checks"), "checks need a table to scan; this dataset has none")
		case lineageOnly && d.Partition.Column == "":
			c.errorf(child(path, "checks"), "checks scan partitions; give this lineage-only dataset a partition: {column: ...}")
		}
		d.Checks = c.checks(child(path, "checks"), raw.Checks)
	}
	if raw.Schedule != nil {
		d.Schedule = c.schedule(child(path, "schedule"), raw.Schedule, d.Partition.Grain)
	}
	d.OpenLineage = c.openLineageName(child(path, "openlineage"), raw.OpenLineage)
	if raw.Key != nil {
		if len(raw.Key) == 0 {
			c.errorf(child(path, "key"), "list the columns that identify a row within a partition, as in key: [order_id]")
		}
		seen := map[string]bool{}
		for i, col := range raw.Key {
			c.column(elem(child(path, "key"), i), col)
			if seen[col] {
				c.errorf(elem(child(path, "key"), i), "column %s is listed twice", written(col))
			}
			seen[col] = true
		}
		d.Key = raw.Key
	}
	for i, col := range raw.Private {
		c.column(elem(child(path, "private"), i), col)
	}
	d.Private = raw.Private
	if (raw.Key != nil || raw.Private != nil) && raw.Table == "" {
		c.errorf(child(path, "key"), "key and private describe a table's rows; this dataset has no table")
	}
	return d
}

// table checks a table name that the warehouse driver will quote into
// SQL: name or schema.name, each part plain or in double quotes, written as
// SQL writes it (sqltext.ParseName). The config keeps it as written; each
// driver folds it as its engine folds SQL (sqltext.Dialect.QuoteName), so
// that a name means in refill.yaml what it means in the user's own SQL.
func (c *converter) table(path, table string) {
	parts, err := sqltext.ParseName(table)
	switch {
	case err != nil:
		c.errorf(path, "table %s %v", written(table), err)
	case len(parts) > 2:
		c.errorf(path, "table %s has %d parts; write name or schema.name", written(table), len(parts))
	}
}

// column checks a column name that the warehouse driver will quote into
// SQL: one part, plain or in double quotes, as table's parts are.
func (c *converter) column(path, col string) {
	parts, err := sqltext.ParseName(col)
	switch {
	case err != nil:
		c.errorf(path, "column %s %v", written(col), err)
	case len(parts) > 1:
		c.errorf(path, "column %s must be one name, not qualified with a dot (a quoted name cannot hold a dot either)", written(col))
	}
}

// written shows a table or column name as the file has it: in double
// quotes for Go's escapes, or, when it holds double quotes itself, in the
// single quotes that YAML needs around it.
func written(name string) string {
	name = clip(name)
	if strings.Contains(name, `"`) && !strings.ContainsAny(name, "'\n\r\t") {
		return "'" + name + "'"
	}
	return fmt.Sprintf("%q", name)
}

func (c *converter) grain(path string, g refill.Grain) {
	if g != refill.GrainDay && g != refill.GrainHour {
		c.errorf(path, "unknown grain %q: want day or hour", clip(string(g)))
	}
}

// ratio checks a share of rows, which must lie in [0, 1].
func (c *converter) ratio(path string, v *float64) float64 {
	if v == nil {
		return 0
	}
	if math.IsNaN(*v) || *v < 0 || *v > 1 {
		c.errorf(path, "must be a ratio between 0 and 1, got %g", *v)
	}
	return *v
}

func (c *converter) checks(path string, raw *rawChecks) *refill.Checks {
	ch := &refill.Checks{NoFuture: raw.NoFuture}
	if nn := raw.NotNull; nn != nil {
		p := child(path, "not_null")
		if len(nn.Columns) == 0 {
			c.errorf(child(p, "columns"), "required: list the columns that must not be null")
		}
		for i, col := range nn.Columns {
			c.column(elem(child(p, "columns"), i), col)
		}
		ch.NotNull = &refill.NotNullCheck{Columns: nn.Columns, MaxRatio: c.ratio(child(p, "max_ratio"), nn.MaxRatio)}
	}
	if v := raw.Volume; v != nil {
		p := child(path, "volume")
		ch.Volume = &refill.VolumeCheck{Lookback: defaultLookback, MaxZ: defaultMaxZ}
		if v.Lookback != nil {
			ch.Volume.Lookback = *v.Lookback
			if *v.Lookback < 1 {
				c.errorf(child(p, "lookback"), "must be at least 1 day, got %d", *v.Lookback)
			}
		}
		if v.MaxZ != nil {
			ch.Volume.MaxZ = *v.MaxZ
			if !(*v.MaxZ > 0) {
				c.errorf(child(p, "max_z"), "must be more than 0, got %g", *v.MaxZ)
			}
		}
		if v.MinChange != nil {
			ch.Volume.MinChange = *v.MinChange
			if !(*v.MinChange > 0 && *v.MinChange <= 10) {
				c.errorf(child(p, "min_change"), "must be a relative change above 0 (0.10 is ten per cent), got %g", *v.MinChange)
			}
		}
		for i, day := range v.Calendar {
			if err := refill.ParseCalendarDay(day); err != nil {
				c.errorf(elem(child(p, "calendar"), i), "%q is not a calendar day: want YYYY-MM-DD for one date or MM-DD for a day every year", clip(day))
				continue
			}
			if !slices.Contains(ch.Volume.Calendar, day) {
				ch.Volume.Calendar = append(ch.Volume.Calendar, day)
			}
		}
		// In one order, so that a plan sealed with the same days in
		// another order is not stale.
		slices.Sort(ch.Volume.Calendar)
	}
	for i, to := range raw.TimeOrder {
		p := elem(child(path, "time_order"), i)
		for _, side := range []struct{ key, col string }{{"earlier", to.Earlier}, {"later", to.Later}} {
			if side.col == "" {
				c.errorf(child(p, side.key), "required: time_order compares two timestamp columns")
			} else {
				c.column(child(p, side.key), side.col)
			}
		}
		ch.TimeOrder = append(ch.TimeOrder, refill.TimeOrderCheck{Earlier: to.Earlier, Later: to.Later})
	}
	for i, col := range raw.NoFuture {
		c.column(elem(child(path, "no_future"), i), col)
	}
	ch.MaxRatio = c.ratio(child(path, "max_ratio"), raw.MaxRatio)
	if raw.Unique != nil {
		if len(raw.Unique) == 0 {
			c.errorf(child(path, "unique"), "list the columns that together are a key within a partition, as in unique: [event_id]")
		}
		for i, col := range raw.Unique {
			c.column(elem(child(path, "unique"), i), col)
		}
		ch.Unique = raw.Unique
	}
	if raw.AcceptedValues != nil {
		ch.AcceptedValues = c.acceptedValues(child(path, "accepted_values"), raw.AcceptedValues)
	}
	if d := raw.Drift; d != nil {
		p := child(path, "drift")
		ch.Drift = &refill.DriftCheck{Columns: d.Columns, Lookback: defaultLookback, MaxZ: defaultDriftMaxZ}
		if len(d.Columns) == 0 {
			c.errorf(child(p, "columns"), "required: list the columns whose profile is scored against history")
		}
		for i, col := range d.Columns {
			c.column(elem(child(p, "columns"), i), col)
		}
		if d.Lookback != nil {
			ch.Drift.Lookback = *d.Lookback
			if *d.Lookback < 1 {
				c.errorf(child(p, "lookback"), "must be at least 1 day, got %d", *d.Lookback)
			}
		}
		if d.MaxZ != nil {
			ch.Drift.MaxZ = *d.MaxZ
			if !(*d.MaxZ > 0) {
				c.errorf(child(p, "max_z"), "must be more than 0, got %g", *d.MaxZ)
			}
		}
	}
	return ch
}

// acceptedValues reads accepted_values in either form: {col: [v, ...]}, or
// {columns: {col: [v, ...]}, max_ratio: r} when a ratio is given (a column
// named columns or max_ratio needs the second form).
func (c *converter) acceptedValues(path string, raw any) *refill.AcceptedValuesCheck {
	const want = "want {column: [value, ...]} or {columns: {column: [value, ...]}, max_ratio: 0.001}"
	m, ok := raw.(map[string]any)
	if !ok || len(m) == 0 {
		c.errorf(path, "%s, got %s", want, describeValue(raw))
		return nil
	}
	av := &refill.AcceptedValuesCheck{}
	cols, colsPath := m, path
	if inner, ok := m["columns"]; ok {
		colsPath = child(path, "columns")
		for k, v := range m {
			switch k {
			case "columns":
			case "max_ratio":
				f, ok := number(v)
				if !ok {
					c.errorf(child(path, k), "want a ratio between 0 and 1, got %s", describeValue(v))
					continue
				}
				av.MaxRatio = c.ratio(child(path, k), &f)
			default:
				c.errorf(child(path, k), "unknown field %q (known: columns, max_ratio)", k)
			}
		}
		if cols, ok = inner.(map[string]any); !ok || len(cols) == 0 {
			c.errorf(colsPath, "want {column: [value, ...]}, got %s", describeValue(inner))
			return av
		}
	} else if _, ok := m["max_ratio"]; ok {
		c.errorf(child(path, "max_ratio"), "a ratio needs the columns beside it: accepted_values: {columns: {column: [value, ...]}, max_ratio: 0.001}")
		return av
	}
	for _, col := range slices.Sorted(maps.Keys(cols)) {
		p := child(colsPath, col)
		c.column(p, col)
		list, ok := cols[col].([]any)
		if !ok || len(list) == 0 {
			c.errorf(p, "want a list of the values %s may hold, got %s", col, describeValue(cols[col]))
			continue
		}
		vals := make([]string, 0, len(list))
		for i, v := range list {
			switch v := v.(type) {
			case string:
				vals = append(vals, v)
			case int, int64, uint64:
				vals = append(vals, fmt.Sprint(v))
			default:
				c.errorf(elem(p, i), "want text or a whole number, got %s", describeValue(v))
			}
		}
		av.Columns = append(av.Columns, refill.AcceptedValues{Column: col, Values: vals})
	}
	return av
}

// number reads a YAML number decoded into an untyped value.
func number(v any) (float64, bool) {
	switch v := v.(type) {
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	case uint64:
		return float64(v), true
	case float64:
		return v, !math.IsNaN(v) && !math.IsInf(v, 0)
	}
	return 0, false
}

// describeValue names the shape of an untyped YAML value for an error.
func describeValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "nothing"
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return fmt.Sprintf("text %q", clip(v))
	case bool:
		return fmt.Sprintf("%t", v)
	}
	return fmt.Sprintf("%v", v)
}

func (c *converter) schedule(path string, raw *rawSchedule, grain refill.Grain) *refill.Schedule {
	s := &refill.Schedule{Every: grain, Horizon: defaultHorizon}
	if raw.Every != "" {
		s.Every = refill.Grain(raw.Every)
		c.grain(child(path, "every"), s.Every)
		if s.Every != grain && (s.Every == refill.GrainDay || s.Every == refill.GrainHour) {
			c.errorf(child(path, "every"), "%s, but the dataset's partitions are by %s: the watcher looks for one partition per %s", s.Every, grain, grain)
		}
	}
	if raw.Lag != "" {
		s.Lag = refill.Duration(c.duration(child(path, "lag"), raw.Lag))
	}
	if raw.Horizon != nil {
		s.Horizon = *raw.Horizon
		if *raw.Horizon < 1 || *raw.Horizon > maxHorizon {
			c.errorf(child(path, "horizon"), "must be from 1 to %d days, got %d", maxHorizon, *raw.Horizon)
		}
	}
	return s
}

// days reads a housekeeping period: a Go duration (168h) or whole days
// (7d), which is how people say it; it must be positive.
func (c *converter) days(path, s string) time.Duration {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		if d, err := strconv.Atoi(n); err == nil {
			if d < 1 {
				c.errorf(path, "must be at least 1d, got %s", s)
			}
			return time.Duration(d) * 24 * time.Hour
		}
	}
	d := c.duration(path, s)
	if d == 0 {
		c.errorf(path, "must be more than 0")
	}
	return d
}

func (c *converter) duration(path, s string) time.Duration {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		c.errorf(path, "%q is not a duration: write it like 30m, 2h or 1h30m", clip(s))
	case d < 0:
		c.errorf(path, "must not be negative, got %s", s)
	}
	return d
}

// job reads the one job kind of a dataset. It returns nil for a source, and a
// best-effort Job when there are errors so that later checks (table required
// for query jobs, say) still run and report.
func (c *converter) job(path string, raw *rawJob) *refill.Job {
	if raw == nil {
		return nil
	}
	path = child(path, "job")
	var kinds []string
	if raw.Query != nil {
		kinds = append(kinds, string(refill.JobQuery))
	}
	if raw.SQL != nil {
		kinds = append(kinds, string(refill.JobSQL))
	}
	if raw.Command != nil {
		kinds = append(kinds, string(refill.JobCommand))
	}
	if raw.Airflow != nil {
		kinds = append(kinds, string(refill.JobAirflow))
	}
	switch len(kinds) {
	case 0:
		c.errorf(path, "job names no kind: give one of query, sql, command or airflow (or remove job: to make the dataset a source)")
		return nil
	case 1:
	default:
		c.errorf(path, "job has both %s and %s: a job is exactly one kind", kinds[0], kinds[1])
	}

	j := &refill.Job{Kind: refill.JobKind(kinds[0])}
	if raw.Timeout != "" {
		j.Timeout = refill.Duration(c.duration(child(path, "timeout"), raw.Timeout))
	}
	if raw.Env != nil && j.Kind != refill.JobCommand {
		c.errorf(child(path, "env"), "env applies only to command jobs")
	}
	if raw.DbtProject != "" && j.Kind != refill.JobCommand {
		c.errorf(child(path, "dbt_project"), "dbt_project applies only to command jobs that run dbt")
	}
	if raw.Files != nil && j.Kind != refill.JobCommand {
		c.errorf(child(path, "files"), "files applies only to command jobs: it lists what the command sources or imports, to seal with it")
	}
	if raw.Checksum != "" {
		if j.Kind != refill.JobCommand {
			c.errorf(child(path, "checksum"), "checksum applies only to command jobs: it stands for what the command builds that refill cannot read (a dbt model's SQL)")
		}
		j.Checksum = raw.Checksum
	}
	if raw.SideEffects != nil {
		if *raw.SideEffects && (j.Kind == refill.JobQuery || j.Kind == refill.JobSQL) {
			c.errorf(child(path, "side_effects"), "a %s job writes only inside the warehouse transaction refill owns; side_effects applies to command and airflow jobs", j.Kind)
		}
		j.SideEffects = *raw.SideEffects
	}
	switch j.Kind {
	case refill.JobQuery:
		j.Query = *raw.Query
		c.partitionParam(child(path, "query"), j.Query, "a query job selects one partition's rows")
	case refill.JobSQL:
		j.SQL = *raw.SQL
		c.partitionParam(child(path, "sql"), j.SQL, "sql statements rebuild one partition")
	case refill.JobCommand:
		j.Command = *raw.Command
		if len(j.Command) == 0 || j.Command[0] == "" {
			c.errorf(child(path, "command"), `want a non-empty argv list, as in ["./export.sh", "{{partition}}"]`)
		}
		j.Env = c.jobEnv(child(path, "env"), raw.Env)
		j.Files = c.jobFiles(child(path, "files"), raw.Files)
		j.DbtProject = raw.DbtProject
		if raw.ProofCommand != nil {
			j.ProofCommand = raw.ProofCommand
			switch {
			case len(j.ProofCommand) == 0 || j.ProofCommand[0] == "":
				c.errorf(child(path, "proof_command"), "want a non-empty argv list, the command with what points it at the proof warehouse")
			case len(j.Command) > 0 && j.ProofCommand[0] != j.Command[0]:
				// The program is sealed from command: another one would
				// run unsealed in every proof.
				c.errorf(child(path, "proof_command"), "runs %s, but command runs %s: a proof must run the same program", clip(j.ProofCommand[0]), clip(j.Command[0]))
			}
		}
	case refill.JobAirflow:
		j.Airflow = c.airflow(child(path, "airflow"), raw.Airflow)
	}
	if raw.ProofCommand != nil && j.Kind != refill.JobCommand {
		c.errorf(child(path, "proof_command"), "applies to command jobs, not %s jobs", j.Kind)
	}
	return j
}

func (c *converter) partitionParam(path, text, why string) {
	switch {
	case strings.TrimSpace(text) == "":
		c.errorf(path, "is empty")
	case !partitionParam.MatchString(text):
		c.errorf(path, "does not use :partition; %s, and without it every run rewrites everything", why)
	}
}

// jobEnv accepts a command's extra environment either as a mapping
// {NAME: value}, the natural YAML, or as a list whose entries are NAME=value
// (a fixed value) or a bare NAME (passed through from refill's own
// environment when the job runs: docs/design.md §6). Command jobs see nothing
// else of refill's environment but PATH, HOME and REFILL_*. The mapping is
// sorted so the job fingerprint does not depend on map order.
func (c *converter) jobEnv(path string, raw any) []string {
	var env []string
	switch v := raw.(type) {
	case nil:
	case map[string]any:
		for _, name := range sortedKeys(v) {
			p := child(path, name)
			if !envName.MatchString(name) {
				c.errorf(p, "%q is not an environment variable name", clip(name))
			}
			val := v[name]
			switch val.(type) {
			case map[string]any, []any:
				c.errorf(p, "want a single value")
			case nil:
				val = ""
			}
			env = append(env, name+"="+fmt.Sprint(val))
		}
	case []any:
		for i, e := range v {
			s, ok := e.(string)
			name, _, _ := strings.Cut(s, "=")
			if !ok || !envName.MatchString(name) {
				c.errorf(elem(path, i), "want NAME (passed through from refill's environment) or NAME=value")
				continue
			}
			env = append(env, s)
		}
	default:
		c.errorf(path, "want a mapping of NAME: value")
	}
	return env
}

func (c *converter) airflow(path string, raw *rawAirflow) *refill.AirflowJob {
	a := &refill.AirflowJob{
		URL: raw.URL, DagID: raw.DagID, API: raw.API,
		UsernameEnv: raw.UsernameEnv, PasswordEnv: raw.PasswordEnv,
		UsernameFile: raw.UsernameFile, PasswordFile: raw.PasswordFile,
	}
	if a.URL == "" {
		c.errorf(child(path, "url"), "required: the Airflow web server's base URL")
	} else {
		c.httpURL(child(path, "url"), a.URL)
	}
	if a.DagID == "" {
		c.errorf(child(path, "dag_id"), "required: the DAG to trigger")
	}
	switch a.API {
	case "":
		a.API = defaultAirflowAPI
	case "v1", "v2":
	default:
		c.errorf(child(path, "api"), "unknown Airflow API %q: want v1 or v2", clip(a.API))
	}
	c.secret(path, "username", a.UsernameEnv, a.UsernameFile)
	c.secret(path, "password", a.PasswordEnv, a.PasswordFile)
	if a.Username("").IsSet() != a.Password("").IsSet() {
		c.errorf(path, "give both username_env and password_env (or their _file keys), or neither")
	}
	if raw.Poll != "" {
		d, err := time.ParseDuration(raw.Poll)
		if err != nil || d <= 0 {
			c.errorf(child(path, "poll"), "%q is not a positive duration (e.g. 5s)", clip(raw.Poll))
		} else {
			a.Poll = refill.Duration(d)
		}
	}
	return a
}

// lineage checks the upstream edges across datasets: every upstream must be
// a known dataset other than itself, no two datasets may write one table, and
// the graph must be acyclic, since the planner orders rebuilds topologically.
func (c *converter) lineage(cfg *refill.Config) {
	names := cfg.DatasetNames()
	tables := map[string]string{} // table as the warehouse resolves it -> first dataset (by line)
	byLine := slices.Clone(names)
	sort.SliceStable(byLine, func(i, j int) bool { return cfg.Datasets[byLine[i]].Line < cfg.Datasets[byLine[j]].Line })
	for _, name := range byLine {
		d := cfg.Datasets[name]
		if d.Table == "" {
			continue
		}
		key := tableKey(cfg.Warehouse, d.Table)
		if other, ok := tables[key]; ok {
			c.errorf(child("datasets", name, "table"), "table %q is also the table of dataset %s (line %d); two datasets cannot write one table", d.Table, other, cfg.Datasets[other].Line)
			continue
		}
		tables[key] = name
	}

	for _, name := range names {
		d := cfg.Datasets[name]
		path := child("datasets", name, "upstream")
		seen := map[string]bool{}
		for i, up := range d.Upstream {
			p := elem(path, i)
			line := c.ix.line(p)
			switch {
			case up == name:
				c.errs.add(line, path, "dataset %s lists itself as upstream", name)
			case cfg.Datasets[up] == nil:
				others := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == name })
				c.errs.add(line, path, "unknown dataset %q %s", clip(up), known(up, others, 5))
			case seen[up]:
				c.errs.add(line, path, "%s is listed twice", up)
			}
			seen[up] = true
		}
	}

	for _, cycle := range lineage.Cycles(cfg.Datasets) {
		first := cycle[0]
		c.errorf(child("datasets", first, "upstream"), "cycle: %s", strings.Join(cycle, " -> "))
	}
}

// tableKey is the table a configured name means in warehouse, in one
// spelling for every name that means it, so that two datasets writing one
// table are caught however each writes its name. It follows the engine's
// own rule (sqltext.Dialect.Resolve): on PostgreSQL a plain name folds to
// lower case and a quoted one keeps its case, so Events and events are one
// table and "Events" is another; SQLite ignores ASCII case in names, quoted
// or not, so there all three are one. The default schema, named, is the
// same table as unnamed: SQLite's main, PostgreSQL's public (where refill's
// warehouses look first).
func tableKey(warehouse, table string) string {
	if strings.HasPrefix(warehouse, "postgres") {
		parts := sqltext.Postgres.Resolve(table)
		if len(parts) == 2 && parts[0] == "public" {
			parts = parts[1:]
		}
		return strings.Join(parts, ".")
	}
	key := strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, strings.Join(sqltext.SQLite.Resolve(table), "."))
	if rest, ok := strings.CutPrefix(key, "main."); ok {
		return rest
	}
	return key
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// nonNil keeps an explicitly empty list empty rather than absent, so that
// "manual_tags: []" survives a JSON round trip as [] and never reads as
// "not configured".
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// openLineageOut checks the openlineage: section: where refill sends the
// OpenLineage events of its runs.
func (c *converter) openLineageOut(raw *rawOpenLineageOut) *refill.OpenLineageConfig {
	if raw == nil {
		return nil
	}
	if raw.URL == "" {
		c.errorf("openlineage.url", "required: the OpenLineage HTTP endpoint's base, as in http://marquez:5000")
	} else {
		c.httpURL("openlineage.url", raw.URL)
	}
	endpoint := raw.Endpoint
	if endpoint == "" {
		endpoint = refill.DefaultOpenLineageEndpoint
	}
	if strings.Contains(endpoint, "://") || strings.ContainsAny(endpoint, "?# ") {
		c.errorf("openlineage.endpoint", "want a path such as %s, got %q", refill.DefaultOpenLineageEndpoint, clip(endpoint))
	}
	c.secret("openlineage", "api_key", raw.APIKeyEnv, raw.APIKeyFile)
	ns := raw.Namespace
	if ns == "" {
		ns = refill.DefaultOpenLineageNamespace
	}
	if len(ns) > maxOpenLineageName || strings.TrimSpace(ns) != ns || ns == "" {
		c.errorf("openlineage.namespace", "want a namespace of up to %d bytes without surrounding space, got %q", maxOpenLineageName, clip(ns))
	}
	return &refill.OpenLineageConfig{URL: raw.URL, Endpoint: endpoint, APIKeyEnv: raw.APIKeyEnv, APIKeyFile: raw.APIKeyFile, Namespace: ns}
}
