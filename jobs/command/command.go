// Package command runs command jobs: argv as a child process for one
// partition, with a minimal environment, the job's timeout, its process
// group killed with it, and its output kept.
package command

import (
	"bytes"
	"context"
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
)

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
	// Withheld holds variables refill dropped from its own environment
	// that a job is given when its env: names them (secret.Withheld).
	Withheld map[string]string
	// User, when set, is who the command runs as (run.job_user).
	User *refill.JobUser
}

// Result is what a command left behind.
type Result struct {
	ExitCode int           `json:"exit_code"`
	Output   string        `json:"output"`
	Elapsed  time.Duration `json:"elapsed"`
}

// Environment is what a command job sees (DESIGN.md §5): PATH, HOME and
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
	res, err := c.Run(ctx, d, run.Partition)
	return res.Output, err
}

// Run executes the job's argv with {{partition}}, {{from}} and {{to}}
// substituted and the same values in REFILL_PARTITION, REFILL_FROM and
// REFILL_TO. A job timeout kills the process (and its children, through
// the process group). A non-zero exit is an error that carries the output's
// tail.
func (c Runner) Run(ctx context.Context, d *refill.Dataset, partition string) (Result, error) {
	j := d.Job
	if j == nil || len(j.Command) == 0 {
		return Result{}, refill.BadInputf("dataset %s has no command", d.Name)
	}
	vars := map[string]string{"partition": partition, "from": partition, "to": partition}
	argv := make([]string, len(j.Command))
	for i, a := range j.Command {
		for k, v := range vars {
			a = strings.ReplaceAll(a, "{{"+k+"}}", v)
		}
		argv[i] = a
	}
	if j.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(j.Timeout))
		defer cancel()
	}
	name := argv[0]
	if strings.Contains(name, "/") && !filepath.IsAbs(name) {
		name = filepath.Join(c.Dir, name)
	}
	if err := checkScript(d, name); err != nil {
		return Result{}, err
	}
	cmd := exec.CommandContext(ctx, name, argv[1:]...)
	cmd.Dir = c.Dir
	if c.WorkDir != "" {
		cmd.Dir = c.WorkDir
	}
	cmd.Env = Environment(c.environ(), j.Env, c.Hidden, c.Withheld)
	cmd.Env = append(cmd.Env, "REFILL_DATASET="+d.Name, "REFILL_PARTITION="+partition, "REFILL_FROM="+partition, "REFILL_TO="+partition)
	if c.Warehouse != "" {
		cmd.Env = append(cmd.Env, "REFILL_WAREHOUSE="+c.Warehouse)
	}
	setProcessGroup(cmd)
	c.runAs(cmd)
	var out bytes.Buffer
	cmd.Stdout = &limited{w: &out, n: outputLimit}
	cmd.Stderr = cmd.Stdout
	start := time.Now()
	err := cmd.Run()
	res := Result{Output: out.String(), Elapsed: time.Since(start)}
	if cmd.ProcessState != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	switch {
	case err == nil:
		return res, nil
	case ctx.Err() == context.DeadlineExceeded && j.Timeout > 0 && res.Elapsed >= time.Duration(j.Timeout):
		return res, fmt.Errorf("command %s timed out after %s (its timeout) and was killed", strings.Join(argv, " "), time.Duration(j.Timeout))
	case ctx.Err() != nil:
		return res, fmt.Errorf("command %s was killed after %s: %w", strings.Join(argv, " "), res.Elapsed.Round(time.Millisecond), context.Cause(ctx))
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, os.ErrNotExist):
		return res, refill.BadInputf("dataset %s: command %s not found (relative paths resolve from %s)", d.Name, argv[0], c.Dir)
	default:
		return res, fmt.Errorf("command %s exited %d: %s", strings.Join(argv, " "), res.ExitCode, tail(res.Output, 400))
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

// checkScript refuses to run a project script that is not the one the job
// was sealed with: the plan (and its approval) covered the script's
// content, by its digest, and an edit since — even one made between the
// approval and this partition — is a different job.
func checkScript(d *refill.Dataset, path string) error {
	want := d.Job.Script
	if want == "" || !strings.Contains(d.Job.Command[0], "/") {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("dataset %s: reading its script %s: %w", d.Name, path, err)
	}
	sum := sha256.Sum256(b)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != want {
		return refill.NotPermittedf("dataset %s: its script %s changed since the plan was sealed (sealed %s, now %s): it is not the job that was approved; plan again",
			d.Name, d.Job.Command[0], short(want), short(got))
	}
	return nil
}

func short(digest string) string {
	if len(digest) > 19 {
		return digest[:19]
	}
	return digest
}
