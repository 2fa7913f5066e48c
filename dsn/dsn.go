// Package dsn is the one place refill reads and redacts the locations it
// is given — warehouse and state-store DSNs (sqlite:PATH, postgres://…,
// key=value), Airflow URLs — so that no message, log line or Slack thread
// carries a password, whichever component wrote it.
package dsn

import (
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
)

// Redact returns dsn with any password replaced by xxxxx, for messages
// and logs. It handles URL DSNs (the userinfo password and the password and
// sslpassword parameters) and key=value DSNs, and falls back to a pattern for
// URLs too broken to parse. A sqlite: DSN names a file and carries no
// password: it comes back unchanged.
func Redact(dsn string) string {
	if strings.HasPrefix(dsn, "sqlite:") {
		return dsn
	}
	if !strings.Contains(dsn, "://") {
		return kvPassword.ReplaceAllString(dsn, "${1}=xxxxx")
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return urlPassword.ReplaceAllString(dsn, "${1}:xxxxx@")
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	q := u.Query()
	for _, k := range []string{"password", "sslpassword"} {
		if q.Has(k) {
			q.Set(k, "xxxxx")
			u.RawQuery = q.Encode()
		}
	}
	return u.String()
}

var (
	// kvPassword matches a password in a key=value DSN, quoted or not.
	kvPassword = regexp.MustCompile(`\b((?:ssl)?password)\s*=\s*('(?:[^'\\]|\\.)*'|\S*)`)
	// urlPassword matches user:password@ in a URL.
	urlPassword = regexp.MustCompile(`(://[^:@/]*):([^@]*)@`)
	// paramPassword matches a password parameter in a URL.
	paramPassword = regexp.MustCompile(`[?&](?:ssl)?password=([^&]*)`)
)

// Scrub removes from msg every password in dsn, raw and URL-encoded. pgx
// redacts the DSNs it prints, but by its own account on a best-effort
// basis; scrubbing the final text does not depend on the form a message
// takes.
func Scrub(msg, dsn string) string {
	for _, pw := range Passwords(dsn) {
		if pw == "" {
			continue
		}
		for _, form := range []string{pw, url.QueryEscape(pw), url.PathEscape(pw)} {
			msg = strings.ReplaceAll(msg, form, "xxxxx")
		}
	}
	return msg
}

// Passwords returns the passwords written in dsn, in every form that
// might be printed.
func Passwords(dsn string) []string {
	var out []string
	if !strings.Contains(dsn, "://") {
		for _, m := range kvPassword.FindAllStringSubmatch(dsn, -1) {
			out = append(out, m[2], strings.Trim(m[2], "'"))
		}
		return out
	}
	if m := urlPassword.FindStringSubmatch(dsn); m != nil {
		out = append(out, m[2])
	}
	if u, err := url.Parse(dsn); err == nil {
		if pw, ok := u.User.Password(); ok {
			out = append(out, pw)
		}
		q := u.Query()
		out = append(out, q.Get("password"), q.Get("sslpassword"))
	} else {
		for _, m := range paramPassword.FindAllStringSubmatch(dsn, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// RedactError returns err with every password of dsn scrubbed from its
// text; errors.Is and errors.As still reach the cause. An error on its way
// to a terminal must never depend on a driver masking passwords itself.
func RedactError(err error, dsn string) error {
	if err == nil {
		return nil
	}
	msg := Scrub(err.Error(), dsn)
	if msg == err.Error() {
		return err
	}
	return &redacted{msg: msg, err: err}
}

type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// SQLiteWAL is the connection options every SQLite database of refill's is
// opened with: WAL, so readers run beside the one writer, and a busy
// timeout, so a writer waits its turn instead of failing at once.
const SQLiteWAL = "_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)"

// DuckDBPath is SQLitePath for a duckdb: DSN.
func DuckDBPath(dsn, baseDir string) (path string, ok bool) {
	if !strings.HasPrefix(dsn, "duckdb:") {
		return "", false
	}
	return SQLitePath("sqlite:"+strings.TrimPrefix(dsn, "duckdb:"), baseDir)
}

// SQLitePath returns the file a sqlite: DSN names, resolved against baseDir
// when relative. sqlite:///abs/path (URL style) is accepted as well as
// sqlite:/abs/path. ok is false, and path "", for any DSN that is not
// sqlite: (a postgres:// one, say), so that no caller mistakes another
// engine's DSN for a file.
func SQLitePath(dsn, baseDir string) (path string, ok bool) {
	if !strings.HasPrefix(dsn, "sqlite:") {
		return "", false
	}
	path = strings.TrimPrefix(dsn, "sqlite:")
	if strings.HasPrefix(path, "///") {
		path = path[2:]
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(baseDir, path)
	}
	return path, true
}

// WithPassword returns a postgres:// dsn that gives no password of its
// own with password written into it, as PostgreSQL's clients would use
// PGPASSWORD for it; any other dsn, or an empty password, comes back
// unchanged. refill withholds PGPASSWORD from its environment, where its
// drivers would look for it, and a command job told the warehouse by
// REFILL_WAREHOUSE must be able to connect as refill does.
func WithPassword(dsn, password string) string {
	if password == "" || !(strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")) {
		return dsn
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	if _, has := u.User.Password(); has || u.Query().Has("password") {
		return dsn
	}
	name := ""
	if u.User != nil {
		name = u.User.Username()
	}
	u.User = url.UserPassword(name, password)
	return u.String()
}
