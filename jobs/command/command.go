// Package command runs command jobs: argv as a child process for one
// partition, with a minimal environment, the job's timeout, its process
// group killed with it, and its output kept.
package command

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/jobs/jobfiles"
)

// errTimeout is the cause of a job's own timeout.
var errTimeout = errors.New("the job's timeout")

// outputLimit bounds how much of a command's output is kept with a run.
const outputLimit = 64 << 10

// Runner runs a command job for one partition.
type Runner struct {
	// Dir is where the command runs and relative argv[0] resolves: the
	// config's directory.
	Dir string
	// Warehouse is passed as REFILL_WAREHOUSE, so a command knows where to
	// write (the proof warehouse during a proof).
	Warehouse string
	// WorkDir, when set, is where the command runs instead of Dir: a proof
	// runs commands in a scratch directory, so that files they write (an
	// export) never overwrite the real ones.
	WorkDir string
	// Hidden names variables of refill's environment that a job never
	// sees, even under REFILL_* or named in env: (secret.Hidden).
	Hidden []string
	// EnvKey is the key of the plan's digests of the values the job's env
	// passes through (EnvSeal); nil skips the check.
	EnvKey []byte
	// AttemptKey names the partition's attempt, the same for every retry
	// in one run (REFILL_ATTEMPT_KEY; refill.AttemptKey).
	AttemptKey string
	// Withheld holds variables refill dropped from its own environment
	// that a job is given when its env: names them (secret.Withheld).
	Withheld map[string]string
	// User, when set, is who the command runs as (run.job_user).
	User *refill.JobUser
	// Proof runs the job's ProofCommand, when it has one.
	Proof bool
}

// EnvSeal returns, for each variable declared passes through from
// refill's environment (a bare NAME), a digest of its value keyed with
// key: what a plan seals in place of the value, so that a job never runs
// with a value other than the one its plan was made with, and the plan
// never holds the value. An unset variable has a digest of its own.
func EnvSeal(key []byte, declared []string, lookup func(string) (string, bool)) map[string]string {
	var out map[string]string
	for _, e := range declared {
		if strings.Contains(e, "=") {
			continue // a fixed value, sealed as written
		}
		v, set := lookup(e)
		m := hmac.New(sha256.New, key)
		fmt.Fprintf(m, "%s\x00%t\x00%s", e, set, v)
		if out == nil {
			out = map[string]string{}
		}
		out[e] = "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))
	}
	return out
}

// Lookup finds a variable as a job is given it (Environment): among the
// withheld ones first, else in refill's environment.
func Lookup(withheld map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		if v, ok := withheld[name]; ok {
			return v, true
		}
		return os.LookupEnv(name)
	}
}

// checkEnv refuses a job whose passed-through variables hold other values
// than the ones its plan sealed: the variable is named, never its value.
func (c Runner) checkEnv(d *refill.Dataset) error {
	j := d.Job
	if c.EnvKey == nil || j.EnvSeal == nil {
		return nil
	}
	now := EnvSeal(c.EnvKey, j.Env, Lookup(c.Withheld))
	for _, name := range slices.Sorted(maps.Keys(j.EnvSeal)) {
		if now[name] != j.EnvSeal[name] {
			return refill.NotPermittedf("dataset %s: the value of %s in refill's environment is not the one the plan was sealed with: it is not the job that was approved; plan again", d.Name, name)
		}
	}
	return nil
}

// Result is what a command left behind.
type Result struct {
	ExitCode int           `json:"exit_code"`
	Output   string        `json:"output"`
	Elapsed  time.Duration `json:"elapsed"`
}

// Environment is what a command job sees (docs/design.md §6): PATH, HOME and
// refill's REFILL_* variables from base, less hidden ones; each bare NAME
// the job declares, passed through from withheld or else base; and each
// NAME=value it declares, as written. Nothing else of refill's environment
// — database passwords, cloud credentials, Slack tokens — reaches a job.
func Environment(base, declared, hidden []string, withheld map[string]string) []string {
	get := map[string]string{}
	for _, kv := range base {
		if k, v, ok := strings.Cut(kv, "="); ok {
			get[k] = v
		}
	}
	maps.Copy(get, withheld)
	var out []string
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if slices.Contains(hidden, k) {
			continue
		}
		if k == "PATH" || k == "HOME" || strings.HasPrefix(k, "REFILL_") {
			out = append(out, kv)
		}
	}
	for _, e := range declared {
		if strings.Contains(e, "=") {
			out = append(out, e)
		} else if v, ok := get[e]; ok && !slices.Contains(hidden, e) {
			out = append(out, e+"="+v)
		}
	}
	return out
}

var _ refill.JobRunner = Runner{}

// Transactional is false: a command writes on its own.
func (Runner) Transactional() bool { return false }

