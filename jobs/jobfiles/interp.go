package jobfiles

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Program is what an interpreter in argv runs as its program.
type Program struct {
	// Interpreter is the interpreter's name (python3, sh, node ...).
	Interpreter string
	// Script is the index in argv of the file it runs, or -1.
	Script int
	// Inline is true when the program is argv text itself (sh -c, python3
	// -c, node -e, awk's program): sealed with the job's definition.
	Inline bool
	// Module is a module the interpreter finds and runs (python3 -m NAME).
	Module string
	// Stdin is true when it reads its program from standard input, which
	// nothing can seal.
	Stdin bool
	// At is the index in argv of the interpreter itself, past wrappers
	// (env, nice, timeout, xargs, find -exec ...).
	At int
	// Preloads are the indices of arguments naming code the interpreter
	// loads before its program (node -r ./hook, --import, --loader);
	// Includes are directories it looks up modules in (perl -I, ruby -I).
	Preloads []int
	Includes []string
	// Implicit are files the program reads as its code from its working
	// directory (or ImplicitDir) by convention, when argv names none
	// (make's Makefile, npm's package.json and .npmrc); FirstOnly: the
	// first of them found is the one.
	Implicit    []string
	ImplicitDir string
	FirstOnly   bool
	// Hidden says why the program cannot be known from argv at all (env
	// -S splitting one argument into several).
	Hidden string
}

// family is how one interpreter's argv names its program.
type family struct {
	// inline flags take the program text; a short flag also counts inside
	// a cluster (sh -ec).
	inline []string
	// value flags take a value that is not the program.
	value []string
	// script flags take the program file (awk -f).
	script []string
	// module flags take a module name (python3 -m).
	module []string
	// operandInline: with no script flag, the first operand is the
	// program text (awk, jq).
	operandInline bool
	// sub are subcommands before the program (deno run, bun run).
	sub []string
	// clusters: short options combine (sh -ec, perl -ne).
	clusters bool
	// preload flags take code loaded before the program (node -r);
	// include flags a directory modules are found in (perl -I).
	preload []string
	include []string
	// implicit files are the program's code when no script flag names it.
	implicit []string
	// noScript: the program needs no script operand (make, npm run).
	noScript bool
	// firstOnly: the first implicit file found is the program's (make's
	// GNUmakefile, makefile, Makefile); else every one is.
	firstOnly bool
	// chdir flags move the program to another directory first (make -C):
	// its implicit files are that directory's.
	chdir []string
	// modules flags load a module whose value may add include
	// directories (perl -Mlib=.).
	modules []string
}

var (
	shell  = family{inline: []string{"-c"}, value: []string{"-o", "+o", "--rcfile", "--init-file", "-O", "+O"}, clusters: true}
	python = family{inline: []string{"-c"}, value: []string{"-W", "-X", "--check-hash-based-pycs"}, module: []string{"-m"}}
	node   = family{inline: []string{"-e", "--eval", "-p", "--print"}, value: []string{"-C", "--conditions", "--env-file", "--title"}, preload: []string{"-r", "--require", "--import", "--loader", "--experimental-loader"}}
	ruby   = family{inline: []string{"-e"}, value: []string{"-C", "-E", "--encoding"}, preload: []string{"-r", "--require"}, include: []string{"-I"}, clusters: true}
	perl   = family{inline: []string{"-e", "-E"}, value: []string{"-m", "-x"}, include: []string{"-I"}, modules: []string{"-M"}, clusters: true}
	make   = family{script: []string{"-f", "--file", "--makefile"}, value: []string{"-I", "--include-dir", "-j", "--jobs", "-l", "-o", "-W"}, chdir: []string{"-C", "--directory"}, implicit: []string{"GNUmakefile", "makefile", "Makefile"}, firstOnly: true, noScript: true}
	npm    = family{implicit: []string{"package.json", ".npmrc"}, noScript: true}
	psql   = family{inline: []string{"-c", "--command"}, script: []string{"-f", "--file"}, value: []string{"-d", "--dbname", "-h", "--host", "-p", "--port", "-U", "--username", "-v", "--set", "--variable", "-o", "--output", "-L", "--log-file", "-P", "--pset", "-F", "-R"}, noScript: true}
	awk    = family{script: []string{"-f", "--file"}, value: []string{"-v", "-F", "--assign", "--field-separator"}, operandInline: true}
)

