package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// interpretedProject is a manual project whose job runs its script
// through an interpreter (sh ./export.sh), sourcing a helper beside it
// that job.files seals.
func interpretedProject(t *testing.T) string {
	t.Helper()
	dir := smallProject(t, `version: 1
warehouse: sqlite:wh.db
users:
  alice: {roles: [engineer]}
  carol: {roles: [lead]}
run: {max_active: 1}
datasets:
  feed:
    tags: [external]
    job:
      command: ["sh", "./export.sh", "{{partition}}"]
      files: ["lib/*.sh"]
      env: [PARTNER_TOKEN]
`)
	write := func(rel, body string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("export.sh", "#!/bin/sh\n. \"$(dirname \"$0\")/lib/common.sh\"\nexport_day \"$1\"\n")
	write("lib/common.sh", "export_day() { touch \"ran-$1\"; }\n")
	return dir
}

// TestInterpretedScriptsAreSealed reproduces the bypass of a script run
// through an interpreter: a manual plan of `sh ./export.sh` was
// snapshotted, scoped and approved by a lead, then a line appended to the
// script ran under that approval. Now the script, the helper it sources
// (job.files) and the value of a variable it passes through are sealed:
// an edit makes the plan stale and apply runs nothing; and a job that
// edits its own sealed files while it runs fails, the edit never running.
func TestInterpretedScriptsAreSealed(t *testing.T) {
	t.Parallel()
	dir := interpretedProject(t)
	token := []string{"PARTNER_TOKEN=first-secret-value"}
	stepEnv := func(code int, want string, args ...string) result {
		t.Helper()
		r := run(t, dir, token, args...)
		if r.code != code || !strings.Contains(r.stdout+r.stderr, want) {
			t.Fatalf("%v: exit %d, want %d with %q\nstdout: %s\nstderr: %s", args, r.code, code, want, r.stdout, r.stderr)
		}
		return r
	}
	id := decode[planJSON](t, stepEnv(0, "", "plan", "feed", "--from", "2026-11-01", "--to", "2026-11-02", "--reason", "resend", "--as", "alice", "-o", "json").stdout).ID
	stepEnv(0, "", "snapshot", id, "--as", "alice")
	stepEnv(0, "", "scope", id, "--as", "alice", "--note", "two days of the partner feed")
	stepEnv(0, "", "approve", id, "--as", "carol")
	stepEnv(0, "May run now: yes", "show", id)

	script := filepath.Join(dir, "export.sh")
	orig, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, script, "touch \"pwned-$1\"\n")
	r := stepEnv(0, "the job of feed changed: export.sh changed (sealed sha256:", "show", id)
	if !strings.Contains(r.stdout, "May run now: no") {
		t.Fatalf("show after the edit:\n%s", r.stdout)
	}
	stepEnv(4, "stale", "apply", id, "--as", "alice")
	noFile(t, dir, "pwned-2026-11-01", "ran-2026-11-01")

	// The helper the script sources is sealed by job.files.
	if err := os.WriteFile(script, orig, 0o755); err != nil {
		t.Fatal(err)
	}
	stepEnv(0, "May run now: yes", "show", id)
	helper := filepath.Join(dir, "lib", "common.sh")
	mustAppend(t, helper, "touch pwned-helper\n")
	stepEnv(0, "the files matching lib/*.sh changed (sealed sha256:", "show", id)
	stepEnv(4, "stale", "apply", id, "--as", "alice")
	// So is a new file the glob would match.
	if err := os.WriteFile(helper, []byte("export_day() { touch \"ran-$1\"; }\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lib", "extra.sh"), []byte("x\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	stepEnv(0, "the files matching lib/*.sh changed", "show", id)
	os.Remove(filepath.Join(dir, "lib", "extra.sh"))

	// The value of a passed-through variable is sealed as a keyed digest:
	// show names the variable, never a value.
	other := run(t, dir, []string{"PARTNER_TOKEN=second-secret-value"}, "show", id)
	if !strings.Contains(other.stdout, "the value of PARTNER_TOKEN in its environment") || strings.Contains(other.stdout+other.stderr, "secret-value") {
		t.Fatalf("show with another PARTNER_TOKEN:\n%s%s", other.stdout, other.stderr)
	}
	if st := openState(t, dir); true {
		var body string
		if err := st.QueryRow(`SELECT body FROM plans WHERE id = ?`, id).Scan(&body); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(body, "first-secret-value") || !strings.Contains(body, `"PARTNER_TOKEN":"hmac-sha256:`) {
			t.Errorf("the stored plan holds the value, or no keyed digest of it")
		}
	}
	if r := run(t, dir, []string{"PARTNER_TOKEN=second-secret-value"}, "apply", id, "--as", "alice"); r.code != 4 {
		t.Fatalf("apply with another PARTNER_TOKEN: exit %d\n%s", r.code, r.stderr)
	}
	noFile(t, dir, "pwned-helper", "ran-2026-11-01")

	// As sealed, it runs; a job that edits its own sealed helper while it
	// runs fails its partition, and the edit never runs.
	stepEnv(0, "May run now: yes", "show", id)
	if err := os.WriteFile(helper, []byte("export_day() { touch \"ran-$1\"; echo 'touch pwned-later' >> lib/common.sh; }\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// (Sealing that version takes a new plan: the old one is stale.)
	id2 := decode[planJSON](t, stepEnv(0, "", "plan", "feed", "--from", "2026-11-03", "--to", "2026-11-04", "--reason", "resend", "--as", "alice", "-o", "json").stdout).ID
	stepEnv(0, "", "snapshot", id2, "--as", "alice")
	stepEnv(0, "", "scope", id2, "--as", "alice", "--note", "two more days")
	stepEnv(0, "", "approve", id2, "--as", "carol")
	r = run(t, dir, token, "apply", id2, "--as", "alice")
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "the files matching lib/*.sh changed while the job ran") {
		t.Fatalf("apply of a job editing its own helper: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	noFile(t, dir, "pwned-later")
	// Whichever partition ran first edited the helper; the other never
	// ran (max_active 1: one after the other, in no promised order).
	_, err3 := os.Stat(filepath.Join(dir, "ran-2026-11-03"))
	_, err4 := os.Stat(filepath.Join(dir, "ran-2026-11-04"))
	if (err3 == nil) == (err4 == nil) {
		t.Errorf("ran 11-03: %v, ran 11-04: %v; want exactly one of them run:\n%s%s", err3 == nil, err4 == nil, r.stdout, r.stderr)
	}
}

// noFile fails when any of names exists in dir.
func noFile(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			t.Errorf("%s exists: what was not approved ran", n)
		}
	}
}
