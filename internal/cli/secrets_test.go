package cli

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSecretsFindsTheConfigAsCobraWill: before cobra runs, Secrets reads
// the config the command will read — --config (either spelling, anywhere
// before --), else $REFILL_CONFIG, else ./refill.yaml — and gives nothing,
// never an error, for one it cannot read.
func TestSecretsFindsTheConfigAsCobraWill(t *testing.T) {
	dir := t.TempDir()
	write := func(name, keyEnv string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("version: 1\naudit: {key_env: "+keyEnv+"}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flagged, fromEnv := write("flagged.yaml", "FLAG_KEY"), write("env.yaml", "ENV_KEY")
	write("refill.yaml", "CWD_KEY")
	t.Chdir(dir)
	key := func(args ...string) string {
		t.Helper()
		gotDir, secrets := Secrets(args)
		if len(secrets) == 0 {
			return ""
		}
		if gotDir != dir {
			t.Errorf("%v: dir %s, want %s", args, gotDir, dir)
		}
		return secrets[0].Env
	}
	t.Setenv("REFILL_CONFIG", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"plans"}, "CWD_KEY"},
		{[]string{"apply", "p1", "--config", flagged}, "FLAG_KEY"},
		{[]string{"--config=" + flagged, "plans"}, "FLAG_KEY"},
		{[]string{"plans", "--", "--config", flagged}, "CWD_KEY"},
		{[]string{"plans", "--config", filepath.Join(dir, "missing.yaml")}, ""},
	} {
		if got := key(c.args...); got != c.want {
			t.Errorf("Secrets(%v) names %q, want %q", c.args, got, c.want)
		}
	}
	t.Setenv("REFILL_CONFIG", fromEnv)
	if got := key("plans"); got != "ENV_KEY" {
		t.Errorf("with $REFILL_CONFIG: %q", got)
	}
	if err := os.WriteFile(fromEnv, []byte("version: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if d, s := Secrets([]string{"plans"}); d != "" || s != nil {
		t.Errorf("a config that does not parse: %s, %v", d, s)
	}
}
