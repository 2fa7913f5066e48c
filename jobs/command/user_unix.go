//go:build unix

package command

import (
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"strings"
	"sync"
	"syscall"

	"github.com/refill-dev/refill"
)

// environ is refill's environment as the job's base, with PATH and HOME
// as the plan sealed them (refill.Job.Path, Home); with a job user,
// HOME is that user's.
func (c Runner) environ(j *refill.Job) []string {
	env := os.Environ()
	path := j.Path
	if path == "" {
		path = refill.DefaultJobPath
	}
	set := map[string]string{"PATH": path, "HOME": homeOf()}
	if c.User != nil {
		set["HOME"] = c.User.Home
	}
	out := env[:0:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; !ok {
			out = append(out, kv)
		}
	}
	for _, k := range []string{"PATH", "HOME"} {
		if v := set[k]; v != "" {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// homeOf is refill's user's home as the system records it, not $HOME,
// which whoever starts refill may point at a directory of their own
// (with a .bashrc that a bash -l job would read).
func homeOf() string {
	if u, err := user.Current(); err == nil && u.HomeDir != "" {
		return u.HomeDir
	}
	return "/"
}

// runAs has the command run as c.User: its uid, gid and supplementary
// groups. A process of another user can neither read refill's memory and
// environment nor trace it, which root — what refill so often runs as —
// can. Without a job user, refill running as root says so once.
func (c Runner) runAs(cmd *exec.Cmd) {
	u := c.User
	if u == nil {
		if os.Geteuid() == 0 {
			rootOnce.Do(func() {
				slog.Warn("command jobs run as root, so each can read refill's memory and with it its secrets (the audit key, Slack's): set run.job_user to run them as an unprivileged user")
			})
		}
		return
	}
	if uint32(os.Geteuid()) == u.UID {
		return // refill is that user already
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}
}

var rootOnce sync.Once
