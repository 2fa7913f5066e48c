package jobfiles

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// project writes files (path → content) under a new directory.
func project(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, body := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// seal is what the config loader records for argv and globs.
func seal(t *testing.T, dir string, argv, globs []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range ArgFiles(dir, argv) {
		d, err := DigestFile(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		out[f.Key] = d
	}
	for _, g := range globs {
		m, err := Match(dir, g)
		if err != nil {
			t.Fatal(err)
		}
		out[GlobKey+g] = m.Digest
	}
	return out
}

func TestArgFiles(t *testing.T) {
	dir := project(t, map[string]string{"export.sh": "x", "jobs/x.py": "y", "q.sql": "z", "README": "r"})
	got := ArgFiles(dir, []string{"python3", "jobs/x.py", "--sql=./q.sql", "{{partition}}", "--out", "missing.csv", "jobs", "README"})
	var keys []string
	for _, f := range got {
		keys = append(keys, f.Key)
	}
	// python3 is found on PATH; {{partition}} names no file yet; a
	// directory and a missing file are not files.
	if want := []string{"jobs/x.py", "q.sql", "README"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("ArgFiles keys = %v, want %v", keys, want)
	}
	if got := ArgFiles(dir, []string{"./export.sh"}); len(got) != 1 || got[0].Key != "export.sh" || got[0].Index != 0 {
		t.Errorf("argv[0] with a slash = %+v, want export.sh at 0", got)
	}
}

func TestInterpreted(t *testing.T) {
	for _, c := range []struct {
		argv []string
		want Program
		ok   bool
	}{
		{[]string{"./export.sh", "x"}, Program{}, false},
		{[]string{"dbt", "build"}, Program{}, false},
		{[]string{"sh", "./export.sh", "{{partition}}"}, Program{Interpreter: "sh", Script: 1}, true},
		{[]string{"/bin/bash", "-eu", "-o", "pipefail", "run.sh"}, Program{Interpreter: "bash", Script: 4}, true},
		{[]string{"bash", "-ec", "echo hi"}, Program{Interpreter: "bash", Script: -1, Inline: true}, true},
		{[]string{"python3.11", "-u", "-W", "ignore", "jobs/x.py"}, Program{Interpreter: "python3.11", Script: 4}, true},
		{[]string{"python3", "-m", "jobs.export"}, Program{Interpreter: "python3", Script: -1, Module: "jobs.export"}, true},
		{[]string{"python3", "-c", "print(1)"}, Program{Interpreter: "python3", Script: -1, Inline: true}, true},
		{[]string{"python3"}, Program{Interpreter: "python3", Script: -1, Stdin: true}, true},
		{[]string{"python3", "-"}, Program{Interpreter: "python3", Script: -1, Stdin: true}, true},
		{[]string{"env", "-i", "A=1", "node", "--require", "./hook.js", "app.js"}, Program{Interpreter: "node", Script: 6, At: 3, Preloads: []int{5}}, true},
		{[]string{"node", "-r", "./hook", "--import=./reg.mjs", "app.js"}, Program{Interpreter: "node", Script: 4, Preloads: []int{2, 3}}, true},
		{[]string{"/usr/bin/env", "python3", "x.py"}, Program{Interpreter: "python3", Script: 2, At: 1}, true},
		{[]string{"deno", "run", "--allow-read", "main.ts"}, Program{Interpreter: "deno", Script: 3}, true},
		{[]string{"awk", "-F,", "{print $1}", "in.csv"}, Program{Interpreter: "awk", Script: -1, Inline: true}, true},
		{[]string{"awk", "-f", "prog.awk", "in.csv"}, Program{Interpreter: "awk", Script: 2}, true},
		{[]string{"Rscript", "model.R"}, Program{Interpreter: "Rscript", Script: 1}, true},
		{[]string{"perl", "-ne", "print"}, Program{Interpreter: "perl", Script: -1, Inline: true}, true},
		{[]string{"perl", "-I.", "-MHook", "x.pl"}, Program{Interpreter: "perl", Script: 3, Includes: []string{"."}}, true},
		{[]string{"ruby", "--", "x.rb"}, Program{Interpreter: "ruby", Script: 2}, true},
		// Wrappers are seen through.
		{[]string{"nice", "-n", "10", "python3", "-m", "pkg.x"}, Program{Interpreter: "python3", Script: -1, Module: "pkg.x", At: 3}, true},
		{[]string{"timeout", "-k", "5", "300", "sh", "run.sh"}, Program{Interpreter: "sh", Script: 5, At: 4}, true},
		{[]string{"xargs", "-a", "args.txt", "sh"}, Program{Interpreter: "sh", Script: -1, Stdin: true, At: 3}, true},
		{[]string{"find", "jobs", "-name", "*.sh", "-exec", "sh", "{}", ";"}, Program{Interpreter: "sh", Script: 6, At: 5}, true},
		{[]string{"env", "-S", "python3 -m pkg.x"}, Program{Interpreter: "env", Script: -1, Hidden: "it runs a program hidden inside one argument (-S): write each argument in its own element"}, true},
		{[]string{"nohup", "./export.sh"}, Program{}, false},
		// Launchers whose code is a file of the working directory.
		{[]string{"make", "-s", "export", "P={{partition}}"}, Program{Interpreter: "make", Script: -1, Implicit: []string{"GNUmakefile", "makefile", "Makefile"}, FirstOnly: true}, true},
		{[]string{"make", "-C", "sub", "build"}, Program{Interpreter: "make", Script: -1, Implicit: []string{"GNUmakefile", "makefile", "Makefile"}, FirstOnly: true, ImplicitDir: "sub"}, true},
		{[]string{"make", "-f", "jobs.mk", "export"}, Program{Interpreter: "make", Script: 2}, true},
		{[]string{"npm", "run", "export"}, Program{Interpreter: "npm", Script: -1, Implicit: []string{"package.json", ".npmrc"}}, true},
		{[]string{"env", "-iS", "sh ./evil.sh"}, Program{Interpreter: "env", Script: -1, Hidden: "it runs a program hidden inside one argument (-iS): write each argument in its own element"}, true},
		{[]string{"env", "--sp", "sh ./evil.sh"}, Program{Interpreter: "env", Script: -1, Hidden: "it runs a program hidden inside one argument (--sp): write each argument in its own element"}, true},
		{[]string{"env", "--split=sh ./evil.sh"}, Program{Interpreter: "env", Script: -1, Hidden: "it runs a program hidden inside one argument (--split=sh ./evil.sh): write each argument in its own element"}, true},
		{[]string{"env", "--chd", "sub", "python3", "x.py"}, Program{Interpreter: "python3", Script: 4, At: 3}, true},
		{[]string{"flock", "/tmp/lk", "-c", "sh ./evil.sh"}, Program{Interpreter: "sh", Script: -1, Inline: true, At: 2}, true},
		{[]string{"perl", "-Mlib=.,lib", "./job.pl"}, Program{Interpreter: "perl", Script: 2, Includes: []string{".", "lib"}}, true},
		{[]string{"ruby", "-r", "./evil", "./job.rb"}, Program{Interpreter: "ruby", Script: 3, Preloads: []int{2}}, true},
		{[]string{"jq", "-L", "./lib", ".a"}, Program{Interpreter: "jq", Script: -1, Inline: true, Includes: []string{"./lib"}}, true},
		{[]string{"psql", "-f", "rebuild.sql"}, Program{Interpreter: "psql", Script: 2}, true},
	} {
		got, ok := Interpreted(c.argv)
		if ok != c.ok || (ok && !reflect.DeepEqual(got, c.want)) {
			t.Errorf("Interpreted(%q) = %+v, %v; want %+v, %v", c.argv, got, ok, c.want, c.ok)
		}
	}
}

// TestPrepareRunsTheSealedBytes: the files argv names are read once,
// checked and copied; the copy is what argv runs, with the sealed files
// beside it, so an edit after the check reaches nothing that runs.
func TestPrepareRunsTheSealedBytes(t *testing.T) {
	dir := project(t, map[string]string{"export.sh": "#!/bin/sh\n. \"$(dirname \"$0\")/lib/common.sh\"\n", "lib/common.sh": "echo sealed\n", "lib/__pycache__/x.pyc": "cache"})
	tmpl := []string{"./export.sh", "{{partition}}"}
	globs := []string{"lib/**"}
	sealed := seal(t, dir, tmpl, globs)
	if len(sealed) != 2 {
		t.Fatalf("seal = %v, want export.sh and files:lib/**", sealed)
	}
	prep, err := Prepare(dir, tmpl, []string{"./export.sh", "2026-11-02"}, globs, sealed)
	if err != nil {
		t.Fatal(err)
	}
	defer prep.Close()
	if prep.Dir == "" || prep.Argv[0] != filepath.Join(prep.Dir, "export.sh") || prep.Argv[1] != "2026-11-02" {
		t.Fatalf("argv = %q (dir %s), want the private copy and the partition", prep.Argv, prep.Dir)
	}
	// Edit the originals after the check: the copies stay the sealed bytes.
	os.WriteFile(filepath.Join(dir, "export.sh"), []byte("#!/bin/sh\necho evil\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "lib/common.sh"), []byte("echo evil\n"), 0o755)
	for rel, want := range map[string]string{"export.sh": "#!/bin/sh\n. \"$(dirname \"$0\")/lib/common.sh\"\n", "lib/common.sh": "echo sealed\n"} {
		b, err := os.ReadFile(filepath.Join(prep.Dir, rel))
		if err != nil || string(b) != want {
			t.Errorf("private %s = %q, %v; want the sealed %q", rel, b, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(prep.Dir, "lib/__pycache__/x.pyc")); err == nil {
		t.Errorf("a Python cache was copied (and sealed)")
	}
	// The next partition sees the edit and refuses.
	var ce *ChangedError
	if _, err := Prepare(dir, tmpl, []string{"./export.sh", "2026-11-03"}, globs, sealed); !errors.As(err, &ce) || ce.Key != "export.sh" {
		t.Errorf("after an edit Prepare = %v, want export.sh changed", err)
	}
	if err := prep.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(prep.Dir); !os.IsNotExist(err) {
		t.Errorf("the private copy outlived Close: %v", err)
	}
}

// TestPrepareRefusesWhatWasNotSealed: a glob that matches one more file
// (a new file a loop sources), a file removed, and a file argv names
// that the plan did not seal are all changes.
func TestPrepareRefusesWhatWasNotSealed(t *testing.T) {
	dir := project(t, map[string]string{"run.sh": "for f in lib/*.sh; do . $f; done\n", "lib/a.sh": "a\n"})
	tmpl, globs := []string{"sh", "run.sh"}, []string{"lib/*.sh"}
	sealed := seal(t, dir, tmpl, globs)

	os.WriteFile(filepath.Join(dir, "lib/b.sh"), []byte("curl evil\n"), 0o644)
	_, err := Prepare(dir, tmpl, tmpl, globs, sealed)
	var ce *ChangedError
	if !errors.As(err, &ce) || ce.Key != "files:lib/*.sh" || !strings.Contains(err.Error(), "the files matching lib/*.sh changed since the plan was sealed") {
		t.Errorf("a new sourced file: %v", err)
	}
	os.Remove(filepath.Join(dir, "lib/b.sh"))
	if _, err := Prepare(dir, tmpl, tmpl, globs, sealed); err != nil {
		t.Errorf("back as sealed: %v", err)
	}

	// A program that was no file when the plan was sealed is refused; an
	// argument that became a file since is not the job's code.
	late := []string{"./late.sh"}
	lateSeal := seal(t, dir, late, nil)
	os.WriteFile(filepath.Join(dir, "late.sh"), []byte("curl evil\n"), 0o755)
	if _, err := Prepare(dir, late, late, nil, lateSeal); !errors.As(err, &ce) || ce.Key != "late.sh" || ce.Sealed != "" {
		t.Errorf("a program the plan did not seal: %v", err)
	}
	more := []string{"sh", "run.sh", "extra.sql"}
	moreSeal := seal(t, dir, more, globs)
	os.WriteFile(filepath.Join(dir, "extra.sql"), []byte("x"), 0o644)
	if prep, err := Prepare(dir, more, more, globs, moreSeal); err != nil {
		t.Errorf("an argument that became a file since the seal: %v", err)
	} else {
		prep.Close()
	}
	os.Remove(filepath.Join(dir, "run.sh"))
	if _, err := Prepare(dir, tmpl, tmpl, globs, sealed); !errors.As(err, &ce) || ce.Key != "run.sh" || !strings.Contains(err.Error(), "run.sh") {
		t.Errorf("a sealed file removed: %v", err)
	}
}

// TestDataFilesAreNotSealed: a job's output or the warehouse file named
// in its argv change as it runs: they are data, not code, and not sealed.
func TestDataFilesAreNotSealed(t *testing.T) {
	dir := project(t, map[string]string{"export.sh": "x", "out.csv": "a", "wh.db": "b", "conf.json": "{}"})
	argv := []string{"./export.sh", "--out=out.csv", "wh.db", "conf.json"}
	var keys []string
	for _, f := range ArgFiles(dir, argv) {
		keys = append(keys, f.Key)
	}
	if !reflect.DeepEqual(keys, []string{"export.sh", "conf.json"}) {
		t.Errorf("ArgFiles = %v, want the program and its config, not its data", keys)
	}
	if got := ArgFiles(dir, []string{"./data.db"}); len(got) != 0 {
		t.Errorf("a missing program: %v", got)
	}
}

func TestRecheckSeesAnEditWhileTheJobRan(t *testing.T) {
	dir := project(t, map[string]string{"run.sh": "x", "lib/a.sh": "a"})
	tmpl, globs := []string{"./run.sh"}, []string{"lib/**"}
	sealed := seal(t, dir, tmpl, globs)
	if err := Recheck(dir, tmpl, globs, sealed); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "lib/a.sh"), []byte("b"), 0o644)
	var ce *ChangedError
	if err := Recheck(dir, tmpl, globs, sealed); !errors.As(err, &ce) || !ce.While || !strings.Contains(err.Error(), "while the job ran") {
		t.Errorf("Recheck = %v, want a change while the job ran", err)
	}
}

func TestMatchBounds(t *testing.T) {
	dir := project(t, map[string]string{"a/x.sh": "1", "a/b/y.sh": "2", "a/.git/HEAD": "ref"})
	m, err := Match(dir, "a/**")
	if err != nil || !reflect.DeepEqual(m.Files, []string{"a/b/y.sh", "a/x.sh"}) {
		t.Errorf("Match a/** = %v, %v; want the two scripts, not .git", m.Files, err)
	}
	if _, err := Match(dir, "/etc/*"); err == nil {
		t.Errorf("an absolute glob was accepted")
	}
	if _, err := Match(dir, "a/[x"); err == nil {
		t.Errorf("a malformed glob was accepted")
	}
	out := project(t, map[string]string{"lib/z.sh": "z"})
	rel, _ := filepath.Rel(dir, out)
	m, err = Match(dir, filepath.ToSlash(rel)+"/lib/*.sh")
	if err != nil || len(m.Files) != 1 {
		t.Errorf("a glob reaching outside the directory: %v, %v", m.Files, err)
	}
}

// TestLinkedDirectoriesAreRefused: a glob does not follow a link to a
// directory, so what a script reads through one would not be sealed.
func TestLinkedDirectoriesAreRefused(t *testing.T) {
	dir := project(t, map[string]string{"lib/a.sh": "a", "elsewhere/x.sh": "x"})
	if err := os.Symlink(filepath.Join(dir, "elsewhere"), filepath.Join(dir, "lib", "inner")); err != nil {
		t.Fatal(err)
	}
	if _, err := Match(dir, "lib/**"); err == nil || !strings.Contains(err.Error(), "lib/inner is a link to a directory") {
		t.Errorf("Match through a linked directory = %v", err)
	}
}

// TestDbtParsesTheSealedProject: dbt's partial-parse cache is parsed code
// nobody sealed, so a dbt job parses the project anew.
func TestDbtParsesTheSealedProject(t *testing.T) {
	dir := project(t, map[string]string{"dbt_project.yml": "name: x\n"})
	tmpl := []string{"dbt", "build", "--select", "orders"}
	prep, err := Prepare(dir, tmpl, tmpl, []string{"dbt_project.yml"}, seal(t, dir, tmpl, []string{"dbt_project.yml"}))
	if err != nil {
		t.Fatal(err)
	}
	defer prep.Close()
	if !slices.Contains(prep.Env, "DBT_PARTIAL_PARSE=false") {
		t.Errorf("env = %q, want partial parsing off", prep.Env)
	}
}
