package config

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/dsn"
)

// geteuid is the user refill runs as; tests stand in for a refill that
// is not root.
var geteuid = os.Geteuid

// jobUser reads run.job_user, the user command jobs run as. The user
// must exist; refill must be able to become it (it is root, or it is that
// user already); and what a job writes must be writable by it — the
// config's directory, where jobs run, and a SQLite warehouse or
// proof_warehouse with its directory and journal files — while no secret
// file may be readable by it. refill reports each of these, naming the
// path, its owner and mode, and changes no permission itself.
func (c *converter) jobUser(cfg *refill.Config, name string) *refill.JobUser {
	const key = "run.job_user"
	if name == "" {
		c.errorf(key, "want the name of the user command jobs run as, as in job_user: refill-jobs")
		return nil
	}
	u, err := lookupUser(name)
	if err != nil {
		c.errorf(key, "%v: create the user (an unprivileged one, with no login), or name one that exists", err)
		return nil
	}
	if euid := geteuid(); euid != 0 && uint32(euid) != u.UID {
		c.errorf(key, "refill runs as uid %d, not as root, so it cannot start jobs as %s (uid %d): run refill as root or as %s, or remove run.job_user", euid, name, u.UID, name)
		return u
	}
	if u.UID == 0 {
		return u // root may do anything; nothing to check
	}
	dir := c.dir
	if denied := access(dir, u, accessWrite|accessSearch); denied != "" {
		c.errorf(key, "command jobs run in the config's directory %s, as %s, who cannot write it: %s", dir, name, denied)
	}
	for _, w := range []struct{ key, dsn string }{{"warehouse", cfg.Warehouse}, {"proof_warehouse", cfg.ProofWarehouse}} {
		path, ok := dsn.SQLitePath(w.dsn, dir)
		if !ok {
			if path, ok = dsn.DuckDBPath(w.dsn, dir); !ok {
				continue
			}
		}
		if denied := access(filepath.Dir(path), u, accessWrite|accessSearch); denied != "" {
			c.errorf(key, "command jobs write the %s %s as %s, who cannot write its directory: %s", w.key, path, name, denied)
		}
		for _, f := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
			if _, err := os.Stat(f); err != nil {
				continue // SQLite makes it, owned like the database
			}
			if denied := access(f, u, accessRead|accessWrite); denied != "" {
				c.errorf(key, "command jobs write the %s %s as %s, who cannot write %s: %s", w.key, path, name, f, denied)
			}
		}
	}
	for _, f := range c.secretFiles {
		if access(f.path, u, accessRead) == "" {
			c.errorf(f.key, "%s can read %s, and command jobs run as %s (run.job_user): make it readable by refill's user alone (chmod 600)", name, f.path, name)
		}
	}
	return u
}

// lookupUser resolves name to its ids, groups and home.
func lookupUser(name string) (*refill.JobUser, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("no user %q on this machine", clip(name))
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("user %q has no numeric uid and gid (%s, %s)", clip(name), u.Uid, u.Gid)
	}
	ju := &refill.JobUser{Name: name, UID: uint32(uid), GID: uint32(gid), Home: u.HomeDir}
	ids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("the groups of user %q: %v", clip(name), err)
	}
	for _, id := range ids {
		if g, err := strconv.ParseUint(id, 10, 32); err == nil {
			ju.Groups = append(ju.Groups, uint32(g))
		}
	}
	return ju, nil
}

// The permissions access checks for, as in a mode's rwx bits.
const (
	accessRead   = 4
	accessWrite  = 2
	accessSearch = 1
)
