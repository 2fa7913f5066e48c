package command

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/jobs/jobfiles"
)

func script(t *testing.T, body string) (dir string) {
	t.Helper()
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "job.sh"), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func dataset(argv ...string) *refill.Dataset {
	return &refill.Dataset{Name: "feed", Job: &refill.Job{Kind: refill.JobCommand, Command: argv, Env: []string{"EXTRA=yes"}}}
}

// sealed seals d's job in dir as the config loader does: each argv file
// and each glob of its files.
func sealed(t *testing.T, dir string, d *refill.Dataset) *refill.Dataset {
	t.Helper()
	j := d.Job
	j.Sealed = map[string]string{}
	for _, f := range jobfiles.ArgFiles(dir, j.Command) {
		sum, err := jobfiles.DigestFile(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		j.Sealed[f.Key] = sum
	}
	for _, g := range j.Files {
		m, err := jobfiles.Match(dir, g)
		if err != nil {
			t.Fatal(err)
		}
		j.Sealed[jobfiles.GlobKey+g] = m.Digest
	}
	return d
}

func TestArgvAndEnvironment(t *testing.T) {
	dir := script(t, `echo "arg=$1 part=$REFILL_PARTITION from=$REFILL_FROM to=$REFILL_TO wh=$REFILL_WAREHOUSE extra=$EXTRA ds=$REFILL_DATASET"`)
	res, err := Runner{Dir: dir, Warehouse: "sqlite:/x.db"}.Run(context.Background(), sealed(t, dir, dataset("./job.sh", "{{partition}}")), "2026-11-02")
	if err != nil {
		t.Fatal(err)
	}
	want := "arg=2026-11-02 part=2026-11-02 from=2026-11-02 to=2026-11-02 wh=sqlite:/x.db extra=yes ds=feed"
	if strings.TrimSpace(res.Output) != want || res.ExitCode != 0 {
		t.Errorf("output %q exit %d, want %q", res.Output, res.ExitCode, want)
	}
}

func TestExitCodeAndOutputAreKept(t *testing.T) {
	dir := script(t, "echo partial work; echo boom >&2; exit 7\n")
	res, err := Runner{Dir: dir}.Run(context.Background(), sealed(t, dir, dataset("./job.sh")), "2026-11-02")
	if err == nil || res.ExitCode != 7 || !strings.Contains(res.Output, "partial work") || !strings.Contains(err.Error(), "exited 7: partial work\nboom") {
		t.Errorf("err %v, exit %d, output %q", err, res.ExitCode, res.Output)
	}
}

// TestTimeoutKillsTheProcessGroup checks a hanging command and the child it
// started are both killed at the job's timeout.
func TestTimeoutKillsTheProcessGroup(t *testing.T) {
	dir := script(t, "sleep 30 &\necho $! > child.pid\nwait\n")
	d := sealed(t, dir, dataset("./job.sh"))
	d.Job.Timeout = refill.Duration(300 * time.Millisecond)
	start := time.Now()
	_, err := Runner{Dir: dir}.Run(context.Background(), d, "2026-11-02")
	if err == nil || !strings.Contains(err.Error(), "timed out after 300ms (its timeout) and was killed") {
		t.Fatalf("err = %v", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("the command was not killed at its timeout")
	}
	pid, err := os.ReadFile(filepath.Join(dir, "child.pid"))
	if err != nil {
		t.Fatal(err)
	}
	// The child must be gone: /proc/PID either vanishes or is a zombie.
	deadline := time.Now().Add(5 * time.Second)
	for {
		stat, err := os.ReadFile("/proc/" + strings.TrimSpace(string(pid)) + "/stat")
		if err != nil || strings.Contains(string(stat), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command's child %s outlived the timeout", strings.TrimSpace(string(pid)))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestMissingCommandIsBadInput(t *testing.T) {
	_, err := Runner{Dir: t.TempDir()}.Run(context.Background(), dataset("./nope.sh"), "2026-11-02")
	if !errors.Is(err, refill.ErrBadInput) || !strings.Contains(err.Error(), "./nope.sh not found") {
		t.Errorf("err = %v", err)
	}
}

// TestCommandRefusesAChangedScript: a script edited after its job was
// sealed (between approval and the run, say) does not run.
func TestCommandRefusesAChangedScript(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "build.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho built > built.txt\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("#!/bin/sh\necho built > built.txt\n"))
	d := &refill.Dataset{Name: "x", Job: &refill.Job{Kind: refill.JobCommand, Command: []string{"./build.sh"},
		Script: "sha256:" + hex.EncodeToString(sum[:])}}
	c := Runner{Dir: dir}
	if _, err := c.Run(context.Background(), d, "2026-11-01"); err != nil {
		t.Fatalf("the sealed script: %v", err)
	}
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho other > other.txt\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := c.Run(context.Background(), d, "2026-11-01")
	if !errors.Is(err, refill.ErrNotPermitted) || !strings.Contains(err.Error(), "changed since the plan was sealed") {
		t.Fatalf("an edited script: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "other.txt")); err == nil {
		t.Error("the edited script ran")
	}
}

// TestSecretsReachAJobOnlyByName: a variable refill withheld from its own
// environment (the warehouse's PGPASSWORD) reaches a job only when its
// env: names it; one of refill's own secrets (Hidden) never does, named
// or under REFILL_*.
func TestSecretsReachAJobOnlyByName(t *testing.T) {
	t.Setenv("REFILL_OWN_KEY", "own-secret")
	t.Setenv("OWN", "own-secret")
	dir := script(t, "env\n")
	d := sealed(t, dir, dataset("./job.sh"))
	d.Job.Env = []string{"PGPASSWORD", "OWN"}
	r := Runner{Dir: dir, Hidden: []string{"OWN", "REFILL_OWN_KEY"}, Withheld: map[string]string{"PGPASSWORD": "pg-pw", "AF_PASSWORD": "af-pw"}}
	res, err := r.Run(context.Background(), d, "2026-11-02")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Output, "PGPASSWORD=pg-pw\n") {
		t.Errorf("the job named PGPASSWORD and did not get it:\n%s", res.Output)
	}
	for _, leak := range []string{"own-secret", "af-pw"} {
		if strings.Contains(res.Output, leak) {
			t.Errorf("the job got %s:\n%s", leak, res.Output)
		}
	}
}

// TestJobUserRunsTheCommand: with a job user, the command runs with that
// user's uid, gid and groups only, and its home.
func TestJobUserRunsTheCommand(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("switching users takes root")
	}
	dir := script(t, "id -u; id -g; id -G; echo home=$HOME; touch written\n")
	for _, p := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	u := &refill.JobUser{Name: "nobody", UID: 65534, GID: 65534, Home: "/nonexistent"}
	res, err := Runner{Dir: dir, User: u}.Run(context.Background(), sealed(t, dir, dataset("./job.sh")), "2026-11-02")
	if err != nil {
		t.Fatalf("%v\n%s", err, res.Output)
	}
	if want := "65534\n65534\n65534\nhome=/nonexistent\n"; res.Output != want {
		t.Errorf("output %q, want %q", res.Output, want)
	}
}

// TestRootWithoutJobUserWarnsOnce: refill running command jobs as root
// without run.job_user says so, once per process.
func TestRootWithoutJobUserWarnsOnce(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the warning is for root")
	}
	var log bytes.Buffer
	defer func(l *slog.Logger) { slog.SetDefault(l) }(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&log, nil)))
	rootOnce = sync.Once{}
	dir := script(t, "true\n")
	for range 2 {
		if _, err := (Runner{Dir: dir}).Run(context.Background(), sealed(t, dir, dataset("./job.sh")), "2026-11-02"); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(log.String(), "set run.job_user"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, log.String())
	}
	log.Reset()
	u := &refill.JobUser{Name: "root", Home: "/root"}
	rootOnce = sync.Once{}
	if _, err := (Runner{Dir: dir, User: u}).Run(context.Background(), sealed(t, dir, dataset("./job.sh")), "2026-11-02"); err != nil || log.Len() > 0 {
		t.Errorf("with a job user: err %v, log %s", err, log.String())
	}
}

