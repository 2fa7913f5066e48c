package main

import (
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestEveryRunEnds: an attempt cut off by River's time limit is a failure
// like any other; when the attempts run out the run fails with the reason,
// apply exits non-zero, and the plan is not left running.
func TestEveryRunEnds(t *testing.T) {
	dir := t.TempDir()
	cfg := `version: 1
warehouse: sqlite:wh.db
run: {attempts: 2, rescue_after: 3s, backoff: 100ms}
datasets:
  stuck:
    job:
      command: ["sleep", "30"]
`
	if err := os.WriteFile(filepath.Join(dir, "refill.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", filepath.Join(dir, "wh.db"))
	if err != nil {
		t.Fatal(err)
	}
	db.Exec(`CREATE TABLE unused (a INTEGER)`)
	db.Close()
	id := decode[planJSON](t, step(t, dir, 0, "", "plan", "stuck", "--from", "2026-11-01", "--to", "2026-11-01", "--reason", "r", "--as", "alice", "-o", "json").stdout).ID
	step(t, dir, 0, "", "approve", id, "--as", "bob")

	cmd := exec.Command(binary, "apply", id, "--as", "alice")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "REFILL_NOW="+demoNow, "REFILL_CONFIG=")
	done := make(chan struct{})
	var out []byte
	go func() { out, _ = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("apply still waiting after 90 s:\n%s", out)
	}
	if cmd.ProcessState.ExitCode() == 0 {
		t.Fatalf("apply of a job that always times out exited 0:\n%s", out)
	}
	for _, want := range []string{"attempt 1 of 2 failed, will retry", "ran past its time limit", "attempt 2 of 2 failed"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("apply's log lacks %q:\n%s", want, out)
		}
	}
	step(t, dir, 0, "status failed", "show", id)
}
