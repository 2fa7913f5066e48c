package secret

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxHandover bounds what a re-executed refill reads from the pipe.
const maxHandover = 1 << 20

// nondumpable keeps processes of the same unprivileged user out of this
// one: /proc/PID/environ and /proc/PID/mem become root's, and ptrace is
// refused. An execve resets it, so every job refill starts is dumpable
// as usual, and so is the image Keep re-executes (which sets it again).
func nondumpable() {
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}

// dumpable reports whether the process is dumpable.
func dumpable() bool {
	n, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	return err != nil || n != 0
}

// reexec replaces the process's image with its own binary, same argv,
// without h's variables in its environment, h waiting in a pipe whose
// read end the new image inherits. It returns only if that failed.
func reexec(h handover) error {
	payload, err := json.Marshal(h)
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	// The whole payload must fit in the pipe: nothing reads it until the
	// new image runs, and this one never returns from the exec.
	if err := fits(w, len(payload)); err != nil {
		w.Close()
		return err
	}
	_, err = w.Write(payload)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing the hand-over pipe: %w", err)
	}
	fd := r.Fd()
	if _, err := unix.FcntlInt(fd, unix.F_SETFD, 0); err != nil {
		return fmt.Errorf("letting the new image inherit the pipe: %w", err)
	}
	env := append(environWithout(h.Env), HandoverEnv+"="+strconv.FormatUint(uint64(fd), 10))
	err = syscall.Exec("/proc/self/exe", os.Args, env)
	runtime.KeepAlive(r)
	return fmt.Errorf("re-executing /proc/self/exe: %w", err)
}

// fits makes sure the pipe w can hold n bytes without a reader.
func fits(w *os.File, n int) error {
	size, err := unix.FcntlInt(w.Fd(), unix.F_GETPIPE_SZ, 0)
	if err != nil || size >= n {
		return err
	}
	if _, err := unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, n); err != nil {
		return fmt.Errorf("%d bytes of secrets do not fit in a pipe: %w", n, err)
	}
	return nil
}

// receive reads the hand-over from the pipe at file descriptor s and
// closes it.
func receive(s string) (handover, error) {
	var h handover
	fd, err := strconv.Atoi(s)
	if err != nil || fd < 3 {
		return h, fmt.Errorf("%s=%q is not the file descriptor of a pipe", HandoverEnv, s)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return h, fmt.Errorf("%s=%d is not a pipe", HandoverEnv, fd)
	}
	unix.CloseOnExec(fd)
	f := os.NewFile(uintptr(fd), "refill-secrets")
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxHandover+1))
	switch {
	case err != nil:
		return h, err
	case len(b) > maxHandover:
		return h, errors.New("the hand-over is larger than 1 MiB")
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return h, fmt.Errorf("the hand-over is not what refill writes: %w", err)
	}
	return h, nil
}