// Build runs the command for run.Partition, told to write to
// run.Warehouse (or c.Warehouse when run names none), and returns its
// output.
func (c Runner) Build(ctx context.Context, _ refill.WarehouseTx, d *refill.Dataset, run refill.JobRun) (string, error) {
	if run.Warehouse != "" {
		c.Warehouse = run.Warehouse
	}
	c.AttemptKey = run.AttemptKey
	c.Proof = run.Proof
	res, err := c.Run(ctx, d, run.Partition)
	return res.Output, err
}

// Run executes the job's argv with {{partition}}, {{from}} and {{to}}
// substituted and the same values in REFILL_PARTITION, REFILL_FROM and
// REFILL_TO, and {{start}} and {{end}} with the partition's bounds
// (Bounds). In a proof it runs ProofCommand, when the job has one. A job timeout kills the process (and its children, through
// the process group). A non-zero exit is an error that carries the output's
// tail.
func (c Runner) Run(ctx context.Context, d *refill.Dataset, partition string) (Result, error) {
	j := d.Job
	if j == nil || len(j.Command) == 0 {
		return Result{}, refill.BadInputf("dataset %s has no command", d.Name)
	}
	vars := map[string]string{"partition": partition, "from": partition, "to": partition}
	if start, end, err := Bounds(d.Ref(), partition); err == nil {
		vars["start"], vars["end"] = start, end
	}
	command := j.Command
	if c.Proof && len(j.ProofCommand) > 0 {
		command = j.ProofCommand
	}
	argv := make([]string, len(command))
	for i, a := range command {
		for k, v := range vars {
			a = strings.ReplaceAll(a, "{{"+k+"}}", v)
		}
		argv[i] = a
	}
	shown := strings.Join(argv, " ") // as written, not the private copy
	if err := c.checkEnv(d); err != nil {
		return Result{}, err
	}
	prep, err := c.prepare(d, argv)
	if err != nil {
		return Result{}, err
	}
	defer prep.Close()
	argv = prep.Argv
	extra := prep.Env
	name := argv[0]
	switch {
	case strings.Contains(name, "/") && !filepath.IsAbs(name):
		name = filepath.Join(c.Dir, name)
	case !strings.Contains(name, "/"):
		// Found on the job's own PATH (run.path), not this process's.
		path := j.Path
		if path == "" {
			path = refill.DefaultJobPath
		}
		found, ok := lookPath(name, path)
		if !ok {
			return Result{}, refill.BadInputf("dataset %s: command %s not found on the job's PATH (%s): add its directory to run.path", d.Name, name, path)
		}
		name = found
	}
	// The job's own timeout starts with the job, and says so as its cause:
	// a deadline of the caller's (a run's time limit) is another story.
	if j.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, time.Duration(j.Timeout), errTimeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, name, argv[1:]...)
	cmd.Dir = c.Dir
	if c.WorkDir != "" {
		cmd.Dir = c.WorkDir
	}
	cmd.Env = Environment(c.environ(j), j.Env, c.Hidden, c.Withheld)
	cmd.Env = append(cmd.Env, "REFILL_DATASET="+d.Name, "REFILL_PARTITION="+partition, "REFILL_FROM="+partition, "REFILL_TO="+partition)
	if c.Warehouse != "" {
		cmd.Env = append(cmd.Env, "REFILL_WAREHOUSE="+c.Warehouse)
	}
	if c.AttemptKey != "" {
		cmd.Env = append(cmd.Env, "REFILL_ATTEMPT_KEY="+c.AttemptKey)
	}
	cmd.Env = withEnv(cmd.Env, extra)
	setProcessGroup(cmd)
	c.runAs(cmd)
	var out bytes.Buffer
	cmd.Stdout = &limited{w: &out, n: outputLimit}
	cmd.Stderr = cmd.Stdout
	start := time.Now()
	err = cmd.Run()
	res := Result{Output: out.String(), Elapsed: time.Since(start)}
	if cmd.ProcessState != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	if err == nil {
		// What ran must still be what was sealed: a file edited while the
		// job ran (by the job, or by someone racing it) fails the
		// partition, since what ran may not be what was approved.
		err = c.recheck(d)
		if err != nil {
			return res, err
		}
	}
	switch {
	case err == nil:
		return res, nil
	case errors.Is(context.Cause(ctx), errTimeout):
		return res, fmt.Errorf("command %s timed out after %s (its timeout) and was killed", shown, time.Duration(j.Timeout))
	case ctx.Err() != nil:
		return res, fmt.Errorf("command %s was killed after %s: %w", shown, res.Elapsed.Round(time.Millisecond), context.Cause(ctx))
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, os.ErrNotExist):
		return res, refill.BadInputf("dataset %s: command %s not found (relative paths resolve from %s)", d.Name, j.Command[0], c.Dir)
	default:
		return res, fmt.Errorf("command %s exited %d: %s", shown, res.ExitCode, tail(res.Output, 400))
	}
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// limited keeps the first n bytes written and drops the rest, so a chatty
// command cannot fill memory.
type limited struct {
	w *bytes.Buffer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if room := l.n - l.w.Len(); room > 0 {
		if len(p) > room {
			l.w.Write(p[:room])
		} else {
			l.w.Write(p)
		}
	}
	return len(p), nil
}

// prepare checks the job's files against what its plan sealed and
// readies argv to run the sealed bytes (jobfiles.Prepare): a script, or a
// file it sources, edited after the plan was sealed — even between the
// approval and this partition — makes it a different job, refused.
func (c Runner) prepare(d *refill.Dataset, argv []string) (*jobfiles.Prepared, error) {
	j := d.Job
	if j.Script != "" && j.Sealed == nil {
		// A plan made before every file was sealed: argv[0] alone.
		return &jobfiles.Prepared{Argv: argv}, checkScript(d, c.Dir)
	}
	prep, err := jobfiles.Prepare(c.Dir, j.Command, argv, j.Files, j.Sealed)
	if err != nil {
		return nil, sealError(d, err)
	}
	return prep, nil
}

func (c Runner) recheck(d *refill.Dataset) error {
	j := d.Job
	if j.Script != "" && j.Sealed == nil {
		return nil
	}
	return sealError(d, jobfiles.Recheck(c.Dir, j.Command, j.Files, j.Sealed))
}

func sealError(d *refill.Dataset, err error) error {
	var ce *jobfiles.ChangedError
	if errors.As(err, &ce) {
		return refill.NotPermittedf("dataset %s: %v: it is not the job that was approved; plan again", d.Name, ce)
	}
	if err != nil {
		return fmt.Errorf("dataset %s: its sealed files: %w", d.Name, err)
	}
	return nil
}

// checkScript refuses to run a script that is not the one a plan made by
// an older refill sealed (its argv[0] alone, by digest).
func checkScript(d *refill.Dataset, dir string) error {
	want := d.Job.Script
	path := d.Job.Command[0]
	if !strings.Contains(path, "/") {
		return nil
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	got, err := jobfiles.DigestFile(path)
	if err != nil {
		return fmt.Errorf("dataset %s: reading its script %s: %w", d.Name, path, err)
	}
	if got != want {
		return refill.NotPermittedf("dataset %s: its script %s changed since the plan was sealed (sealed %s, now %s): it is not the job that was approved; plan again",
			d.Name, d.Job.Command[0], jobfiles.Short(want), jobfiles.Short(got))
	}
	return nil
}

// withEnv sets extra's variables in env, over what env holds; a
// PYTHONPATH the job set itself comes after the one given here.
func withEnv(env, extra []string) []string {
	for _, kv := range extra {
		k, v, _ := strings.Cut(kv, "=")
		i := slices.IndexFunc(env, func(e string) bool { return strings.HasPrefix(e, k+"=") })
		switch {
		case i < 0:
			env = append(env, kv)
		case k == "PYTHONPATH":
			env[i] = k + "=" + v + string(os.PathListSeparator) + strings.TrimPrefix(env[i], k+"=")
		default:
			env[i] = kv
		}
	}
	return env
}

// lookPath finds an executable named name on pathList.
func lookPath(name, pathList string) (string, bool) {
	for _, dir := range filepath.SplitList(pathList) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // the working directory is never on a job's PATH
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}

// Bounds are a partition's first instant and the next partition's, in UTC,
// as YYYY-MM-DDTHH:MM:SS: the form dbt's --event-time-start and
// --event-time-end take (they refuse a zone suffix). A day partition of a
// dataset with a timezone runs from its local midnight to the next (23 or
// 25 hours across a DST change); an hour partition's key is its UTC hour.
func Bounds(t refill.TableRef, partition string) (start, end string, err error) {
	g := t.Grain
	if g == "" {
		g = refill.GrainDay
	}
	at, err := refill.PartitionTime(partition, g)
	if err != nil {
		return "", "", err
	}
	next := at.AddDate(0, 0, 1)
	if g == refill.GrainHour {
		next = at.Add(time.Hour)
	}
	// An hour's key is a UTC instant already; a day's is the local day.
	if t.Timezone != "" && g == refill.GrainDay {
		if loc, lerr := time.LoadLocation(t.Timezone); lerr == nil {
			at = time.Date(at.Year(), at.Month(), at.Day(), 0, 0, 0, 0, loc)
			next = at.AddDate(0, 0, 1)
		}
	}
	const layout = "2006-01-02T15:04:05"
	return at.UTC().Format(layout), next.UTC().Format(layout), nil
}
