package refill_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestLayoutTableMatchesThePackages: README's Layout table names every
// package of the module and every file of the root package, and nothing
// that is not there, so the map of the code stays the code's.
func TestLayoutTableMatchesThePackages(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	for _, marker := range []string{"\n<<<<<<< ", "\n>>>>>>> "} {
		if strings.Contains(text, marker) {
			t.Errorf("README.md holds a merge conflict's marker %q", strings.TrimSpace(marker))
		}
	}
	start := strings.Index(text, "## Layout")
	if start < 0 {
		t.Fatal("README.md has no ## Layout section")
	}
	section := text[start:]
	if end := strings.Index(section[len("## Layout"):], "\n## "); end >= 0 {
		section = section[:len("## Layout")+end]
	}

	// The packages the table names: the backticked paths of each row's
	// first column, with {a,b} expanded.
	named := map[string]bool{}
	var rootRow string
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") {
			continue
		}
		first := cells[1]
		if strings.Contains(first, "(root)") {
			rootRow = line
			named["."] = true
			continue
		}
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(first, -1) {
			for _, p := range expand(m[1]) {
				named[p] = true
			}
		}
	}

	// The packages there are: directories holding a non-test Go file.
	have := map[string]bool{}
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || (strings.HasPrefix(d.Name(), ".") && path != ".")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			have[filepath.Dir(path)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for p := range have {
		if !named[p] {
			t.Errorf("package %s is not in README's Layout table", p)
		}
	}
	for p := range named {
		if !have[p] {
			t.Errorf("README's Layout table names %s, which is not a package", p)
		}
	}

	// Every root file is named in the root row, and every file named there
	// exists.
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") && !strings.Contains(rootRow, "`"+f+"`") {
			t.Errorf("root file %s is not named in the Layout table's root row", f)
		}
	}
	for _, m := range regexp.MustCompile("`([a-z_]+\\.go)`").FindAllStringSubmatch(rootRow, -1) {
		if !slices.Contains(files, m[1]) {
			t.Errorf("the Layout table's root row names %s, which is not a root file", m[1])
		}
	}
}

// expand turns "warehouse/{sqlite,postgres}" into both paths.
func expand(p string) []string {
	i, j := strings.Index(p, "{"), strings.Index(p, "}")
	if i < 0 || j < i {
		return []string{p}
	}
	var out []string
	for _, alt := range strings.Split(p[i+1:j], ",") {
		out = append(out, p[:i]+alt+p[j+1:])
	}
	return out
}