// families maps an interpreter's name to how its argv names the program.
var families = map[string]family{
	"sh": shell, "bash": shell, "dash": shell, "zsh": shell, "ksh": shell, "mksh": shell, "ash": shell,
	"fish": shell, "csh": shell, "tcsh": shell, "busybox": shell,
	"node": node, "nodejs": node, "ts-node": node, "tsx": node,
	"deno": {inline: []string{}, value: []string{"--config", "-c", "--import-map", "--location", "--env-file"}, sub: []string{"run"}},
	"bun":  {inline: []string{"-e", "--eval", "-p", "--print"}, value: []string{"--config", "-c", "--env-file"}, sub: []string{"run"}},
	"ruby": ruby, "perl": perl,
	"php":     {inline: []string{"-r"}, value: []string{"-c", "-d", "-z"}, script: []string{"-f"}},
	"Rscript": {inline: []string{"-e"}, value: []string{"--default-packages"}},
	"R":       {inline: []string{"-e"}, script: []string{"-f", "--file"}},
	"lua":     {inline: []string{"-e"}, value: []string{"-l"}}, "luajit": {inline: []string{"-e"}, value: []string{"-l"}},
	"tclsh": {}, "wish": {}, "expect": {inline: []string{"-c"}},
	"julia": {inline: []string{"-e", "-E", "--eval", "--print"}, value: []string{"--project", "-t", "--threads", "-J", "--sysimage"}},
	"pwsh":  {inline: []string{"-Command", "-c"}, script: []string{"-File", "-f"}},
	"awk":   awk, "gawk": awk, "mawk": awk, "nawk": awk,
	"jq":     {script: []string{"-f", "--from-file"}, value: []string{"--arg", "--argjson", "--slurpfile", "--rawfile", "--args", "--indent"}, include: []string{"-L"}, operandInline: true},
	"groovy": {inline: []string{"-e"}}, "elixir": {inline: []string{"-e", "--eval"}}, "escript": {},
	"osascript": {inline: []string{"-e"}},
	"make":      make, "gmake": make,
	"npm": npm, "npx": npm, "yarn": npm, "pnpm": npm,
	"psql": psql,
}

// wrapper is a program that runs another: how to find where that one
// starts in its argv.
type wrapper struct {
	// value options take a value, as the next argument unless attached.
	value []string
	// operands are positional arguments before the program (timeout's
	// duration, flock's file).
	operands int
	// assigns: NAME=value arguments before the program (env).
	assigns bool
	// split options hide the program inside one argument (env -S);
	// inline options take a shell command (flock -c).
	split  []string
	inline []string
}

// optionOf reports whether an argument is one of opts: exactly, a long
// option's unambiguous-looking prefix (--sp for --split-string, as GNU's
// getopt takes it), or, when cluster is the whole argument, a cluster of
// short options holding one of them (-iS).
func optionOf(opts []string, flag, cluster string) bool {
	for _, o := range opts {
		switch {
		case flag == o:
			return true
		case strings.HasPrefix(o, "--") && strings.HasPrefix(flag, "--") && len(flag) >= 4 && strings.HasPrefix(o, flag):
			return true
		case len(o) == 2 && cluster != "" && len(cluster) > 2 && cluster[0] == '-' && cluster[1] != '-' && strings.ContainsRune(cluster[1:], rune(o[1])):
			return true
		}
	}
	return false
}

