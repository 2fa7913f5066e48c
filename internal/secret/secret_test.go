package secret

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
)

// holding sets what Keep held for one test.
func holding(t *testing.T, h handover) {
	t.Helper()
	old := held
	held = h
	t.Cleanup(func() { held = old })
}

func TestReader(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "key"), []byte("from the file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SIGNING": "from the environment", "HELD": "stale"}
	r := Reader{Dir: dir, Getenv: func(k string) string { return env[k] }}
	holding(t, handover{Env: map[string]string{"HELD": "withheld at start"}})

	for _, c := range []struct {
		s    refill.Secret
		want string
	}{
		{refill.Secret{Env: "SIGNING"}, "from the environment"},
		{refill.Secret{Env: "HELD"}, "withheld at start"},
		{refill.Secret{Env: "UNSET"}, ""},
		{refill.Secret{File: "key"}, "from the file"},
		{refill.Secret{File: filepath.Join(dir, "key")}, "from the file"},
		{refill.Secret{}, ""},
	} {
		if got, err := r.Read(c.s); err != nil || got != c.want {
			t.Errorf("Read(%+v) = %q, %v; want %q", c.s, got, err, c.want)
		}
	}

	// A file held at start is read from there, even if it changed since.
	holding(t, handover{Files: map[string]string{filepath.Join(dir, "key"): "read at start"}})
	if got, _ := r.Read(refill.Secret{File: "key"}); got != "read at start" {
		t.Errorf("held file: %q", got)
	}

	_, err := r.Read(refill.Secret{Key: "audit.key_file", File: "gone"})
	if !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), "audit.key_file: cannot read "+filepath.Join(dir, "gone")+": no such file or directory") {
		t.Errorf("a missing file: %v", err)
	}
}

// TestDSN: the password refill connects with goes into a PostgreSQL DSN
// that has none, whether PGPASSWORD was withheld at start or not.
func TestDSN(t *testing.T) {
	r := Reader{Getenv: func(k string) string { return map[string]string{"PGPASSWORD": "p@ss"}[k] }}
	for dsn, want := range map[string]string{
		"postgres://refill@127.0.0.1:5432/wh":         "postgres://refill:p%40ss@127.0.0.1:5432/wh",
		"postgresql://127.0.0.1/wh?sslmode=disable":   "postgresql://:p%40ss@127.0.0.1/wh?sslmode=disable",
		"postgres://refill:own@127.0.0.1/wh":          "postgres://refill:own@127.0.0.1/wh",
		"postgres://refill@127.0.0.1/wh?password=own": "postgres://refill@127.0.0.1/wh?password=own",
		"sqlite:wh.db": "sqlite:wh.db",
	} {
		if got := r.DSN(dsn); got != want {
			t.Errorf("DSN(%s) = %s, want %s", dsn, got, want)
		}
	}
	holding(t, handover{Env: map[string]string{"PGPASSWORD": "held"}})
	if got := (Reader{}).DSN("postgres://u@h/db"); got != "postgres://u:held@h/db" {
		t.Errorf("with PGPASSWORD held: %s", got)
	}
}

// TestWhatJobsGet: refill's own secrets are hidden from every job; what
// else was withheld a job may still be given by name.
func TestWhatJobsGet(t *testing.T) {
	cfg := &refill.Config{Warehouse: "postgres://wh@h/wh", State: "sqlite:s.db",
		Audit:  refill.AuditConfig{KeyEnv: "AUDIT"},
		Notify: refill.NotifyConfig{Slack: &refill.SlackConfig{SigningSecretEnv: "SIGNING"}}}
	holding(t, handover{Env: map[string]string{"AUDIT": "a", "REFILL_AUDIT_KEY": "d", "SIGNING": "s", "PGPASSWORD": "p", "AF_PASSWORD": "f"}})
	hidden := Hidden(cfg)
	for _, name := range []string{HandoverEnv, "AUDIT", "REFILL_AUDIT_KEY", "SIGNING"} {
		if !slices.Contains(hidden, name) {
			t.Errorf("Hidden lacks %s: %v", name, hidden)
		}
	}
	if w := Withheld(cfg); len(w) != 2 || w["PGPASSWORD"] != "p" || w["AF_PASSWORD"] != "f" {
		t.Errorf("Withheld = %v, want PGPASSWORD and AF_PASSWORD only", w)
	}
}
