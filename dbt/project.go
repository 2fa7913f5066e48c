package dbt

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/refill-dev/refill"
)

// FindProject returns the directory of the dbt project whose models an
// import's jobs run: projectDir when given (relative to base, refill.yaml's
// directory), else the nearest directory at or above the manifest's that
// holds dbt_project.yml (a manifest is written to the project's target/).
func FindProject(manifest, projectDir, base string) (string, error) {
	if projectDir != "" {
		if !filepath.IsAbs(projectDir) {
			projectDir = filepath.Join(base, projectDir)
		}
		if _, err := os.Stat(filepath.Join(projectDir, "dbt_project.yml")); err != nil {
			return "", refill.BadInputf("project_dir %s holds no dbt_project.yml", projectDir)
		}
		return projectDir, nil
	}
	abs, err := filepath.Abs(manifest)
	if err != nil {
		return "", err
	}
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		if fi, err := os.Stat(filepath.Join(dir, "dbt_project.yml")); err == nil && fi.Mode().IsRegular() {
			return dir, nil
		}
		if parent := filepath.Dir(dir); parent == dir {
			break
		}
	}
	return "", refill.BadInputf("no dbt_project.yml in %s or any directory above it: refill seals the dbt project a model runs from (its models, macros and packages), so it must find it; set datasets_from.project_dir", filepath.Dir(abs))
}

// projectPaths are dbt_project.yml's keys that name where dbt reads code
// and data it builds from, with dbt's defaults.
type projectPaths struct {
	ModelPaths    []string `yaml:"model-paths"`
	MacroPaths    []string `yaml:"macro-paths"`
	SeedPaths     []string `yaml:"seed-paths"`
	SnapshotPaths []string `yaml:"snapshot-paths"`
	TestPaths     []string `yaml:"test-paths"`
	AnalysisPaths []string `yaml:"analysis-paths"`
	PackagesPath  string   `yaml:"packages-install-path"`
	// dbt before 1.0 named two of them differently.
	SourcePaths []string `yaml:"source-paths"`
	DataPaths   []string `yaml:"data-paths"`
}

// ProjectFiles returns the globs, relative to base (refill.yaml's
// directory), that seal the dbt project at dir: dbt_project.yml,
// packages.yml, dependencies.yml, profiles.yml and selectors.yml, and
// every file under its model, macro, seed, snapshot, test and analysis
// paths and its installed packages, as dbt_project.yml sets them (dbt's
// defaults otherwise). A path that does not exist yet is sealed as empty,
// so a macro added there later changes the seal. target/ and logs/, which
// dbt writes as it runs, are not code and are left out.
func ProjectFiles(dir, base string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "dbt_project.yml"))
	if err != nil {
		return nil, refill.BadInputf("dbt project %s: %v", dir, err)
	}
	var p projectPaths
	if err := yaml.Unmarshal(b, &p); err != nil {
		return nil, refill.BadInputf("dbt project %s: dbt_project.yml: %s", dir, oneLine(err.Error()))
	}
	or := func(v []string, def ...string) []string {
		if len(v) == 0 {
			return def
		}
		return v
	}
	dirs := slices.Concat(or(p.ModelPaths, or(p.SourcePaths, "models")...), or(p.MacroPaths, "macros"), or(p.SeedPaths, or(p.DataPaths, "seeds")...),
		or(p.SnapshotPaths, "snapshots"), or(p.TestPaths, "tests"), or(p.AnalysisPaths, "analyses"))
	if p.PackagesPath == "" {
		p.PackagesPath = "dbt_packages"
	}
	dirs = append(dirs, p.PackagesPath)
	rel, err := filepath.Rel(base, dir)
	if err != nil {
		return nil, refill.BadInputf("dbt project %s: %v", dir, err)
	}
	var out []string
	for _, f := range []string{"dbt_project.yml", "packages.yml", "dependencies.yml", "profiles.yml", "selectors.yml"} {
		out = append(out, globPath(rel, f))
	}
	for _, d := range dirs {
		d = strings.Trim(filepath.ToSlash(filepath.Clean(d)), "/")
		if d == "" || d == "." || strings.HasPrefix(d, "../") || filepath.IsAbs(d) {
			return nil, refill.BadInputf("dbt project %s: dbt_project.yml names %q as a path: refill seals paths inside the project", dir, d)
		}
		out = append(out, globPath(rel, d)+"/**")
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// globPath joins rel and name into a glob that matches them literally.
func globPath(rel, name string) string {
	p := filepath.ToSlash(filepath.Join(rel, name))
	var b strings.Builder
	for _, r := range p {
		if strings.ContainsRune(`*?[]{}\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// SealProject names, in every job of the import, the dbt project it runs
// from (relative to refill.yaml), whose files are sealed with it.
func (imp *Import) SealProject(dir string) {
	for i := range imp.Datasets {
		if j := imp.Datasets[i].Job; j != nil {
			j.DbtProject = dir
		}
	}
}
