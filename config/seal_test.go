package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sealProject writes files and a refill.yaml of head+doc into a new
// directory and returns the config's path.
func sealProject(t *testing.T, doc string, files map[string]string) string {
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
	path := filepath.Join(dir, "refill.yaml")
	if err := os.WriteFile(path, []byte(head+doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCommandsAreSealed: every argv element naming a file of the project
// and every glob of job.files is sealed with the job, and an edit to any
// changes the job's fingerprint (so its proofs go stale).
func TestCommandsAreSealed(t *testing.T) {
	files := map[string]string{"export.sh": "#!/bin/sh\n", "jobs/x.py": "print(1)\n", "lib/a.sh": "a\n", "lib/b.sh": "b\n", "q.sql": "select 1\n"}
	path := sealProject(t, `datasets:
  feed:
    job:
      command: [python3, jobs/x.py, --sql=q.sql, '{{partition}}']
      files: [lib/*.sh, lib/*.sh]
  plain:
    job: {command: [./export.sh]}
`, files)
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	j := cfg.Datasets["feed"].Job
	for _, k := range []string{"jobs/x.py", "q.sql", "files:lib/*.sh"} {
		if !strings.HasPrefix(j.Sealed[k], "sha256:") {
			t.Errorf("feed's seal has no %s: %v", k, j.Sealed)
		}
	}
	if len(j.Sealed) != 3 || len(j.Files) != 1 {
		t.Errorf("feed: sealed %v, files %v; want 3 entries and one glob (duplicates dropped)", j.Sealed, j.Files)
	}
	if p := cfg.Datasets["plain"].Job; p.Sealed["export.sh"] == "" || p.Script != "" {
		t.Errorf("plain: %+v, want export.sh sealed and no legacy script digest", p)
	}
	before := j.Fingerprint()
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "lib/b.sh"), []byte("b, edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if again.Datasets["feed"].Job.Fingerprint() == before {
		t.Errorf("editing a sourced file left the job's fingerprint as it was")
	}
}

// TestUnsealableProgramsAreRefused: an interpreter told to run something
// refill cannot seal is a config error that says to name the file or
// list it in job.files; what can be sealed loads.
func TestUnsealableProgramsAreRefused(t *testing.T) {
	files := map[string]string{"x.py": "print(1)\n", "jobs/export.py": "print(2)\n", "jobs/__init__.py": "", "pkg/__main__.py": "print(3)\n",
		"hook.js": "", "app.js": "", "lib.sh": "", "Hook.pm": "1;\n", "x.pl": "", "hookdir/package.json": `{"main": "m.js"}`, "hookdir/m.js": "",
		"lib.txt": "", "evil.sh": "", "x.rb": "", "evil.rb": "", "sub/Makefile": "all:\n"}
	for _, c := range []struct {
		name, job, key, msg string
	}{
		{"missing script", `{command: [python3, y.py]}`, "datasets.feed.job.command", "runs python3 y.py, which is not a file (relative paths are from "},
		{"script from the partition", `{command: [bash, "scripts/{{partition}}.sh"]}`, "datasets.feed.job.command", "is filled in at run time, so no one file can be sealed"},
		{"program from stdin", `{command: [python3, -u]}`, "datasets.feed.job.command", "with its program read from standard input, which refill cannot seal"},
		{"project module unsealed", `{command: [python3, -m, jobs.export]}`, "datasets.feed.job.command", "the project's jobs/export.py, which no glob of job.files seals: add it to job.files"},
		{"directory unsealed", `{command: [python3, pkg]}`, "datasets.feed.job.command", "is a directory that no glob of job.files seals"},
		{"glob matching nothing", `{command: [python3, x.py], files: [scrpts/**]}`, "datasets.feed.job.files[0]", "scrpts/** matches no file"},
		{"absolute glob", `{command: [python3, x.py], files: [/etc/*]}`, "datasets.feed.job.files[0]", "is absolute"},
		{"bad glob", `{command: [python3, x.py], files: ["lib/[x"]}`, "datasets.feed.job.files[0]", "is not a valid glob"},
		{"files on a query", `{query: "SELECT :partition", files: [x.py]}`, "datasets.feed.job.files", "files applies only to command jobs"},
		{"dbt without its project", `{command: [dbt, build, --select, feed]}`, "datasets.feed.job.command", "runs dbt, which builds from the models, macros and packages of a dbt project: name it in dbt_project"},
		{"dbt project missing", `{command: [dbt, build], dbt_project: nowhere}`, "datasets.feed.job.dbt_project", "no such file or directory"},
		{"a wrapper", `{command: [nice, -n, "10", python3, -m, jobs.export]}`, "datasets.feed.job.command", "the project's jobs/export.py, which no glob of job.files seals"},
		{"a wrapper's operand", `{command: [timeout, "300", python3, y.py]}`, "datasets.feed.job.command", "runs python3 y.py, which is not a file"},
		{"xargs feeds the script", `{command: [xargs, -a, args.txt, sh]}`, "datasets.feed.job.command", "runs sh with its program read from standard input"},
		{"find -exec", `{command: [find, ., -name, "*.sh", -exec, sh, "{}", ";"]}`, "datasets.feed.job.command", "runs sh {}, which is not a file"},
		{"env -S", `{command: [env, -S, "python3 -m jobs.export"]}`, "datasets.feed.job.command", "refill cannot tell what env runs: it runs a program hidden inside one argument"},
		{"a preload by a bare path", `{command: [node, -r, ./hook, app.js]}`, "datasets.feed.job.command", "node loads ./hook (./hook.js) before its program, which no glob of job.files seals"},
		{"an include directory", `{command: [perl, -I., -MHook, x.pl]}`, "datasets.feed.job.command", "perl looks up modules in ., a directory of the project that no glob of job.files seals"},
		{"inline code sourcing a file", `{command: [bash, -c, "source ./lib.sh && run"]}`, "datasets.feed.job.command", "the program bash runs inline names ./lib.sh, a file of the project that no seal covers"},
		{"inline code sourcing a data-named file", `{command: [sh, -c, ". ./lib.txt; run"]}`, "datasets.feed.job.command", "names ./lib.txt, a file of the project"},
		{"inline code sourcing a glob", `{command: [sh, -c, ". ./li?.sh; run"]}`, "datasets.feed.job.command", "names ./li?.sh, a file of the project"},
		{"env -S in a cluster", `{command: [env, -iS, "sh ./evil.sh"]}`, "datasets.feed.job.command", "hidden inside one argument (-iS)"},
		{"env --split abbreviated", `{command: [env, --split=sh ./evil.sh]}`, "datasets.feed.job.command", "hidden inside one argument"},
		{"flock -c", `{command: [flock, /tmp/lk, -c, "sh ./evil.sh"]}`, "datasets.feed.job.command", "names ./evil.sh, a file of the project"},
		{"a preload directory", `{command: [node, -r, ./hookdir, app.js]}`, "datasets.feed.job.command", "node loads ./hookdir, a directory of the project"},
		{"perl -Mlib", `{command: [perl, -Mlib=., ./x.pl]}`, "datasets.feed.job.command", "perl looks up modules in ., a directory of the project"},
		{"ruby -r", `{command: [ruby, -r, ./evil, ./x.rb]}`, "datasets.feed.job.command", "ruby loads ./evil (./evil.rb) before its program"},
		{"dbt behind a wrapper", `{command: [nice, dbt, build]}`, "datasets.feed.job.command", "runs dbt, which builds from"},
		{"dbt as a module", `{command: [python3, -m, dbt.cli.main, build]}`, "datasets.feed.job.command", "runs dbt, which builds from"},
		{"a loader variable set", `{command: [./evil.sh], env: ["BASH_ENV=./lib.sh"]}`, "datasets.feed.job.env[0]", "BASH_ENV makes the job load code refill cannot seal"},
		{"a loader variable passed through", `{command: [./evil.sh], env: [NODE_OPTIONS]}`, "datasets.feed.job.env[0]", "NODE_OPTIONS makes the job load code"},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := "datasets:\n  feed:\n    table: feed\n    partition: {column: day}\n    job: " + c.job + " # <-\n"
			_, err := Load(sealProject(t, doc, files))
			requireBadInputIn(t, err, markedLine(t, head+doc), c.key, c.msg)
		})
	}
	for _, ok := range []string{
		`{command: [python3, x.py]}`,
		`{command: [/usr/bin/env, python3, -u, x.py, '{{partition}}']}`,
		`{command: [sh, -ec, 'echo {{partition}}']}`,
		`{command: [python3, -m, jobs.export], files: ["jobs/**"]}`,
		`{command: [python3, -m, http.server]}`, // not the project's
		`{command: [python3, pkg], files: ["pkg/**"]}`,
		`{command: [awk, '{print $1}', x.py]}`,
		`{command: [node, -r, ./hook.js, app.js]}`,
		`{command: [node, -r, ./hook, app.js], files: ["*.js"]}`,
		`{command: [perl, -I., -MHook, x.pl], files: ["*.pm"]}`,
		`{command: [bash, -c, "source ./lib.sh && run"], files: [lib.sh]}`,
		`{command: [nice, python3, x.py]}`,
		`{command: [sh, ./lib.txt]}`,
		`{command: [sh, -c, "run > out.txt"]}`,
		`{command: [node, -r, ./hookdir, app.js], files: ["hookdir/**"]}`,
	} {
		doc := "datasets:\n  feed:\n    table: feed\n    partition: {column: day}\n    job: " + ok + "\n"
		if _, err := Load(sealProject(t, doc, files)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// TestDbtProjectIsSealed: a dbt job's seal is its dbt project, as
// dbt_project.yml lays it out, with the paths that do not exist yet
// sealed empty, so that one made later changes the seal.
func TestDbtProjectIsSealed(t *testing.T) {
	files := map[string]string{
		"dbt/dbt_project.yml":         "name: shop\nmacro-paths: [my_macros]\n",
		"dbt/models/orders.sql":       "select 1\n",
		"dbt/my_macros/m.sql":         "{% macro m() %}1{% endmacro %}\n",
		"dbt/target/run/orders.sql":   "compiled\n",
		"dbt/dbt_packages/u/x.sql":    "x\n",
		"dbt/models/__pycache__/x.py": "cache\n",
	}
	path := sealProject(t, "datasets:\n  orders:\n    job: {command: [dbt, build, --select, orders], dbt_project: dbt}\n", files)
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	j := cfg.Datasets["orders"].Job
	for _, g := range []string{"dbt/dbt_project.yml", "dbt/models/**", "dbt/my_macros/**", "dbt/dbt_packages/**", "dbt/seeds/**", "dbt/profiles.yml"} {
		if j.Sealed["files:"+g] == "" {
			t.Errorf("the dbt job does not seal %s: %v", g, j.Files)
		}
	}
	for _, g := range j.Files {
		if strings.Contains(g, "target") || g == "dbt/macros/**" {
			t.Errorf("the seal covers %s: dbt writes target/ as it runs, and macro-paths moved macros", g)
		}
	}
	// A seed directory made later changes the seal.
	seeds := j.Sealed["files:dbt/seeds/**"]
	os.MkdirAll(filepath.Join(filepath.Dir(path), "dbt/seeds"), 0o755)
	os.WriteFile(filepath.Join(filepath.Dir(path), "dbt/seeds/rates.csv"), []byte("a\n"), 0o644)
	again, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if again.Datasets["orders"].Job.Sealed["files:dbt/seeds/**"] == seeds {
		t.Errorf("a seed added to the project left the seal as it was")
	}
}

// TestLaunchersSealTheirCode: make's Makefile and npm's package.json are
// the program's code though argv names neither: they are sealed.
func TestLaunchersSealTheirCode(t *testing.T) {
	path := sealProject(t, "datasets:\n  m:\n    job: {command: [make, -s, export, 'P={{partition}}']}\n  n:\n    job: {command: [npm, run, export]}\n",
		map[string]string{"Makefile": "export:\n\techo $(P)\n", "package.json": `{"scripts": {"export": "node x.js"}}`})
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Datasets["m"].Job.Sealed["Makefile"] == "" || cfg.Datasets["n"].Job.Sealed["package.json"] == "" {
		t.Errorf("seals: make %v, npm %v", cfg.Datasets["m"].Job.Sealed, cfg.Datasets["n"].Job.Sealed)
	}
	// make -C reads the other directory's Makefile; npm reads .npmrc too.
	path = sealProject(t, "datasets:\n  m:\n    job: {command: [make, -C, sub, build]}\n  n:\n    job: {command: [npm, run, export]}\n",
		map[string]string{"sub/Makefile": "build:\n", "package.json": "{}", ".npmrc": "script-shell=/bin/sh\n"})
	if cfg, err = Load(path); err != nil {
		t.Fatal(err)
	}
	if cfg.Datasets["m"].Job.Sealed["sub/Makefile"] == "" || cfg.Datasets["n"].Job.Sealed[".npmrc"] == "" {
		t.Errorf("seals: make -C %v, npm %v", cfg.Datasets["m"].Job.Sealed, cfg.Datasets["n"].Job.Sealed)
	}
}