var wrappers = map[string]wrapper{
	"env":     {value: []string{"-u", "--unset", "-C", "--chdir"}, assigns: true, split: []string{"-S", "--split-string"}},
	"nice":    {value: []string{"-n", "--adjustment"}},
	"nohup":   {},
	"timeout": {value: []string{"-s", "--signal", "-k", "--kill-after"}, operands: 1},
	"stdbuf":  {value: []string{"-i", "-o", "-e", "--input", "--output", "--error"}},
	"ionice":  {value: []string{"-c", "--class", "-n", "--classdata", "-p", "--pid", "-P", "--pgid", "-u", "--uid"}},
	"chrt":    {value: []string{"-T", "-P", "-D"}, operands: 1},
	"taskset": {value: []string{"-c", "--cpu-list"}},
	"setsid":  {},
	"flock":   {value: []string{"-w", "--wait", "--timeout", "-E", "--conflict-exit-code"}, operands: 1, inline: []string{"-c", "--command"}},
	"time":    {value: []string{"-f", "--format", "-o", "--output"}},
	"sudo":    {value: []string{"-u", "--user", "-g", "--group", "-C", "--close-from", "-D", "--chdir", "-h", "--host", "-p", "--prompt", "-r", "--role", "-t", "--type", "-T", "--command-timeout", "-U", "--other-user"}},
	"doas":    {value: []string{"-u", "-C"}},
	"xargs":   {value: []string{"-a", "--arg-file", "-d", "--delimiter", "-E", "-e", "--eof", "-I", "-L", "--max-lines", "-n", "--max-args", "-P", "--max-procs", "-s", "--max-chars"}},
}

// versioned are interpreters named with a version (python3.11, pypy3,
// ruby3.2, perl5.36, php8.2, lua5.4).
var versioned = regexp.MustCompile(`^(python|pypy|ruby|perl|php|lua|node|tclsh)[0-9][0-9.]*$|^(python|pypy)$`)

func lookup(name string) (family, string, bool) {
	if f, ok := families[name]; ok {
		return f, name, true
	}
	if m := versioned.FindStringSubmatch(name); m != nil {
		base := m[1] + m[2]
		if base == "python" || base == "pypy" {
			return python, name, true
		}
		return families[base], name, true
	}
	return family{}, "", false
}

// Interpreted reports whether argv starts with a known interpreter (after
// env and its options and NAME=value settings), and what it runs as its
// program. A program that is a file of the project must be sealed; one
// written inline is part of the job's definition; one read from standard
// input cannot be sealed at all.
func Interpreted(argv []string) (Program, bool) {
	i, hidden := unwrap(argv, 0)
	if hidden != "" {
		return Program{Interpreter: filepath.Base(argv[0]), Script: -1, Hidden: hidden}, true
	}
	if i < 0 {
		// A wrapper that runs a shell command of its own (flock -c runs
		// it with sh -c).
		return Program{Interpreter: "sh", Script: -1, Inline: true, At: -i}, true
	}
	if i >= len(argv) {
		return Program{}, false
	}
	fam, name, ok := lookup(filepath.Base(argv[i]))
	if !ok {
		return Program{}, false
	}
	p := Program{Interpreter: name, Script: -1, At: i}
	rest := i + 1
	if rest < len(argv) && slices.Contains(fam.sub, argv[rest]) {
		rest++
	}
	for j := rest; j < len(argv); j++ {
		a := argv[j]
		flag, _, hasValue := strings.Cut(a, "=")
		switch {
		case a == "--":
			if j+1 < len(argv) {
				return operand(p, fam, j+1), true
			}
			p.Stdin = true
			return p, true
		case a == "-":
			p.Stdin = true
			return p, true
		case slices.Contains(fam.inline, flag) || fam.clusters && clustered(fam.inline, a):
			p.Inline = true
			return p, true
		case slices.Contains(fam.script, flag):
			if hasValue {
				p.Script = j // --file=x: the element holds the file
				return p, true
			}
			if j+1 < len(argv) {
				p.Script = j + 1
			}
			return p, true
		case slices.Contains(fam.module, a) && j+1 < len(argv):
			p.Module = argv[j+1]
			return p, true
		case strings.HasPrefix(a, "-m") && slices.Contains(fam.module, "-m") && len(a) > 2:
			p.Module = a[2:]
			return p, true
		case slices.Contains(fam.preload, flag):
			if hasValue {
				p.Preloads = append(p.Preloads, j)
			} else if j+1 < len(argv) {
				j++
				p.Preloads = append(p.Preloads, j)
			}
		case slices.Contains(fam.chdir, flag):
			if hasValue {
				_, p.ImplicitDir, _ = strings.Cut(a, "=")
			} else if j+1 < len(argv) {
				j++
				p.ImplicitDir = argv[j]
			}
		case len(fam.modules) > 0 && includeAttached(fam.modules, a) || slices.Contains(fam.modules, a):
			v := strings.TrimPrefix(a, a[:2])
			if v == "" && j+1 < len(argv) {
				j++
				v = argv[j]
			}
			if dirs, ok := strings.CutPrefix(v, "lib="); ok {
				p.Includes = append(p.Includes, strings.Split(dirs, ",")...)
			}
		case slices.Contains(fam.include, flag) || includeAttached(fam.include, a):
			switch {
			case hasValue:
				_, v, _ := strings.Cut(a, "=")
				p.Includes = append(p.Includes, v)
			case len(a) > 2 && !strings.HasPrefix(a, "--"):
				p.Includes = append(p.Includes, a[2:])
			case j+1 < len(argv):
				j++
				p.Includes = append(p.Includes, argv[j])
			}
		case slices.Contains(fam.value, a):
			j++ // its value
		case strings.HasPrefix(a, "-") || strings.HasPrefix(a, "+"):
			// An option without a value.
		default:
			if fam.noScript {
				// Operands are targets or scripts' names, not files.
				p.Implicit, p.FirstOnly = fam.implicit, fam.firstOnly
				return p, true
			}
			return operand(p, fam, j), true
		}
	}
	if fam.noScript {
		p.Implicit, p.FirstOnly = fam.implicit, fam.firstOnly
		return p, true
	}
	p.Stdin = true
	return p, true
}

