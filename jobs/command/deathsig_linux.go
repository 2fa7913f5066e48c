package command

import "syscall"

// dieWithParent asks Linux to kill the command when the refill process
// that started it dies, however it dies (SIGKILL included). Go does not
// retire the OS threads it starts commands from, so the signal fires only
// when refill itself exits.
func dieWithParent(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }
