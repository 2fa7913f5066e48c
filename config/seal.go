package config

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/dbt"
	"github.com/refill-dev/refill/jobs/jobfiles"
)

// jobFiles reads a command's job.files: globs, relative to this file's
// directory, of what the command sources or imports. Each is checked
// when the jobs are sealed (sealCommands), where a glob that matches
// nothing is an error: a misspelled glob would seal nothing, quietly.
func (c *converter) jobFiles(path string, raw []string) []string {
	if raw == nil {
		return nil
	}
	var out []string
	for i, g := range raw {
		p := elem(path, i)
		switch {
		case strings.TrimSpace(g) == "":
			c.errorf(p, "is empty: want a glob such as scripts/** or lib/*.py")
		case filepath.IsAbs(g):
			c.errorf(p, "%s is absolute: globs are relative to this file's directory", written(g))
		case strings.ContainsFunc(g, func(r rune) bool { return r < ' ' }):
			c.errorf(p, "%q holds a control character", clip(g))
		default:
			out = append(out, path2slash(g))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func path2slash(g string) string { return path.Clean(filepath.ToSlash(g)) }

// sealCommands seals every command job with the digests of what it
// executes or reads as code (refill.Job.Sealed, package jobs/jobfiles),
// after refusing one whose program refill cannot seal: an interpreter
// (sh, python3, node ...) told to run a script that is not a file of the
// project, or its program from standard input. A glob shared by many
// jobs (a dbt project's models/**) is read once.
func (c *converter) sealCommands(cfg *refill.Config) {
	matched := map[string]jobfiles.Matched{}
	for _, name := range sortedKeys(cfg.Datasets) {
		d := cfg.Datasets[name]
		if d.Job == nil || d.Job.Kind != refill.JobCommand || len(d.Job.Command) == 0 {
			continue
		}
		path := child("datasets", name, "job")
		j := d.Job
		j.Path = cfg.Run.Path
		c.loaders(child(path, "env"), j)
		project := c.dbtProject(child(path, "dbt_project"), j)
		c.program(path, j)
		sealed := map[string]string{}
		ok := true
		for _, f := range jobfiles.CodeFiles(c.dir, j.Command) {
			d, err := jobfiles.DigestFile(f.Path)
			if err != nil {
				c.errorf(child(path, "command"), "%v", err)
				ok = false
				continue
			}
			sealed[f.Key] = d
		}
		for i, g := range j.Files {
			m, seen := matched[g]
			if !seen {
				var err error
				if m, err = jobfiles.Match(c.dir, g); err != nil {
					c.errorf(elem(child(path, "files"), i), "%v", err)
					ok = false
					continue
				}
				matched[g] = m
			}
			if len(m.Files) == 0 && !slices.Contains(project, g) {
				c.errorf(elem(child(path, "files"), i), "%s matches no file under %s: nothing would be sealed (check the glob)", g, c.dir)
				ok = false
				continue
			}
			sealed[jobfiles.GlobKey+g] = m.Digest
		}
		if ok && len(sealed) > 0 {
			j.Sealed = sealed
		}
	}
}

// program refuses a command whose program is run by an interpreter from
// something refill cannot seal. What an interpreter runs from a file of
// the project is sealed with the job (argv files always are), as is a
// program written inline (sh -c, python3 -c), which is the job's own text;
// a module of the project (python3 -m) must be among job.files.
func (c *converter) program(path string, j *refill.Job) {
	prog0 := filepath.Base(j.Command[min(jobfiles.ProgramAt(j.Command), len(j.Command)-1)])
	if p, ok := jobfiles.Interpreted(j.Command); ok && strings.HasPrefix(p.Module, "dbt") {
		prog0 = "dbt"
	}
	if prog0 == "dbt" && j.DbtProject == "" && len(j.Files) == 0 {
		c.errorf(child(path, "command"), "runs dbt, which builds from the models, macros and packages of a dbt project: name it in dbt_project (refill import dbt writes it), or import the models with datasets_from")
		return
	}
	prog, ok := jobfiles.Interpreted(j.Command)
	if !ok {
		return
	}
	at := child(path, "command")
	c.preloads(at, j, prog)
	switch {
	case prog.Hidden != "":
		c.errorf(at, "refill cannot tell what %s runs: %s", prog.Interpreter, prog.Hidden)
	case prog.Inline:
		c.inline(at, j, prog)
	case prog.Stdin:
		c.errorf(at, "runs %s with its program read from standard input, which refill cannot seal: name the script file in command", prog.Interpreter)
	case prog.Module != "":
		rel := strings.ReplaceAll(prog.Module, ".", "/")
		for _, cand := range []string{rel + ".py", rel + "/__main__.py", rel + "/__init__.py"} {
			if fi, err := os.Stat(filepath.Join(c.dir, cand)); err == nil && fi.Mode().IsRegular() && !c.globbed(j.Files, cand) {
				c.errorf(at, "runs %s -m %s, the project's %s, which no glob of job.files seals: add it to job.files (as in files: [\"%s/**\"]) so what runs is what was approved",
					prog.Interpreter, prog.Module, cand, strings.SplitN(rel, "/", 2)[0])
				return
			}
		}
	case prog.Script >= 0:
		arg := j.Command[prog.Script]
		if flag, v, ok := strings.Cut(arg, "="); ok && strings.HasPrefix(flag, "-") {
			arg = v
		}
		if slices.ContainsFunc(jobfiles.ArgFiles(c.dir, j.Command), func(f jobfiles.ArgFile) bool { return f.Index == prog.Script }) {
			return // a file of the project: sealed
		}
		p := arg
		if !filepath.IsAbs(p) {
			p = filepath.Join(c.dir, p)
		}
		why := "is not a file"
		switch fi, err := os.Stat(p); {
		case strings.Contains(arg, "{{"):
			why = "is filled in at run time, so no one file can be sealed"
		case err == nil && fi.IsDir():
			rel := path2slash(arg)
			if slices.ContainsFunc(j.Files, func(g string) bool { return g == rel+"/**" || strings.HasPrefix(g, rel+"/") }) {
				return // a directory the job's globs seal
			}
			why = "is a directory that no glob of job.files seals"
		case err != nil:
			why = fmt.Sprintf("is not a file (relative paths are from %s)", c.dir)
		}
		c.errorf(at, "runs %s %s, which %s: refill seals the files a job runs so that what runs is what was approved; name a file of the project, and add what it sources or imports to job.files", prog.Interpreter, clip(arg), why)
	}
}

// globbed reports whether a relative file is matched by one of globs.
func (c *converter) globbed(globs []string, rel string) bool {
	for _, g := range globs {
		m, err := jobfiles.Match(c.dir, g)
		if err == nil && slices.Contains(m.Files, path2slash(rel)) {
			return true
		}
	}
	return false
}

// dbtProject adds to a dbt job's Files the globs that seal its dbt project
// (dbt.ProjectFiles) and returns them: a path of the project that does not
// exist yet is sealed empty, so one made later (a new macros/) changes the
// seal.
func (c *converter) dbtProject(path string, j *refill.Job) []string {
	if j.DbtProject == "" {
		return nil
	}
	dir := j.DbtProject
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(c.dir, dir)
	}
	globs, err := dbt.ProjectFiles(dir, c.dir)
	if err != nil {
		c.errorf(path, "%v", err)
		return nil
	}
	j.Files = slices.Compact(slices.Sorted(slices.Values(append(j.Files, globs...))))
	return globs
}

// preloads refuses code an interpreter loads before its program that no
// seal covers: a module named by a path (node -r ./hook, --import
// ./reg.mjs) that is not a sealed file of argv nor among job.files, and
// a directory of the project modules are looked up in (perl -I lib, ruby
// -I lib) that no glob of job.files covers.
func (c *converter) preloads(at string, j *refill.Job, prog jobfiles.Program) {
	for _, i := range prog.Preloads {
		v := j.Command[i]
		if flag, val, ok := strings.Cut(v, "="); ok && strings.HasPrefix(flag, "-") {
			v = val
		}
		if !strings.HasPrefix(v, "./") && !strings.HasPrefix(v, "../") && !strings.HasPrefix(v, "/") {
			continue // a package, found where packages are installed
		}
		if p := filepath.Join(c.dir, v); !filepath.IsAbs(v) && isDirectory(p) {
			rel := path2slash(v)
			if !slices.ContainsFunc(j.Files, func(g string) bool { return g == rel+"/**" || g == "**" }) {
				c.errorf(at, "%s loads %s, a directory of the project (its package's main file, its index), which no glob of job.files seals: add it to job.files (as in files: [\"%s/**\"])", prog.Interpreter, clip(v), rel)
			}
			continue
		}
		for _, cand := range []string{v, v + ".js", v + ".cjs", v + ".mjs", v + ".json", v + ".rb", v + "/index.js"} {
			p := cand
			if !filepath.IsAbs(p) {
				p = filepath.Join(c.dir, p)
			}
			if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
				continue
			}
			if cand != v && !c.globbed(j.Files, cand) {
				c.errorf(at, "%s loads %s (%s) before its program, which no glob of job.files seals: add it to job.files, or name the file itself", prog.Interpreter, clip(v), cand)
			}
			break
		}
	}
	for _, dir := range prog.Includes {
		rel := path2slash(dir)
		if filepath.IsAbs(dir) {
			continue // outside the project
		}
		if fi, err := os.Stat(filepath.Join(c.dir, dir)); err != nil || !fi.IsDir() {
			continue
		}
		covered := slices.ContainsFunc(j.Files, func(g string) bool {
			return g == "**" || g == rel+"/**" || (rel == "." && (g == "*" || strings.HasPrefix(g, "*.") || !strings.Contains(g, "/")))
		})
		if !covered {
			c.errorf(at, "%s looks up modules in %s, a directory of the project that no glob of job.files seals: add its modules to job.files (as in files: [\"%s/**\"])", prog.Interpreter, clip(dir), strings.TrimSuffix(rel, "/."))
		}
	}
}

// inlineWord finds what looks like a path in a program's inline text,
// globs included; redirect marks a word written to, not read.
var (
	inlineWord = regexp.MustCompile(`[A-Za-z0-9_./*?\[\]-]+`)
	redirect   = regexp.MustCompile(`>>?\s*$`)
)

// inline refuses a program written inline (sh -c "...") that names a
// file of the project no seal covers: `. ./lib.sh` in the text would run
// whatever lib.sh holds when the job starts.
func (c *converter) inline(at string, j *refill.Job, prog jobfiles.Program) {
	sealed := map[string]bool{}
	for _, f := range jobfiles.CodeFiles(c.dir, j.Command) {
		sealed[f.Key] = true
	}
	for _, a := range j.Command[prog.At+1:] {
		for _, loc := range inlineWord.FindAllStringIndex(a, -1) {
			w := a[loc[0]:loc[1]]
			if !strings.ContainsAny(w, "/.*?[") || filepath.IsAbs(w) {
				continue
			}
			// A file the text writes to is data; any other it names,
			// whatever its ending, may be read as code (. ./lib.txt).
			if redirect.MatchString(a[:loc[0]]) {
				continue
			}
			names := []string{w}
			if strings.ContainsAny(w, "*?[") {
				names, _ = filepath.Glob(filepath.Join(c.dir, w))
				for i := range names {
					names[i], _ = filepath.Rel(c.dir, names[i])
				}
			}
			for _, n := range names {
				rel := path2slash(n)
				if strings.HasPrefix(rel, "../") || sealed[rel] {
					continue
				}
				if fi, err := os.Stat(filepath.Join(c.dir, rel)); err != nil || !fi.Mode().IsRegular() {
					continue
				}
				if !c.globbed(j.Files, rel) {
					c.errorf(at, "the program %s runs inline names %s, a file of the project that no seal covers: add it to job.files so that what runs is what was approved", prog.Interpreter, clip(w))
					return
				}
			}
		}
	}
}

// loaderVars are variables that make an interpreter or the system load
// code refill cannot seal (a file they name, or options that do): a job's
// env: may neither set nor pass them through.
var loaderVars = map[string]bool{
	"BASH_ENV": true, "ENV": true, "SHELLOPTS": true, "BASHOPTS": true, "PROMPT_COMMAND": true,
	"NODE_OPTIONS": true, "NODE_PATH": true,
	"PYTHONPATH": true, "PYTHONHOME": true, "PYTHONSTARTUP": true, "PYTHONUSERBASE": true, "PYTHONINSPECT": true, "PYTHONEXECUTABLE": true,
	"PERL5OPT": true, "PERL5LIB": true, "PERLLIB": true, "PERL5DB": true,
	"RUBYOPT": true, "RUBYLIB": true,
	"LD_PRELOAD": true, "LD_LIBRARY_PATH": true, "LD_AUDIT": true,
	"MAKEFILES": true, "MAKEFLAGS": true, "MFLAGS": true,
	"JAVA_TOOL_OPTIONS": true, "_JAVA_OPTIONS": true, "JDK_JAVA_OPTIONS": true, "CLASSPATH": true,
	"R_PROFILE": true, "R_PROFILE_USER": true, "R_ENVIRON": true, "R_ENVIRON_USER": true, "R_LIBS": true, "R_LIBS_USER": true,
	"LUA_INIT": true, "LUA_PATH": true, "LUA_CPATH": true, "TCLLIBPATH": true,
	"GIT_EXEC_PATH": true, "GIT_SSH_COMMAND": true, "GIT_CONFIG_GLOBAL": true,
	"NPM_CONFIG_SCRIPT_SHELL": true, "NPM_CONFIG_USERCONFIG": true, "NPM_CONFIG_GLOBALCONFIG": true,
	"PATH": true, "HOME": true,
}

// loaders refuses a job's env: entry that names a loader variable.
func (c *converter) loaders(path string, j *refill.Job) {
	for i, e := range j.Env {
		name, _, _ := strings.Cut(e, "=")
		if loaderVars[name] || strings.HasPrefix(name, "DYLD_") {
			c.errorf(elem(path, i), "%s makes the job load code refill cannot seal (or find its programs elsewhere): put the code in argv or job.files, and the directories in run.path", name)
		}
	}
}

func isDirectory(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
