//go:build unix

package config

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/refill-dev/refill"
)

// access says why u may not use path for want (accessRead, accessWrite,
// accessSearch), or "" when it may: by the permission bits of path and
// the search bit of every directory above it, as the kernel checks them
// for a process of that user and its groups. ACLs are not read, so a
// path an ACL opens may be reported as closed (never the other way
// round: an ACL can only add to what the bits say for its owner class).
func access(path string, u *refill.JobUser, want uint32) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err.Error()
	}
	parts := strings.Split(strings.TrimPrefix(abs, "/"), "/")
	cur := "/"
	for i, p := range append([]string{""}, parts...) {
		cur = filepath.Join(cur, p)
		need := uint32(accessSearch)
		if i == len(parts) {
			need = want
		}
		fi, err := os.Stat(cur)
		if err != nil {
			return fmt.Sprintf("%s: %s", cur, cause(err))
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return ""
		}
		if bits := permBits(fi.Mode(), st, u); bits&need != need {
			return fmt.Sprintf("%s has owner %s, group %s, mode %s", cur, userName(st.Uid), groupName(st.Gid), fi.Mode())
		}
	}
	return ""
}

// permBits is the rwx class of mode that applies to u: owner, group
// (its primary group or any supplementary one) or others.
func permBits(mode os.FileMode, st *syscall.Stat_t, u *refill.JobUser) uint32 {
	perm := uint32(mode.Perm())
	switch {
	case st.Uid == u.UID:
		return perm >> 6 & 7
	case st.Gid == u.GID || slices.Contains(u.Groups, st.Gid):
		return perm >> 3 & 7
	}
	return perm & 7
}

func userName(uid uint32) string {
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		return u.Username
	}
	return strconv.FormatUint(uint64(uid), 10)
}

func groupName(gid uint32) string {
	if g, err := user.LookupGroupId(strconv.FormatUint(uint64(gid), 10)); err == nil {
		return g.Name
	}
	return strconv.FormatUint(uint64(gid), 10)
}
