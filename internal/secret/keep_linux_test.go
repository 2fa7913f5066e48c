package secret

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
)

// TestMain lets a test run this test binary as a refill would start: Keep
// first, then a report of what the process holds, on stdout.
func TestMain(m *testing.M) {
	if os.Getenv("SECRET_TEST_KEEP") != "" {
		keepAndReport()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// report is what a process that called Keep says of itself.
type report struct {
	PID      int               `json:"pid"`
	Environ  string            `json:"environ"` // /proc/self/environ, as the kernel shows it
	Getenv   string            `json:"getenv"`  // os.Getenv of the hand-over variable
	FDOpen   bool              `json:"fd_open"` // the hand-over's descriptor after Keep
	Dumpable bool              `json:"dumpable"`
	Held     handover          `json:"held"`
	Read     map[string]string `json:"read"`
}

func keepAndReport() {
	// Each image prints its start: two lines with one pid mean Keep
	// re-executed the process in place.
	fd := os.Getenv(HandoverEnv)
	fmt.Printf("start pid=%d\n", os.Getpid())
	dir := os.Getenv("SECRET_TEST_DIR")
	Keep(func() (string, []refill.Secret) {
		return dir, []refill.Secret{{Env: "SLACK_SIGNING_SECRET"}, {File: "hook.secret"}, {Env: "NOT_SET"}}
	})
	environ, _ := os.ReadFile("/proc/self/environ")
	rep := report{PID: os.Getpid(), Environ: string(environ), Getenv: os.Getenv(HandoverEnv), Dumpable: dumpable(), Held: held, Read: map[string]string{}}
	if fd != "" {
		_, err := os.Stat("/proc/self/fd/" + fd)
		rep.FDOpen = err == nil
	}
	for _, name := range []string{"REFILL_AUDIT_KEY", "SLACK_SIGNING_SECRET", "PGPASSWORD", "KEEP_ME"} {
		rep.Read[name] = Getenv(name)
	}
	rep.Read["hook.secret"], _ = Reader{Dir: dir}.Read(refill.Secret{File: "hook.secret"})
	b, _ := json.Marshal(rep)
	fmt.Printf("report %s\n", b)
}

// keep runs this test binary as keepAndReport with env added, and returns
// its start lines, its report, and its exit code and stderr.
func keep(t *testing.T, env ...string) (starts []string, rep report, code int, stderr string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hook.secret"), []byte("hook-secret-from-a-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{"SECRET_TEST_KEEP=1", "SECRET_TEST_DIR=" + dir, "KEEP_ME=kept"}, env...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatal(err)
		}
		code = ee.ExitCode()
	}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if s, ok := strings.CutPrefix(line, "start "); ok {
			starts = append(starts, s)
		} else if s, ok := strings.CutPrefix(line, "report "); ok {
			if err := json.Unmarshal([]byte(s), &rep); err != nil {
				t.Fatal(err)
			}
		}
	}
	return starts, rep, code, errb.String()
}

// TestKeepDropsSecretsFromTheEnvironment: with secrets in its environment,
// the process re-executes itself in place (one pid, two starts), and the
// new image's environment — what /proc/PID/environ shows every process of
// its user — holds none of them, while the values reach refill through
// the pipe, which is closed after.
func TestKeepDropsSecretsFromTheEnvironment(t *testing.T) {
	secrets := map[string]string{"REFILL_AUDIT_KEY": "audit-key-6b1d", "SLACK_SIGNING_SECRET": "signing-secret-99af", "PGPASSWORD": "pg-password-31c7"}
	var env []string
	for k, v := range secrets {
		env = append(env, k+"="+v)
	}
	starts, rep, code, stderr := keep(t, env...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if len(starts) != 2 || starts[0] != starts[1] || starts[0] != fmt.Sprintf("pid=%d", rep.PID) {
		t.Errorf("starts %q, report from pid %d: want one process started twice (re-executed in place)", starts, rep.PID)
	}
	for k, v := range secrets {
		if strings.Contains(rep.Environ, v) {
			t.Errorf("/proc/self/environ holds %s", k)
		}
		if rep.Read[k] != v {
			t.Errorf("%s reads %q, want %q from the hand-over", k, rep.Read[k], v)
		}
	}
	if !strings.Contains(rep.Environ, "KEEP_ME=kept") || rep.Read["KEEP_ME"] != "kept" {
		t.Errorf("a variable that is no secret was dropped: %q", rep.Read["KEEP_ME"])
	}
	// The variable (a descriptor's number, no secret) stays in the
	// exec-time block /proc shows, but leaves the environment children
	// inherit; the descriptor is closed.
	if rep.Getenv != "" || rep.FDOpen {
		t.Errorf("the hand-over outlived Keep: getenv %q, descriptor open %v", rep.Getenv, rep.FDOpen)
	}
	if rep.Read["hook.secret"] != "hook-secret-from-a-file" || len(rep.Held.Files) != 1 {
		t.Errorf("the file's secret: read %q, held %v", rep.Read["hook.secret"], rep.Held.Files)
	}
	if rep.Dumpable {
		t.Error("the process is dumpable: a process of the same user could read its memory")
	}
}

// TestKeepWithoutSecrets: with no secret in its environment the process is
// not re-executed (a plain command stays fast), and is non-dumpable all
// the same, since its memory holds the files' secrets and DSNs.
func TestKeepWithoutSecrets(t *testing.T) {
	starts, rep, code, stderr := keep(t)
	if code != 0 || len(starts) != 1 || rep.PID == 0 {
		t.Fatalf("exit %d, starts %q: %s", code, starts, stderr)
	}
	if rep.Dumpable {
		t.Error("the process is dumpable")
	}
	if rep.Read["hook.secret"] != "hook-secret-from-a-file" {
		t.Errorf("the file's secret: %q", rep.Read["hook.secret"])
	}
}

// TestKeepRefusesABadHandover: a process told to read its secrets from a
// descriptor that is no pipe stops rather than run without them.
func TestKeepRefusesABadHandover(t *testing.T) {
	_, rep, code, stderr := keep(t, HandoverEnv+"=1")
	if code != refill.ExitInternal || rep.PID != 0 || !strings.Contains(stderr, "REFILL_SECRETS_FD=\"1\" is not the file descriptor of a pipe") {
		t.Errorf("exit %d, report %+v, stderr %s", code, rep, stderr)
	}
}
