package store

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
)

// Alive reports whether a lease's holder may still be running at now: its
// lease has not lapsed and, when the holder is a process on this host
// (holders are "host:pid"), that process still exists. Elsewhere only the
// lease's expiry can tell.
func (l Lease) Alive(now time.Time) bool {
	if !l.Expires.After(now) {
		return false
	}
	return l.HolderAlive()
}

// HolderAlive reports whether the lease's holder process may still be
// running, whatever the lease's expiry says: true unless the holder is a
// process on this host that no longer exists.
func (l Lease) HolderAlive() bool {
	host, pid, ok := splitHolder(l.Holder)
	me, _ := os.Hostname()
	if !ok || host != me {
		return true
	}
	return processAlive(pid)
}

func splitHolder(h string) (string, int, bool) {
	i := strings.LastIndexByte(h, ':')
	if i < 0 {
		return "", 0, false
	}
	var pid int
	if _, err := fmt.Sscanf(h[i+1:], "%d", &pid); err != nil || pid <= 0 {
		return "", 0, false
	}
	return h[:i], pid, true
}

// processAlive reports whether a process with this id exists on this host.
// EPERM means it exists but belongs to someone else.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
