package main

import (
	"bytes"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// probeMarker starts every secret these tests give refill, so that the
// hostile job can look for secrets it does not know. The job's script
// never holds the marker whole (refill reads the script, so its text is in
// refill's memory): it builds it from two halves.
const probeMarker = "REFILLPROBE"

// hostileJob looks for refill's secrets everywhere a command job might:
// its own environment, /proc/$PPID/environ and every /proc/*/environ it
// can read, refill's memory (/proc/$PPID/mem, each readable mapping
// /proc/$PPID/maps lists), and ptrace (PTRACE_SEIZE, which stops nothing;
// the tracer's exit detaches it). It appends what it tried and what it
// found to the report named by its second argument, and writes its
// partition's row, as a job would, to the SQLite warehouse it is told.
const hostileJob = `#!/bin/sh
report="$2"
m="REFILL""PROBE"
echo "job uid=$(id -u) parent=$PPID" >> "$report"
env | grep -a -o "$m[0-9a-f]*" | sed 's/^/FOUND own-environment /' >> "$report"
read=0 denied=0
for f in /proc/[0-9]*/environ; do
	if tr '\0' '\n' < "$f" > /dev/null 2>&1; then
		read=$((read+1))
		tr '\0' '\n' < "$f" 2>/dev/null | grep -a -o "$m[0-9a-f]*" | sed "s|^|FOUND $f |" >> "$report"
	else
		denied=$((denied+1))
	fi
done
if tr '\0' '\n' < /proc/$PPID/environ > /dev/null 2>&1; then
	echo "parent-environ: read" >> "$report"
else
	echo "parent-environ: denied" >> "$report"
fi
echo "environs: read $read, denied $denied" >> "$report"
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
if [ -z "$py" ]; then
	echo "NOTE no python3: memory and ptrace not tried" >> "$report"
else
	"$py" - "$PPID" >> "$report" <<'PY'
import ctypes, os, re, sys
ppid = int(sys.argv[1])
pat = re.compile(("REFILL" "PROBE").encode() + rb"[0-9a-f]{16}")
found = set()
try:
    maps = open("/proc/%d/maps" % ppid).read().splitlines()
    print("maps: read")
except OSError as e:
    maps = []
    print("maps: denied (%s)" % e.strerror)
try:
    mem = open("/proc/%d/mem" % ppid, "rb", buffering=0)
    print("mem: opened")
except OSError as e:
    mem = None
    print("mem: denied (%s)" % e.strerror)
scanned = 0
if mem:
    for line in maps:
        f = line.split()
        if not f[1].startswith("r") or (len(f) > 5 and f[5] in ("[vvar]", "[vsyscall]")):
            continue
        lo, hi = (int(x, 16) for x in f[0].split("-"))
        pos = lo
        while pos < hi and scanned < (1 << 30):
            n = min(1 << 22, hi - pos)
            try:
                mem.seek(pos)
                chunk = mem.read(n)
            except OSError:
                break
            scanned += len(chunk)
            found.update(m.decode() for m in pat.findall(chunk))
            pos += n
    print("mem: scanned %d bytes" % scanned)
for v in sorted(found):
    print("FOUND memory " + v)
if os.environ.get("REFILL_WAREHOUSE", "").startswith("sqlite:"):
    import sqlite3
    db = sqlite3.connect(os.environ["REFILL_WAREHOUSE"][len("sqlite:"):])
    with db:
        db.execute("DELETE FROM hostile WHERE day = ?", (os.environ["REFILL_PARTITION"],))
        db.execute("INSERT INTO hostile VALUES (?, 1)", (os.environ["REFILL_PARTITION"],))
# Last, since a traced refill may pause until this process exits.
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
PTRACE_SEIZE = 0x4206
if libc.ptrace(PTRACE_SEIZE, ppid, None, None) == 0:
    print("ptrace: attached")  # detached when this process exits
else:
    print("ptrace: denied (%s)" % os.strerror(ctypes.get_errno()))
PY
fi
`

// probeSecrets are the secrets the tests set in refill's environment,
// each the marker and 16 hex digits of its own.
func probeSecrets(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range []string{"REFILL_AUDIT_KEY", "SLACK_SIGNING_SECRET", "SLACK_BOT_TOKEN", "HOOK_SECRET", "PGPASSWORD"} {
		var b [8]byte
		rand.Read(b[:])
		out[name] = probeMarker + hex.EncodeToString(b[:])
	}
	return out
}

// secretsProject is a project whose one dataset runs hostileJob, with
// Slack and a webhook configured from the environment, in a directory the
// user nobody can work in (as run.job_user requires: its directory and
// its warehouses writable by nobody). jobUser, when set, is run.job_user.
func secretsProject(t *testing.T, jobUser string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("these tests run refill as root, as it is run on servers, and switch to the user nobody")
	}
	if _, err := user.Lookup("nobody"); err != nil {
		t.Skip("no user nobody")
	}
	dir, err := os.MkdirTemp("", "refill-secrets-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfg := `version: 1
warehouse: sqlite:wh.db
proof_warehouse: sqlite:scratch.db
notify:
  slack: {signing_secret_env: SLACK_SIGNING_SECRET, bot_token_env: SLACK_BOT_TOKEN, channel: C0123, api_url: "http://127.0.0.1:1/"}
  webhooks: [{url: "http://127.0.0.1:1/hook", secret_env: HOOK_SECRET}]
datasets:
  hostile:
    table: hostile
    partition: {column: day}
    job:
      command: ["./hostile.sh", "{{partition}}", "` + filepath.Join(dir, "report.txt") + `"]
`
	if jobUser != "" {
		cfg += "run: {job_user: " + jobUser + "}\n"
	}
	files := map[string]string{"refill.yaml": cfg, "hostile.sh": hostileJob}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"wh.db", "scratch.db"} {
		db, err := sql.Open("sqlite", filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`CREATE TABLE hostile (day TEXT NOT NULL, n INTEGER)`); err != nil {
			t.Fatal(err)
		}
		db.Close()
		if err := os.Chown(filepath.Join(dir, name), 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// probe plans, approves and applies the hostile job's partition with the
// secrets in refill's environment, and returns the job's report. With
// asNobody, refill itself runs as nobody, from a copy of the binary
// nobody can execute.
func probe(t *testing.T, dir string, secrets map[string]string, asNobody bool) string {
	t.Helper()
	var env []string
	for k, v := range secrets {
		env = append(env, k+"="+v)
	}
	bin := binary
	if asNobody {
		bin = filepath.Join(dir, "refill")
		b, err := os.ReadFile(binary)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
		// go-graphviz caches its WebAssembly under $TMPDIR, and root's
		// cache in /tmp is not nobody's to open.
		tmp := filepath.Join(dir, "tmp")
		if err := os.Mkdir(tmp, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(tmp, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		env = append(env, "TMPDIR="+tmp)
	}
	must := func(args ...string) result {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.Env = append(append(os.Environ(), "REFILL_NOW="+demoNow, "REFILL_USER=", "REFILL_CONFIG="), env...)
		if asNobody {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v: %v\n%s%s", args, err, out.String(), errb.String())
		}
		return result{0, out.String(), errb.String()}
	}
	id := decode[planJSON](t, must("plan", "hostile", "--from", "2026-11-01", "--to", "2026-11-01", "--reason", "r", "--as", "alice", "-o", "json").stdout).ID
	must("approve", id, "--as", "bob")
	must("apply", id, "--as", "alice")
	return mustRead(t, filepath.Join(dir, "report.txt"))
}

// leaks lists the secrets report shows the job found, with where.
func leaks(report string, secrets map[string]string) []string {
	var out []string
	for _, line := range strings.Split(report, "\n") {
		rest, ok := strings.CutPrefix(line, "FOUND ")
		if !ok {
			continue
		}
		for name, v := range secrets {
			if strings.HasSuffix(rest, " "+v) {
				out = append(out, name+" in "+strings.TrimSuffix(rest, " "+v))
			}
		}
	}
	return out
}

// TestSecretsNeverReachAJob: refill running as root, with its audit key,
// Slack's signing secret and bot token, a webhook's secret and PGPASSWORD
// in its environment, starts a command job that looks for them. It finds
// none in any environment it can read — its own, refill's, any process's —
// since refill re-executed itself without them. As root, the job can
// still read refill's memory (README, Security): the test shows it can,
// so that the next test's "not found" means something.
func TestSecretsNeverReachAJob(t *testing.T) {
	t.Parallel()
	dir := secretsProject(t, "")
	secrets := probeSecrets(t)
	report := probe(t, dir, secrets, false)
	t.Logf("the job's report:\n%s", report)
	if !strings.Contains(report, "job uid=0 ") || !strings.Contains(report, "parent-environ: read") {
		t.Fatalf("the job did not run as root reading refill's environment:\n%s", report)
	}
	for _, leak := range leaks(report, secrets) {
		if !strings.HasPrefix(strings.SplitN(leak, " in ", 2)[1], "memory") {
			t.Errorf("the job found %s", leak)
		}
	}
	if !strings.Contains(report, "FOUND memory "+secrets["REFILL_AUDIT_KEY"]) {
		t.Errorf("a job run as root did not find the audit key in refill's memory: the memory probe cannot be trusted")
	}
}

// TestSecretsNeverReachAJobUser: with run.job_user, the same job runs as
// nobody, in a run and in a proof: it finds no secret anywhere — no
// environment, not refill's memory (its maps and mem are closed), and
// ptrace is refused.
func TestSecretsNeverReachAJobUser(t *testing.T) {
	t.Parallel()
	dir := secretsProject(t, "nobody")
	secrets := probeSecrets(t)
	probe(t, dir, secrets, false)
	env := []string{}
	for k, v := range secrets {
		env = append(env, k+"="+v)
	}
	if r := run(t, dir, env, "prove", "hostile", "--partition", "2026-11-01"); r.code != 0 {
		t.Fatalf("prove as nobody: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	report := mustRead(t, filepath.Join(dir, "report.txt"))
	t.Logf("the job's report:\n%s", report)
	if runs := strings.Count(report, "job uid=65534 "); runs < 4 || strings.Count(report, "job uid=") != runs {
		t.Fatalf("want every run of the job (the run, and the proof's builds) as nobody:\n%s", report)
	}
	for _, want := range []string{"parent-environ: denied", "maps: denied", "mem: denied", "ptrace: denied"} {
		if strings.Count(report, want) != strings.Count(report, "job uid=") {
			if strings.Contains(report, "NOTE no python3") && !strings.HasPrefix(want, "parent-environ") {
				t.Logf("python3 is missing: %s not tried", want)
				continue
			}
			t.Errorf("not every run of the job says %q:\n%s", want, report)
		}
	}
	for _, leak := range leaks(report, secrets) {
		t.Errorf("the job found %s", leak)
	}
}

// TestSecretsNeverReachASameUserJob: refill running as an unprivileged
// user (nobody) and its job running as the same user — the case every
// refill that is not root is in. The job finds no secret in any
// environment, and cannot read refill's memory nor trace it, since
// refill made itself non-dumpable.
func TestSecretsNeverReachASameUserJob(t *testing.T) {
	t.Parallel()
	dir := secretsProject(t, "")
	secrets := probeSecrets(t)
	report := probe(t, dir, secrets, true)
	t.Logf("the job's report:\n%s", report)
	if !strings.Contains(report, "job uid=65534 ") {
		t.Fatalf("the job did not run as nobody:\n%s", report)
	}
	for _, want := range []string{"parent-environ: denied", "maps: denied", "mem: denied", "ptrace: denied"} {
		if !strings.Contains(report, want) && !(strings.Contains(report, "NOTE no python3") && want != "parent-environ: denied") {
			t.Errorf("the report does not say %q", want)
		}
	}
	for _, leak := range leaks(report, secrets) {
		t.Errorf("the job found %s", leak)
	}
}

// TestJobConnectsWithTheWithheldPassword: with a PostgreSQL warehouse
// whose DSN gives no password, refill connects with PGPASSWORD although
// it is gone from its environment, and a command job is told the warehouse
// with that password (REFILL_WAREHOUSE), since it must connect too. The
// state store's DSN, kept in state_env, reaches no job: not in its
// environment, nor in refill's.
func TestJobConnectsWithTheWithheldPassword(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wh, state := pgSchema(t), pgSchema(t)
	cfg := `version: 1
warehouse: "` + wh + `"
state_env: REFILL_STATE_DSN
datasets:
  pg:
    job:
      command: ["sh", "-c", "printf '%s\\n' \"$REFILL_WAREHOUSE\" > wh.txt; tr '\\0' '\\n' < /proc/$PPID/environ > parent-env.txt; env > env.txt"]
`
	if err := os.WriteFile(filepath.Join(dir, "refill.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	pw := probeMarker + "0123456789abcdef"
	env := []string{"PGPASSWORD=" + pw, "REFILL_STATE_DSN=" + state}
	must := func(args ...string) result {
		t.Helper()
		r := run(t, dir, env, args...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		return r
	}
	id := decode[planJSON](t, must("plan", "pg", "--from", "2026-11-01", "--to", "2026-11-01", "--reason", "r", "--as", "alice", "-o", "json").stdout).ID
	must("approve", id, "--as", "bob")
	must("apply", id, "--as", "alice")

	told, err := url.Parse(strings.TrimSpace(mustRead(t, filepath.Join(dir, "wh.txt"))))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := told.User.Password(); got != pw {
		t.Errorf("REFILL_WAREHOUSE has password %q, want PGPASSWORD's", got)
	}
	schema := regexp.MustCompile(`refill_test_[0-9a-f]+`).FindString(state)
	for _, f := range []string{"env.txt", "parent-env.txt"} {
		got := mustRead(t, filepath.Join(dir, f))
		if strings.Contains(got, "PGPASSWORD") || strings.Contains(got, schema) || strings.Contains(got, "REFILL_STATE_DSN") {
			t.Errorf("%s holds PGPASSWORD or the state store's DSN:\n%s", f, got)
		}
	}
	// The state store is the one state_env named.
	if r := must("plans", "-o", "json"); !strings.Contains(r.stdout, id) {
		t.Errorf("plans: %s", r.stdout)
	}
}

// TestBrokenConfigWithSecrets: with secrets in its environment, refill
// reads the config before the command does, to know which to drop; a
// config that does not load is still the command's to report (exit 2,
// file:line), and a secret's file that is missing is such an error.
func TestBrokenConfigWithSecrets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := []string{"REFILL_AUDIT_KEY=k", "SLACK_SIGNING_SECRET=s"}
	for doc, want := range map[string]string{
		"version: 1\nwarehouse: sqlite:wh.db\naudit:\n  key_file: audit.key\n": "refill.yaml:4: audit.key_file: cannot read audit.key (" + filepath.Join(dir, "audit.key") + "): no such file or directory",
		"version: [\n": "refill.yaml:1:",
	} {
		if err := os.WriteFile(filepath.Join(dir, "refill.yaml"), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		if r := run(t, dir, env, "plans"); r.code != 2 || !strings.Contains(r.stderr, want) {
			t.Errorf("%q: exit %d, want 2 with %q:\n%s", doc, r.code, want, r.stderr)
		}
	}
}
