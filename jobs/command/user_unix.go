//go:build unix

package command

import (
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
)

// environ is refill's environment as the job's base: with a job user,
// HOME is that user's.
func (c Runner) environ() []string {
	env := os.Environ()
	if c.User == nil {
		return env
	}
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "HOME=") {
			out = append(out, kv)
		}
	}
	return append(out, "HOME="+c.User.Home)
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