// includeAttached reports an include option with its value attached
// (perl -I./lib).
func includeAttached(flags []string, a string) bool {
	for _, f := range flags {
		if len(f) == 2 && strings.HasPrefix(a, f) && len(a) > 2 {
			return true
		}
	}
	return false
}

// unwrap returns where the program wrapped by argv[i:] starts: past env,
// nice, timeout, xargs and the like with their options and operands, and
// into find's -exec. hidden says why the program cannot be read off argv.
func unwrap(argv []string, i int) (int, string) {
	for i < len(argv) {
		name := filepath.Base(argv[i])
		if name == "find" {
			for j := i + 1; j < len(argv); j++ {
				if slices.Contains([]string{"-exec", "-execdir", "-ok", "-okdir"}, argv[j]) {
					return unwrap(argv, j+1)
				}
			}
			return i, ""
		}
		w, ok := wrappers[name]
		if !ok {
			return i, ""
		}
		i++
		operands := w.operands
		for i < len(argv) {
			a := argv[i]
			flag, _, attached := strings.Cut(a, "=")
			switch {
			case optionOf(w.split, flag, a):
				return i, "it runs a program hidden inside one argument (" + a + "): write each argument in its own element"
			case optionOf(w.inline, flag, a):
				return -i, ""
			case a == "--":
				i++
				goto next
			case optionOf(w.value, flag, ""):
				if !attached {
					i++
				}
			case strings.HasPrefix(a, "-") && len(a) > 1:
			case w.assigns && strings.Contains(a, "="):
			case operands > 0:
				operands--
			default:
				goto next
			}
			i++
		}
	next:
	}
	return i, ""
}

// operand is the first operand at j: the program text for awk and jq,
// else the program's file.
func operand(p Program, fam family, j int) Program {
	if fam.operandInline {
		p.Inline = true
		return p
	}
	p.Script = j
	return p
}

// clustered reports whether a short-option cluster (-ec, -xc) holds one
// of flags' single letters.
func clustered(flags []string, a string) bool {
	if len(a) < 3 || a[0] != '-' || a[1] == '-' {
		return false
	}
	for _, f := range flags {
		if len(f) == 2 && f[0] == '-' && strings.ContainsRune(a[1:], rune(f[1])) {
			return true
		}
	}
	return false
}

// ProgramAt is where the program of argv starts, past wrappers (env,
// nice, timeout ...): the element that must be sealed if it is a file.
func ProgramAt(argv []string) int {
	i, _ := unwrap(argv, 0)
	if i < 0 {
		return -i
	}
	return i
}
