package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/refill-dev/refill"
)

// state reads where the state store is: state: (a DSN written in the
// file; sqlite:.refill/state.db when nothing is said), or state_env or
// state_file, which keep a DSN holding a password out of refill.yaml — a
// command job runs in the config's directory and can read the file.
func (c *converter) state(cfg *refill.Config, raw *rawConfig) {
	var given []string
	for _, k := range []struct{ key, val string }{{"state", raw.State}, {"state_env", raw.StateEnv}, {"state_file", raw.StateFile}} {
		if k.val != "" {
			given = append(given, k.key)
		}
	}
	if len(given) > 1 {
		// At the second in the file, and named in the file's order.
		slices.SortFunc(given, func(a, b string) int { return c.ix.line(a) - c.ix.line(b) })
		c.errorf(given[1], "give one of state, state_env and state_file, not both %s and %s", given[0], given[1])
	}
	switch {
	case raw.State != "":
		c.storeURL("state", raw.State)
		cfg.State = raw.State
	case raw.StateEnv != "":
		c.env("state_env", raw.StateEnv)
		cfg.StateEnv = raw.StateEnv
	case raw.StateFile != "":
		c.secretFile("state_file", raw.StateFile)
		cfg.StateFile = raw.StateFile
	default:
		cfg.State = defaultState
	}
}

// audit reads where the audit chain's key is kept: audit.key_env (default
// REFILL_AUDIT_KEY) or audit.key_file.
func (c *converter) audit(raw *rawAudit) refill.AuditConfig {
	if raw != nil {
		c.secret("audit", "key", raw.KeyEnv, raw.KeyFile)
	}
	return auditOf(raw)
}

// auditOf is the audit: section as written, with its default.
func auditOf(raw *rawAudit) refill.AuditConfig {
	switch {
	case raw != nil && raw.KeyFile != "":
		return refill.AuditConfig{KeyFile: raw.KeyFile}
	case raw != nil && raw.KeyEnv != "":
		return refill.AuditConfig{KeyEnv: raw.KeyEnv}
	}
	return refill.AuditConfig{KeyEnv: refill.DefaultAuditKeyEnv}
}

// secret checks a secret named by its NAME_env key (an environment
// variable) or the NAME_file key beside it under parent: at most one of
// the two, the variable's name well formed, the file there and readable.
func (c *converter) secret(parent, name, env, file string) {
	c.env(child(parent, name+"_env"), env)
	if file == "" {
		return
	}
	fileKey := child(parent, name+"_file")
	if env != "" {
		c.errorf(fileKey, "give %s_env or %s_file, not both", name, name)
	}
	c.secretFile(fileKey, file)
}

// env checks an optional environment variable name. Secrets live in the
// environment or in files, never in refill.yaml; a name that cannot be an
// environment variable is usually the secret itself pasted in by mistake,
// so the message does not echo it.
func (c *converter) env(path, name string) {
	if name != "" && !envName.MatchString(name) {
		c.errorf(path, "want the name of an environment variable (letters, digits, _), not its value")
	}
}

// secretFile checks that a secret's file (relative to refill.yaml) is a
// regular file refill can open, now rather than when a run or a Slack
// request first needs it. Nothing of it is read: the value never passes
// through the config. It never opens anything but a regular file, which
// cannot block (a FIFO would).
func (c *converter) secretFile(path, file string) {
	p := file
	if !filepath.IsAbs(p) {
		p = filepath.Join(c.dir, p)
	}
	c.secretFiles = append(c.secretFiles, secretPath{key: path, path: p})
	where := file
	if p != file {
		where += " (" + p + ")"
	}
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		c.errorf(path, "cannot read %s: %s", where, cause(err))
		return
	case !fi.Mode().IsRegular():
		c.errorf(path, "%s is not a regular file holding the secret", where)
		return
	case fi.Size() == 0:
		c.errorf(path, "%s is empty", where)
		return
	}
	f, err := os.Open(p)
	if err != nil {
		c.errorf(path, "cannot read %s: %s", where, cause(err))
		return
	}
	f.Close()
}

// secretPath is a secret's file, for run.job_user's check that the job
// user cannot read it.
type secretPath struct{ key, path string }

// cause is an error from the file system without the path it repeats.
func cause(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// jobsNameNoSecret refuses a command job whose env: passes through a
// variable holding one of refill's own secrets (refill.Secret.Own): refill
// withholds it from every job, so naming it would either leak the key
// that guards the audit log and decisions, or silently pass nothing.
func (c *converter) jobsNameNoSecret(cfg *refill.Config) {
	own := cfg.OwnSecretEnvs()
	for _, name := range cfg.DatasetNames() {
		d := cfg.Datasets[name]
		if d == nil || d.Job == nil || d.Job.Kind != refill.JobCommand {
			continue
		}
		for i, e := range d.Job.Env {
			if strings.Contains(e, "=") {
				continue // a fixed value, not refill's
			}
			k := slices.IndexFunc(own, func(s refill.Secret) bool { return s.Env == e })
			if k < 0 {
				continue
			}
			path := elem(child("datasets", name, "job", "env"), i)
			if d.From != "" {
				path = child("datasets_from", "env")
			}
			c.errorf(path, "%s holds a secret of refill's own (%s): refill keeps it for itself, and no job may see it", e, own[k].Key)
		}
	}
}
