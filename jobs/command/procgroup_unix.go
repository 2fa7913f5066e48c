//go:build unix

package command

import (
	"os/exec"
	"syscall"
)

// setProcessGroup puts the command in its own process group and kills the
// whole group on cancellation, so a shell script's children die with it;
// and, where the system can, has the command killed when refill dies, so
// that a killed apply leaves no job writing on unobserved while the next
// apply (finding its lease holder dead) builds the same partition again.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	dieWithParent(cmd.SysProcAttr)
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
