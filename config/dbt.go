package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/dbt"
)

// datasetsFrom imports the datasets of datasets_from: {dbt_manifest: PATH}
// (PATH relative to this file). Its own keys are checked at their lines;
// a problem with the manifest, or with what a node's meta.refill asks for,
// is reported at dbt_manifest's line and names the manifest and the node.
// dbtTarget is a dbt target's name as profiles.yml keys it.
var dbtTarget = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_-]*$`)

// findProgram finds a command's program as a command job would: relative
// to this file's directory when it has a slash, else on the job PATH
// (run.path, path).
func (c *converter) findProgram(program, path string) (string, bool) {
	if strings.Contains(program, "/") {
		if !filepath.IsAbs(program) {
			program = filepath.Join(c.dir, program)
		}
		st, err := os.Stat(program)
		return program, err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(c.dir, dir)
		}
		p := filepath.Join(dir, program)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}

func (c *converter) datasetsFrom(raw *rawDatasetsFrom, jobPath string) []*refill.Dataset {
	const key = "datasets_from"
	ok := true
	bad := func(path, format string, args ...any) {
		c.errorf(path, format, args...)
		ok = false
	}
	if raw.DbtManifest == "" {
		bad(child(key, "dbt_manifest"), "required: the path of the dbt project's target/manifest.json (written by dbt parse, compile or build), relative to this file")
	}
	opts := dbt.Options{Env: raw.Env, ProjectDir: raw.ProjectDir, Name: raw.DbtManifest, ProofTarget: raw.ProofTarget}
	if raw.ProofTarget != "" && !dbtTarget.MatchString(raw.ProofTarget) {
		bad(child(key, "proof_target"), "%q is not a dbt target name (letters, digits, _ and -)", clip(raw.ProofTarget))
	}
	// With its own command the version decides nothing: nothing is run.
	// Else dbt is asked, as a job would find it, with nothing of refill's
	// environment but PATH and HOME (no secret of refill's reaches it).
	if raw.Command == nil {
		opts.AskVersion = func() string {
			found, ok := c.findProgram("dbt", jobPath)
			if !ok {
				return ""
			}
			out, err := dbt.ReadVersion(found, []string{"PATH=" + jobPath, "HOME=" + os.Getenv("HOME")})
			if err != nil {
				return ""
			}
			return out
		}
	}
	if raw.Command != nil {
		opts.Command = *raw.Command
		if err := dbt.CheckCommand(opts.Command); err != nil {
			bad(child(key, "command"), "%v", err)
		}
	}
	for i, e := range raw.Env {
		if name, _, _ := strings.Cut(e, "="); !envName.MatchString(name) {
			bad(elem(child(key, "env"), i), "want NAME (passed through from refill's environment) or NAME=value")
		}
	}
	if raw.ProjectDir != "" {
		dir := raw.ProjectDir
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(c.dir, dir)
		}
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			bad(child(key, "project_dir"), "%s is not a directory (a relative path is from this file's directory)", written(raw.ProjectDir))
		}
		if raw.Command != nil && !slices.ContainsFunc(*raw.Command, func(a string) bool { return strings.Contains(a, "{{project_dir}}") }) {
			bad(child(key, "project_dir"), "the command does not use it: put {{project_dir}} in command (as in --project-dir {{project_dir}}), or drop project_dir")
		}
	}
	if !ok {
		return nil
	}
	path := raw.DbtManifest
	if !filepath.IsAbs(path) {
		path = filepath.Join(c.dir, path)
	}
	at := child(key, "dbt_manifest")
	imp, err := dbt.Load(path, opts)
	if err != nil {
		c.errorf(at, "%v", err)
		return nil
	}
	// The models run from the dbt project: its models, macros and
	// packages are sealed with every job (sealCommands), as a script's
	// files are.
	proj, err := dbt.FindProject(path, raw.ProjectDir, c.dir)
	if err != nil {
		if raw.ProjectDir != "" {
			at = child(key, "project_dir")
		}
		c.errorf(at, "%v", err)
		return nil
	}
	rel, err := filepath.Rel(c.dir, proj)
	if err != nil {
		c.errorf(at, "%v", err)
		return nil
	}
	imp.SealProject(filepath.ToSlash(rel))
	ds, problems := fromImport(imp)
	for _, p := range problems {
		c.errorf(at, "dbt manifest %s: %s", raw.DbtManifest, p)
	}
	if len(problems) > 0 {
		return nil
	}
	line := c.ix.line(at)
	for _, d := range ds {
		d.Line = line
		d.From = "dbt:" + raw.DbtManifest
	}
	if c.nodes == nil {
		c.nodes = map[string]string{}
	}
	for _, d := range imp.Datasets {
		c.nodes[d.Name] = d.Node
	}
	return ds
}

// merge adds the imported datasets to those of datasets:. A name in both
// is an error that names both places, never an override: the dataset
// would otherwise be half dbt's and half the file's, and which half
// decides what gets rewritten would be one more rule to remember. What
// refill needs to know of a dbt model (its partition, tags and checks)
// goes in the model's meta.refill instead; a dataset of datasets: may
// list an imported one as its upstream.
func (c *converter) merge(cfg *refill.Config, imported []*refill.Dataset) {
	for _, d := range imported {
		path := child("datasets", d.Name)
		if _, ok := cfg.Datasets[d.Name]; ok {
			c.errorf(path, "dataset %s is also imported from the dbt manifest (%s, datasets_from at line %d): rename this one, or remove it and set what it adds in the model's meta.refill",
				d.Name, c.nodes[d.Name], d.Line)
			continue
		}
		cfg.Datasets[d.Name] = d
		// Later checks (a table two datasets share, a cycle) report an
		// imported dataset at datasets_from.
		if _, ok := c.ix.lines[path]; !ok {
			c.ix.lines[path] = d.Line
		}
	}
}

// lineageOnly reads lineage_only: why, in words, the dataset is part of the
// lineage but never rebuilt nor gated (refill.Dataset.LineageOnly). A job
// or a schedule would say the opposite.
func (c *converter) lineageOnly(path string, raw *rawDataset, d *refill.Dataset) {
	p := child(path, "lineage_only")
	why := strings.TrimSpace(*raw.LineageOnly)
	switch strings.ToLower(why) {
	case "":
		c.errorf(p, "say why the dataset is lineage only, as in lineage_only: materialized as a view")
	case "true", "false", "yes", "no", "on", "off":
		c.errorf(p, "want the reason in words, as in lineage_only: materialized as a view (not %s)", why)
	}
	if raw.Job != nil {
		c.errorf(p, "a lineage-only dataset is never rebuilt, and this one has a job: remove job: or lineage_only:")
	}
	if raw.Schedule != nil {
		c.errorf(child(path, "schedule"), "a lineage-only dataset is never rebuilt, so the watcher has nothing to schedule")
	}
	d.LineageOnly, d.Why = true, why
}

// rawImport is the document an import's YAML is: a datasets: block.
type rawImport struct {
	Datasets map[string]*rawDataset `yaml:"datasets"`
}

// fromImport turns an import into datasets by reading the very YAML
// `refill import dbt` prints, through the checks a hand-written datasets:
// block goes through, so the two cannot differ. Problems come back as
// text naming the node: "model.shop.orders (dataset orders): checks.volume:
// ...".
func fromImport(imp *dbt.Import) ([]*refill.Dataset, []string) {
	text, err := imp.YAML()
	if err != nil {
		return nil, []string{err.Error()}
	}
	nodes := map[string]string{}
	for _, d := range imp.Datasets {
		nodes[d.Name] = d.Node
	}
	errs := &errorList{file: imp.File}
	ix := newIndex()
	f, err := parseAST(text)
	if err != nil {
		return nil, []string{"the import's YAML does not parse (a bug in refill): " + err.Error()}
	}
	var raw rawImport
	if len(f.Docs) > 0 {
		checkShape(f.Docs[0].Body, reflect.TypeFor[rawImport](), "", ix, errs)
	}
	if len(errs.errs) == 0 {
		if err := decode(text, &raw, true); err != nil {
			errs.errs = append(errs.errs, fromYAML(imp.File, err, ix, text))
		}
	}
	var ds []*refill.Dataset
	if len(errs.errs) == 0 {
		conv := &converter{ix: ix, errs: errs}
		for _, name := range sortedKeys(raw.Datasets) {
			ds = append(ds, conv.dataset(name, raw.Datasets[name]))
		}
	}
	var problems []string
	for _, e := range errs.errs {
		problems = append(problems, nodeProblem(e, nodes))
	}
	return ds, slices.Compact(problems)
}

// nodeProblem words a problem found in an import's YAML by the node it
// came from, since the YAML's lines mean nothing to whoever reads it.
func nodeProblem(e *Error, nodes map[string]string) string {
	rest, ok := strings.CutPrefix(e.Key, "datasets.")
	if !ok {
		return strings.TrimPrefix(e.Key+": ", ": ") + e.Msg
	}
	name, key, _ := strings.Cut(rest, ".")
	where := name
	if node := nodes[name]; node != "" {
		where = fmt.Sprintf("%s (dataset %s)", node, name)
	}
	if key != "" {
		where += ": " + key
	}
	return where + ": " + e.Msg
}

// ImportDBT reads the dbt manifest at path as datasets_from: {dbt_manifest:
// path} would, with opts for its jobs and project naming the dbt project
// they run from (relative to refill.yaml; "" for none). It returns the import, to print as
// refill.yaml text, and its datasets as the config loader makes them,
// sorted by name. Errors are bad input naming the manifest and the node.
func ImportDBT(path string, opts dbt.Options, project string) (*dbt.Import, []*refill.Dataset, error) {
	imp, err := dbt.Load(path, opts)
	if err != nil {
		return nil, nil, err
	}
	imp.SealProject(project)
	ds, problems := fromImport(imp)
	if len(problems) > 0 {
		var es Errors
		for _, p := range problems {
			es = append(es, &Error{File: imp.File, Msg: p})
		}
		return nil, nil, es
	}
	for _, d := range ds {
		d.Line = 0
		d.From = "dbt:" + imp.File
	}
	return imp, ds, nil
}
