//go:build unix && !linux

package command

import "syscall"

// dieWithParent has no portable equivalent outside Linux: there, a killed
// refill leaves its command running until the command ends.
func dieWithParent(*syscall.SysProcAttr) {}
