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
}

var (
	shell  = family{inline: []string{"-c"}, value: []string{"-o", "+o", "--rcfile", "--init-file", "-O", "+O"}, clusters: true}
	python = family{inline: []string{"-c"}, value: []string{"-W", "-X", "--check-hash-based-pycs"}, module: []string{"-m"}}
	node   = family{inline: []string{"-e", "--eval", "-p", "--print"}, value: []string{"-r", "--require", "--import", "--loader", "--experimental-loader", "-C", "--conditions", "--env-file", "--title"}}
	ruby   = family{inline: []string{"-e"}, value: []string{"-r", "-I", "-C", "-E", "--encoding"}, clusters: true}
	perl   = family{inline: []string{"-e", "-E"}, value: []string{"-I", "-M", "-m", "-x"}, clusters: true}
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
	"jq":     {script: []string{"-f", "--from-file"}, value: []string{"--arg", "--argjson", "--slurpfile", "--rawfile", "--args", "--indent"}, operandInline: true},
	"groovy": {inline: []string{"-e"}}, "elixir": {inline: []string{"-e", "--eval"}}, "escript": {},
	"osascript": {inline: []string{"-e"}},
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
	i := 0
	if len(argv) > 0 && filepath.Base(argv[0]) == "env" {
		for i = 1; i < len(argv); i++ {
			a := argv[i]
			switch {
			case a == "-u" || a == "--unset" || a == "-C" || a == "--chdir":
				i++
			case strings.HasPrefix(a, "-") || strings.Contains(a, "="):
			default:
				goto found
			}
		}
		return Program{}, false
	}
found:
	if i >= len(argv) {
		return Program{}, false
	}
	fam, name, ok := lookup(filepath.Base(argv[i]))
	if !ok {
		return Program{}, false
	}
	p := Program{Interpreter: name, Script: -1}
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
		case slices.Contains(fam.value, a):
			j++ // its value
		case strings.HasPrefix(a, "-") || strings.HasPrefix(a, "+"):
			// An option without a value.
		default:
			return operand(p, fam, j), true
		}
	}
	p.Stdin = true
	return p, true
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