// TestPassedThroughValuesAreSealed: a job runs only with the values its
// plan sealed for the variables it passes through, and the refusal names
// the variable, never a value.
func TestPassedThroughValuesAreSealed(t *testing.T) {
	dir := script(t, "echo ran\n")
	key := []byte("seal key")
	d := sealed(t, dir, dataset("./job.sh"))
	d.Job.Env = []string{"PARTNER_TOKEN", "FIXED=1"}
	t.Setenv("PARTNER_TOKEN", "first-value")
	d.Job.EnvSeal = EnvSeal(key, d.Job.Env, Lookup(nil))
	if len(d.Job.EnvSeal) != 1 || strings.Contains(d.Job.EnvSeal["PARTNER_TOKEN"], "first-value") || !strings.HasPrefix(d.Job.EnvSeal["PARTNER_TOKEN"], "hmac-sha256:") {
		t.Fatalf("EnvSeal = %v, want one keyed digest", d.Job.EnvSeal)
	}
	r := Runner{Dir: dir, EnvKey: key}
	if res, err := r.Run(context.Background(), d, "2026-11-02"); err != nil || strings.TrimSpace(res.Output) != "ran" {
		t.Fatalf("with the sealed value: %v %q", err, res.Output)
	}
	t.Setenv("PARTNER_TOKEN", "second-value")
	_, err := r.Run(context.Background(), d, "2026-11-02")
	if !errors.Is(err, refill.ErrNotPermitted) || !strings.Contains(err.Error(), "the value of PARTNER_TOKEN") || strings.Contains(err.Error(), "value\"") || strings.Contains(err.Error(), "second-value") {
		t.Errorf("with another value: %v", err)
	}
	// A withheld variable is looked up where the job gets it from.
	if got := EnvSeal(key, d.Job.Env, Lookup(map[string]string{"PARTNER_TOKEN": "first-value"})); got["PARTNER_TOKEN"] != d.Job.EnvSeal["PARTNER_TOKEN"] {
		t.Errorf("the withheld value seals differently: %v", got)
	}
	if other := EnvSeal([]byte("another key"), d.Job.Env, Lookup(map[string]string{"PARTNER_TOKEN": "first-value"})); other["PARTNER_TOKEN"] == d.Job.EnvSeal["PARTNER_TOKEN"] {
		t.Errorf("the digest does not depend on the key")
	}
}

