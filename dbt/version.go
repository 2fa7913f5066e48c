package dbt

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// dbt 1.9 runs a microbatch model for a time range of its own,
// --event-time-start and --event-time-end; before it, a model is told its
// partition through --vars, which it must read itself.

// EventTimeVersion is the first dbt that takes --event-time-start/end.
var EventTimeVersion = [2]int{1, 9}

// EventTimeCommand builds one partition of a model with config.event_time
// on dbt 1.9 or later: dbt run of the model alone, for exactly the
// partition's bounds (jobs/command fills {{start}} and {{end}}).
var EventTimeCommand = []string{"dbt", "run", "--select", "{{select}}", "--event-time-start", "{{start}}", "--event-time-end", "{{end}}"}

// versionLine finds dbt's own version in what dbt --version prints:
// "Core:\n  - installed: 1.9.1" (1.5 and later) or "installed version:
// 1.4.6" (before).
var versionLine = regexp.MustCompile(`(?m)^\s*(?:-\s*installed:|installed version:)\s*v?(\d+)\.(\d+)(?:\.(\d+))?`)

// ParseVersion reads dbt's version from dbt --version's output.
func ParseVersion(out string) (major, minor int, text string, ok bool) {
	m := versionLine.FindStringSubmatch(out)
	if m == nil {
		return 0, 0, "", false
	}
	major, _ = strconv.Atoi(m[1])
	minor, _ = strconv.Atoi(m[2])
	text = m[1] + "." + m[2]
	if m[3] != "" {
		text += "." + m[3]
	}
	return major, minor, text, true
}

// manifestVersionOf parses a manifest's metadata.dbt_version ("1.9.1").
func manifestVersionOf(s string) (major, minor int, ok bool) {
	parts := strings.SplitN(strings.TrimPrefix(s, "v"), ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	a, err1 := strconv.Atoi(parts[0])
	b, err2 := strconv.Atoi(strings.TrimLeft(parts[1], "v"))
	return a, b, err1 == nil && err2 == nil
}

var versions sync.Map // program path -> versionResult

// versionTimeout bounds dbt --version.
var versionTimeout = 10 * time.Second

type versionResult struct {
	out string
	err error
}

// ReadVersion runs program --version once per process (10 seconds at
// most, its whole process group killed then) with env as its whole
// environment, and returns what it printed.
func ReadVersion(program string, env []string) (string, error) {
	if v, ok := versions.Load(program); ok {
		r := v.(versionResult)
		return r.out, r.err
	}
	ctx, cancel := context.WithTimeout(context.Background(), versionTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, program, "--version")
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A child that keeps the output open must not hold the read past the
	// kill.
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		err = fmt.Errorf("%s --version: %w", program, err)
	}
	versions.Store(program, versionResult{string(out), err})
	return string(out), err
}

func atLeast(major, minor int, want [2]int) bool {
	return major > want[0] || major == want[0] && minor >= want[1]
}
