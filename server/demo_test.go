package server_test

import (
	"context"
	"io/fs"
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
	err := filepath.WalkDir(demoTemplate.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(demoTemplate.dir, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
	sc := *demoTemplate.sc
	sc.Dir, sc.Config = dst, filepath.Join(dst, "refill.yaml")
	return &sc
}
