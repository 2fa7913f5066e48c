// Package secret keeps refill's secrets to refill: the audit key, Slack's
// and the webhooks' secrets, the state store's DSN, Airflow credentials,
// PGPASSWORD. Every part of refill that reads one reads it here (Reader),
// never from the environment directly.
//
// A process's environment is readable through /proc/PID/environ by any
// process of the same user — and so by every command job refill starts —
// for as long as it lives. So at start, before anything else, Keep reads
// the secrets the config names (from the environment or from files),
// re-executes refill in place (same process id) with every one of them
// removed from its environment, and receives them back through a pipe.
// It also makes the process non-dumpable, so that a process of the same
// unprivileged user can neither read its memory nor trace it. What root
// can still do is for run.job_user: a job run as another user reads
// neither.
package secret

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/dsn"
)

// HandoverEnv names the variable that tells a re-executed refill which
// file descriptor holds its secrets. It lives only between the exec and
// Keep, which unsets it.
const HandoverEnv = "REFILL_SECRETS_FD"

// held is what Keep gathered at start: the values of the variables it
// withheld from the environment, and the contents of the secrets' files
// by absolute path. It is written once, before refill does anything else,
// and only read after.
var held handover

// handover is what passes through the pipe, as JSON.
type handover struct {
	Env   map[string]string `json:"env,omitempty"`
	Files map[string]string `json:"files,omitempty"`
}

// A Reader reads secrets. The zero Reader reads what Keep held at start,
// then the process's environment, and resolves relative files against
// the working directory.
type Reader struct {
	// Dir is the config's directory, which a secret's relative file is
	// relative to.
	Dir string
	// Getenv reads a variable Keep did not withhold; nil is os.Getenv.
	// Tests that run refill in-process set it.
	Getenv func(string) string
}

// Getenv is Reader{}.Env: a variable's value, from what Keep withheld or
// else from the environment.
func Getenv(name string) string { return Reader{}.Env(name) }

// Env returns the variable name's value: what Keep withheld from the
// environment at start, or what the environment holds.
func (r Reader) Env(name string) string {
	if v, ok := held.Env[name]; ok {
		return v
	}
	if r.Getenv != nil {
		return r.Getenv(name)
	}
	return os.Getenv(name)
}

// Read returns the value of s: its variable's (Env), or its file's
// contents without their trailing newline. A file that cannot be read is
// bad input naming the config key, the file and why.
func (r Reader) Read(s refill.Secret) (string, error) {
	switch {
	case s.File != "":
		path := s.In(r.Dir).File
		if v, ok := held.Files[path]; ok {
			return v, nil
		}
		v, err := readFile(path)
		if err != nil {
			return "", refill.BadInputf("%s: cannot read %s: %s", s.Key, path, cause(err))
		}
		return v, nil
	case s.Env != "":
		return r.Env(s.Env), nil
	}
	return "", nil
}

// DSN returns dsn with the PostgreSQL password refill connects with
// (PGPASSWORD) written into it, when dsn is a postgres:// URL without a
// password of its own: the drivers no longer find PGPASSWORD in the
// environment, and a command job told the warehouse must connect as
// refill does.
func (r Reader) DSN(d string) string {
	return dsn.WithPassword(d, r.Env(refill.PGPasswordEnv))
}

// Hidden names the variables no command job of cfg is ever given, even
// under REFILL_* or when its env: names them: refill's own secrets
// (refill.Config.OwnSecretEnvs) and the hand-over's variable.
func Hidden(cfg *refill.Config) []string {
	out := []string{HandoverEnv}
	for _, s := range cfg.OwnSecretEnvs() {
		out = append(out, s.Env)
	}
	return out
}

// Withheld returns the values Keep withheld from the environment that a
// command job of cfg may still be given when its env: names them (the
// warehouse's PGPASSWORD, an Airflow job's credentials): everything held
// but refill's own.
func Withheld(cfg *refill.Config) map[string]string {
	out := maps.Clone(held.Env)
	hidden := Hidden(cfg)
	maps.DeleteFunc(out, func(k, _ string) bool { return slices.Contains(hidden, k) })
	return out
}

// Keep gathers refill's secrets at start and drops them from the
// process's environment. find says where the config keeps them (the
// config's directory and its secrets); it is called only when the process
// was not re-executed already, and should never fail: a config that
// cannot be read gives none, and the default audit key variable and
// PGPASSWORD are withheld anyway.
//
// On Linux, when any of those variables is set, Keep re-executes the
// binary in place (syscall.Exec of /proc/self/exe with the same argv, so
// the process id, and with it signals, run leases and process groups, is
// unchanged), without them in its environment, passing their values and
// the files' contents through a pipe that the new image reads, closes,
// and forgets the variable of. Then, and whenever nothing needed
// dropping, the process is non-dumpable. A hand-over that fails ends the
// process: refill would otherwise go on without its audit key.
//
// Call it first in main, before any goroutine of refill's own.
func Keep(find func() (dir string, secrets []refill.Secret)) {
	nondumpable()
	if fd, ok := os.LookupEnv(HandoverEnv); ok {
		os.Unsetenv(HandoverEnv)
		h, err := receive(fd)
		if err != nil {
			os.Stderr.WriteString("refill: receiving its secrets after re-executing itself: " + err.Error() + "\n")
			os.Exit(refill.ExitInternal)
		}
		held = h
		return
	}
	dir, secrets := find()
	held = gather(dir, secrets)
	if len(held.Env) == 0 {
		return // nothing in the environment to drop
	}
	if err := reexec(held); err != nil {
		os.Stderr.WriteString("refill: warning: could not drop its secrets from its environment, where a command job can read them: " + err.Error() + "\n")
	}
}

// gather reads the secrets from the environment and their files. A file
// that cannot be read is left out: Reader.Read reads it again when it is
// needed, and says why it cannot.
func gather(dir string, secrets []refill.Secret) handover {
	h := handover{Env: map[string]string{}, Files: map[string]string{}}
	secrets = append(slices.Clip(secrets), refill.Secret{Env: refill.DefaultAuditKeyEnv}, refill.Secret{Env: refill.PGPasswordEnv})
	for _, s := range secrets {
		if s.Env != "" {
			if v, ok := os.LookupEnv(s.Env); ok {
				h.Env[s.Env] = v
			}
		}
		if s.File != "" {
			path := s.In(dir).File
			if v, err := readFile(path); err == nil {
				h.Files[path] = v
			}
		}
	}
	return h
}

// environWithout is the process's environment less the variables in
// drop and any stale hand-over variable.
func environWithout(drop map[string]string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := drop[k]; ok || k == HandoverEnv {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// readFile reads a secret's file, less its trailing newline: a file
// written by echo or an editor holds the secret and one.
func readFile(path string) (string, error) {
	if !filepath.IsAbs(path) {
		abs, err := filepath.Abs(path)
		if err != nil {
			return "", err
		}
		path = abs
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

func cause(err error) string {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err.Error()
	}
	return err.Error()
}
