package server_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/refill-dev/refill/demo"
)

// demoTemplate is one demo written per test process; each test gets its
// own copy. Writing the demo's 26,000 events costs seconds under -race,
// copying two files a few milliseconds, and every server test starts from
// the same demo.
var demoTemplate struct {
	once sync.Once
	dir  string
	sc   *demo.Scenario
	err  error
}

// demoCopy is demo.Write(dir/demo, now) for a test, from the template.
func demoCopy(t testing.TB, now time.Time) *demo.Scenario {
	t.Helper()
	demoTemplate.once.Do(func() {
		// Not t.TempDir: the template outlives the test that made it.
		dir, err := os.MkdirTemp("", "refill-server-demo-")
		if err != nil {
			demoTemplate.err = err
			return
		}
		demoTemplate.dir = filepath.Join(dir, "demo")
		demoTemplate.sc, demoTemplate.err = demo.Write(context.Background(), demoTemplate.dir, now)
	})
	if demoTemplate.err != nil {
		t.Fatal(demoTemplate.err)
	}
	if !demoTemplate.sc.Today.Equal(now.UTC().Truncate(24 * time.Hour)) {
		t.Fatalf("the demo template is for %s, not %s", demoTemplate.sc.Today, now)
	}
	dst := filepath.Join(t.TempDir(), "demo")
	if err := os.CopyFS(dst, os.DirFS(demoTemplate.dir)); err != nil {
		t.Fatal(err)
	}
	sc := *demoTemplate.sc
	sc.Dir, sc.Config = dst, filepath.Join(dst, "refill.yaml")
	return &sc
}
