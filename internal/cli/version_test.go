package cli

import (
	"runtime"
	"strings"
	"testing"
)

// TestBuildInfoIsTheBinarys: the version comes from the build information
// Go records, and reads the same in one line and in JSON.
func TestBuildInfoIsTheBinarys(t *testing.T) {
	b := Build()
	if b.Go != runtime.Version() || b.Module != "github.com/refill-dev/refill" || b.Version == "" {
		t.Fatalf("build info = %+v", b)
	}
	line := b.String()
	if !strings.HasPrefix(line, "refill "+b.Version) || !strings.HasSuffix(line, runtime.Version()) {
		t.Errorf("--version says %q", line)
	}
	b.Commit, b.Modified, b.CommitTime = "0123456789abcdef0123", true, "2026-12-01T10:00:00Z"
	if got := b.String(); !strings.Contains(got, "(0123456789ab, modified, 2026-12-01T10:00:00Z)") {
		t.Errorf("with a commit: %q", got)
	}
}