// TestPythonRunsTheSealedCopies: python3 -m runs the project's module
// from the sealed copies: not a .pyc planted in the project's
// __pycache__, not a json.py dropped in the working directory to shadow
// the standard library, and python3 is the one on the PATH the plan was
// made with, not one put in front of the applier's PATH.
func TestPythonRunsTheSealedCopies(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	dir := t.TempDir()
	write := func(rel, body string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("pkg/__init__.py", "")
	write("pkg/x.py", "import json\nprint('sealed', json.dumps(1))\n")
	d := dataset("python3", "-m", "pkg.x")
	d.Job.Files = []string{"pkg/**"}
	d = sealed(t, dir, d)
	d.Job.Path = os.Getenv("PATH")

	// Planted after the seal: a stale-proof bytecode of other code, and a
	// json module in the working directory.
	write("evil.py", "print('evil bytecode')\n")
	var ver string
	if out, err := exec.Command(py, "-c", "import sys; print(sys.implementation.cache_tag)").Output(); err == nil {
		ver = strings.TrimSpace(string(out))
	}
	compile := exec.Command(py, "-c", "import py_compile; py_compile.compile('evil.py', cfile='pkg/__pycache__/x."+ver+".pyc', invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)")
	compile.Dir = dir
	if out, err := compile.CombinedOutput(); err != nil {
		t.Fatalf("planting bytecode: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "pkg", "__pycache__", "x."+ver+".pyc")); err != nil {
		t.Fatal(err)
	}
	write("json.py", "def dumps(v): return 'evil json'\n")
	write("evil/python3", "#!/bin/sh\necho evil python\n")
	t.Setenv("PATH", filepath.Join(dir, "evil")+string(os.PathListSeparator)+os.Getenv("PATH"))

	res, err := Runner{Dir: dir}.Run(context.Background(), d, "2026-11-02")
	if err != nil {
		t.Fatalf("%v\n%s", err, res.Output)
	}
	if got := strings.TrimSpace(res.Output); got != "sealed 1" {
		t.Errorf("python3 -m pkg.x printed %q, want the sealed module's \"sealed 1\"", got)
	}
}

// Bounds are what dbt's --event-time-start/end take: a day in its own
// timezone (23 or 25 hours across a DST change), an hour as the UTC hour
// its key is.
func TestBounds(t *testing.T) {
	ny := "America/New_York"
	for _, c := range []struct {
		grain      refill.Grain
		tz, p      string
		start, end string
	}{
		{refill.GrainDay, "", "2026-11-02", "2026-11-02T00:00:00", "2026-11-03T00:00:00"},
		{refill.GrainDay, ny, "2024-03-10", "2024-03-10T05:00:00", "2024-03-11T04:00:00"},
		{refill.GrainDay, ny, "2024-11-03", "2024-11-03T04:00:00", "2024-11-04T05:00:00"},
		{refill.GrainHour, "", "2026-11-02T05", "2026-11-02T05:00:00", "2026-11-02T06:00:00"},
		{refill.GrainHour, ny, "2024-07-01T12", "2024-07-01T12:00:00", "2024-07-01T13:00:00"},
		{refill.GrainHour, ny, "2024-03-10T06", "2024-03-10T06:00:00", "2024-03-10T07:00:00"},
		{refill.GrainHour, ny, "2024-03-10T07", "2024-03-10T07:00:00", "2024-03-10T08:00:00"},
	} {
		start, end, err := Bounds(refill.TableRef{Table: "t", Column: "at", Grain: c.grain, Timezone: c.tz}, c.p)
		if err != nil || start != c.start || end != c.end {
			t.Errorf("Bounds(%s %s %q) = %s..%s (%v), want %s..%s", c.grain, c.p, c.tz, start, end, err, c.start, c.end)
		}
	}
}
