// Package jobfiles finds and digests the files a command job executes or
// reads as code, and hands a run exactly the bytes that were sealed.
//
// A command job's seal covers every argv element that names a file (the
// program, a script an interpreter runs, a file given as an argument) and
// every file its job.files globs match (what those scripts source or
// import: ["scripts/**", "lib/*.py"]). A plan seals those digests with the
// job, so an edit to any of them after a person approved the plan makes it
// stale; and a run checks them again, as it starts each partition, from
// the bytes it then runs: the program and its sealed neighbours are read
// once, checked, and copied into a private directory the job runs them
// from, so an edit between the check and the start cannot slip in.
package jobfiles

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// GlobKey is the prefix of a glob's entry in a seal: "files:scripts/**"
// holds the digest of everything scripts/** matches.
const GlobKey = "files:"

// Limits on what one glob may seal: a glob that reaches a data directory
// by mistake ("**") is refused rather than hashed for minutes.
const (
	MaxFiles = 20000
	MaxBytes = 512 << 20
)

// skipped are names never sealed: caches an interpreter writes beside the
// code it runs (a Python job writes __pycache__ on its first run, which
// would otherwise make its own plan stale) and version-control metadata.
func skipped(rel string) bool {
	for part := range strings.SplitSeq(rel, "/") {
		switch {
		case part == "__pycache__", part == ".git", part == ".hg", part == ".svn", part == ".DS_Store":
			return true
		case part == ".refill", strings.HasPrefix(part, ".refill-job-"):
			return true // refill's own: the state store, a job's private copies
		}
	}
	return strings.HasSuffix(rel, ".pyc")
}

// Digest is the SHA-256 of b, as a seal writes it.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ArgFile is an argv element that names a file.
type ArgFile struct {
	// Index is its place in argv.
	Index int
	// Key is how the seal names it: the path as written, cleaned, with
	// slashes (relative to the config's directory unless absolute).
	Key string
	// Path is where it is on disk.
	Path string
}

// dataExts are the endings of files a job reads or writes as data, not
// code: a job's output named in its argv (--out exports/feed.csv), the
// warehouse file it opens (sqlite3 wh.db). They change as the job runs,
// and sealing them would make every run stale.
var dataExts = map[string]bool{
	".csv": true, ".tsv": true, ".txt": true, ".log": true, ".out": true, ".err": true, ".jsonl": true, ".ndjson": true,
	".parquet": true, ".avro": true, ".orc": true, ".arrow": true, ".feather": true, ".xlsx": true, ".xls": true,
	".gz": true, ".zip": true, ".bz2": true, ".xz": true, ".zst": true, ".tar": true, ".tgz": true,
	".db": true, ".sqlite": true, ".sqlite3": true, ".duckdb": true, ".wal": true, ".shm": true,
	".pdf": true, ".png": true, ".jpg": true, ".jpeg": true, ".html": true, ".lock": true, ".pid": true,
}

// Data reports whether a path names a data file (dataExts), which a seal
// leaves out unless it is the program itself.
func Data(path string) bool { return dataExts[strings.ToLower(filepath.Ext(path))] }

// ArgFiles returns the argv elements of a job's template that name an
// existing regular file, resolved against dir. An element holding a
// placeholder ({{partition}}) names no file yet and is skipped; so is a
// bare program name (argv[0] without a slash), which the system finds on
// PATH, not in the project, and a data file (Data) anywhere but as the
// program. A flag's value (--file=./x.sql) counts.
func ArgFiles(dir string, argv []string) []ArgFile {
	script := -1
	if p, ok := Interpreted(argv); ok {
		script = p.Script
	}
	var out []ArgFile
	for i, a := range argv {
		if i == 0 && !strings.Contains(a, "/") {
			continue
		}
		if i > 0 && i != script && Data(a) {
			continue
		}
		if strings.HasPrefix(a, "-") {
			_, v, ok := strings.Cut(a, "=")
			if !ok {
				continue
			}
			a = v
		}
		if a == "" || strings.Contains(a, "{{") {
			continue
		}
		p := a
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		out = append(out, ArgFile{Index: i, Key: filepath.ToSlash(filepath.Clean(a)), Path: p})
	}
	return out
}

// CodeFiles are the files of argv a seal covers: ArgFiles, and the files
// the program reads as its code by convention from the working directory
// when argv names none (make's Makefile, npm's package.json), with Index
// -1.
func CodeFiles(dir string, argv []string) []ArgFile {
	out := ArgFiles(dir, argv)
	if p, ok := Interpreted(argv); ok {
		for _, name := range p.Implicit {
			rel := filepath.ToSlash(filepath.Join(p.ImplicitDir, name))
			path := rel
			if !filepath.IsAbs(path) {
				path = filepath.Join(dir, path)
			}
			if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
				out = append(out, ArgFile{Index: -1, Key: rel, Path: path})
				if p.FirstOnly {
					break
				}
			}
		}
	}
	return out
}

// DigestFile is the digest a seal holds for the file at p.
func DigestFile(p string) (string, error) {
	b, err := readFile(p)
	if err != nil {
		return "", err
	}
	return Digest(b), nil
}

// Matched is what one glob matched.
type Matched struct {
	// Files are the matches, relative to the config's directory with
	// slashes, sorted.
	Files []string
	// Digest covers every match's name and contents.
	Digest string
	// contents holds each match's bytes when kept (Prepare copies them).
	contents map[string][]byte
}

// Match finds and digests what glob matches under dir: regular files
// only, caches and version control left out (skipped), symbolic links to
// directories not followed.
func Match(dir, glob string) (Matched, error) {
	return match(dir, glob, false)
}

func match(dir, glob string, keep bool) (Matched, error) {
	if !doublestar.ValidatePattern(glob) {
		return Matched{}, fmt.Errorf("%q is not a valid glob", glob)
	}
	if filepath.IsAbs(glob) {
		return Matched{}, fmt.Errorf("%q is absolute: job.files are relative to the config's directory", glob)
	}
	base, pattern := doublestar.SplitPattern(glob)
	root := filepath.Join(dir, filepath.FromSlash(base))
	names, err := doublestar.Glob(os.DirFS(root), pattern, doublestar.WithFilesOnly(), doublestar.WithNoFollow())
	if err != nil {
		return Matched{}, fmt.Errorf("%s: %w", glob, err)
	}
	m := Matched{}
	if keep {
		m.contents = map[string][]byte{}
	}
	var total int64
	var list bytes.Buffer
	sort.Strings(names)
	for _, n := range names {
		rel := path.Clean(path.Join(base, n))
		if skipped(rel) {
			continue
		}
		p := filepath.Join(root, filepath.FromSlash(n))
		fi, err := os.Stat(p)
		if err == nil && fi.IsDir() {
			// A link to a directory, which the glob does not follow: what
			// a script reads through it would not be sealed.
			return Matched{}, fmt.Errorf("%s: %s is a link to a directory, which refill does not follow: list the files of its target in job.files", glob, rel)
		}
		if err != nil || !fi.Mode().IsRegular() {
			continue // a dangling link, a socket: nothing to run
		}
		if len(m.Files) == MaxFiles {
			return Matched{}, fmt.Errorf("%s matches more than %d files: narrow it to the code the job runs", glob, MaxFiles)
		}
		b, err := readFile(p)
		if err != nil {
			return Matched{}, err
		}
		if total += int64(len(b)); total > MaxBytes {
			return Matched{}, fmt.Errorf("%s matches more than %d MiB: narrow it to the code the job runs", glob, MaxBytes>>20)
		}
		fmt.Fprintf(&list, "%s\x00%s\n", rel, Digest(b))
		m.Files = append(m.Files, rel)
		if keep {
			m.contents[rel] = b
		}
	}
	m.Digest = Digest(list.Bytes())
	return m, nil
}

// readFile reads a sealed file through one open descriptor, bounded by
// MaxBytes.
func readFile(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", p, err)
	}
	if len(b) > MaxBytes {
		return nil, fmt.Errorf("%s is over %d MiB: it is not code a job runs", p, MaxBytes>>20)
	}
	return b, nil
}

// ChangedError says that a sealed file is not what the plan sealed.
type ChangedError struct {
	// Key is the seal's entry: a file, or GlobKey and a glob.
	Key string
	// Sealed and Now are the digests; Now is "" when the file is gone,
	// and Sealed is "" for a file the plan did not seal.
	Sealed, Now string
	// While is true when the change was seen after the job ran.
	While bool
}

func (e *ChangedError) Error() string {
	what := e.Key
	if g, ok := strings.CutPrefix(e.Key, GlobKey); ok {
		what = "the files matching " + g
	}
	when := "since the plan was sealed"
	if e.While {
		when = "while the job ran"
	}
	switch {
	case e.Sealed == "":
		return fmt.Sprintf("%s names a file the plan did not seal", what)
	case e.Now == "":
		return fmt.Sprintf("%s is gone %s (sealed %s)", what, when, Short(e.Sealed))
	}
	return fmt.Sprintf("%s changed %s (sealed %s, now %s)", what, when, Short(e.Sealed), Short(e.Now))
}

// Short abbreviates a digest for messages.
func Short(d string) string {
	if len(d) > 19 {
		return d[:19]
	}
	return d
}

// Prepared is a command's argv ready to run: its sealed files checked
// against the seal, and the files argv names copied into a private
// directory (with every file the globs match, at the same relative paths,
// so a script that sources its neighbours by its own location finds the
// sealed copies).
type Prepared struct {
	// Argv is the argv to run: argv with each sealed file replaced by its
	// private copy.
	Argv []string
	// Dir is the private directory, "" when nothing was copied.
	Dir string
	// Env is what the job's environment needs beside its own so that an
	// interpreter reads the sealed copies and nothing else of the
	// project's (Python: its module path, its bytecode cache).
	Env []string
}

// Close removes the private copies.
func (p *Prepared) Close() error {
	if p == nil || p.Dir == "" {
		return nil
	}
	return os.RemoveAll(p.Dir)
}

// Prepare checks a job against its seal and readies argv to run. template
// is the argv the job was sealed with (placeholders unfilled), argv the
// same with them filled. The seal must cover exactly what the template
// names now: a file edited, removed or newly named is a ChangedError.
// Each file argv names is read once, checked, and copied; what runs is the
// copy, so it is the bytes that were checked.
func Prepare(dir string, template, argv, globs []string, sealed map[string]string) (*Prepared, error) {
	files, err := sealedArgs(dir, template, globs, sealed)
	if err != nil {
		return nil, err
	}
	prep := &Prepared{Argv: slices.Clone(argv)}
	prog, interpreted := Interpreted(template)
	python := interpreted && (strings.HasPrefix(prog.Interpreter, "python") || strings.HasPrefix(prog.Interpreter, "pypy"))
	// A directory an interpreter runs (python3 pkg), a module (python3
	// -m), or inline code importing the project's modules run from the
	// sealed copies too.
	dirScript := interpreted && prog.Script >= 0 && isDir(filepath.Join(dir, template[prog.Script]))
	keep := len(files) > 0 || (python && len(globs) > 0 && (prog.Module != "" || prog.Inline || dirScript))
	copies := map[string][]byte{}
	for _, f := range files {
		b, err := readFile(f.Path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &ChangedError{Key: f.Key, Sealed: sealed[f.Key]}
		}
		if err != nil {
			return nil, err
		}
		if got := Digest(b); got != sealed[f.Key] {
			return nil, &ChangedError{Key: f.Key, Sealed: sealed[f.Key], Now: got}
		}
		copies[f.Key] = b
	}
	for _, g := range globs {
		m, err := match(dir, g, keep)
		if err != nil {
			return nil, err
		}
		if m.Digest != sealed[GlobKey+g] {
			return nil, &ChangedError{Key: GlobKey + g, Sealed: sealed[GlobKey+g], Now: m.Digest}
		}
		for rel, b := range m.contents {
			if _, ok := copies[rel]; !ok {
				copies[rel] = b
			}
		}
	}
	if at := ProgramAt(template); at < len(template) && filepath.Base(template[at]) == "dbt" {
		// dbt's partial-parse cache (target/partial_parse.msgpack) is
		// parsed code nobody sealed: dbt parses the sealed project anew.
		prep.Env = append(prep.Env, "DBT_PARTIAL_PARSE=false")
	}
	if !keep {
		return prep, nil
	}
	root, err := privateDir(dir)
	if err != nil {
		return nil, fmt.Errorf("private copy of the job's files: %w", err)
	}
	prep.Dir = root
	// Readable (not writable) by a job that runs as another user
	// (run.job_user).
	if err := os.Chmod(root, 0o755); err != nil {
		prep.Close()
		return nil, err
	}
	for rel, b := range copies {
		if err := writeCopy(root, rel, b); err != nil {
			prep.Close()
			return nil, fmt.Errorf("private copy of %s: %w", rel, err)
		}
	}
	for _, f := range files {
		if f.Index < 0 {
			continue // read from the working directory, by name
		}
		p := copyPath(root, f.Key)
		if flag, _, ok := strings.Cut(template[f.Index], "="); ok && strings.HasPrefix(flag, "-") {
			p = flag + "=" + p
		}
		prep.Argv[f.Index] = p
	}
	if dirScript && len(globs) > 0 {
		prep.Argv[prog.Script] = copyPath(root, path.Clean(filepath.ToSlash(template[prog.Script])))
	}
	if python {
		// Bytecode from the private cache only (a .pyc planted in the
		// project's __pycache__ is never read), no user site-packages
		// from HOME, and for a module or inline code the sealed copies
		// first and the working directory not at all.
		prep.Env = append(prep.Env, "PYTHONPYCACHEPREFIX="+filepath.Join(root, ".pycache"), "PYTHONNOUSERSITE=1")
		if prog.Module != "" || prog.Inline {
			prep.Env = append(prep.Env, "PYTHONSAFEPATH=1", "PYTHONPATH="+root)
		}
	}
	return prep, nil
}

// privateDir makes the directory a job's private copies go in: a new
// hidden directory in the config's directory (where the job runs), so
// that what an interpreter looks up beside its program — node_modules,
// up the tree — is the project's and not a shared temporary directory's;
// else, where that cannot be written, one in the system's temporary
// directory. A job's user may read it, not write it.
func privateDir(dir string) (string, error) {
	if root, err := os.MkdirTemp(dir, ".refill-job-"); err == nil {
		return root, nil
	}
	return os.MkdirTemp("", "refill-job-")
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// Recheck checks the sealed files again after the job ran: one edited
// meanwhile (by the job itself, or by someone racing it) is a ChangedError
// with While set, since what ran may not be what was approved.
func Recheck(dir string, template, globs []string, sealed map[string]string) error {
	files, err := sealedArgs(dir, template, globs, sealed)
	if err != nil {
		var ce *ChangedError
		if errors.As(err, &ce) {
			ce.While = true
		}
		return err
	}
	for _, f := range files {
		b, err := readFile(f.Path)
		if err != nil {
			return &ChangedError{Key: f.Key, Sealed: sealed[f.Key], While: true}
		}
		if got := Digest(b); got != sealed[f.Key] {
			return &ChangedError{Key: f.Key, Sealed: sealed[f.Key], Now: got, While: true}
		}
	}
	for _, g := range globs {
		m, err := Match(dir, g)
		if err != nil {
			return err
		}
		if m.Digest != sealed[GlobKey+g] {
			return &ChangedError{Key: GlobKey + g, Sealed: sealed[GlobKey+g], Now: m.Digest, While: true}
		}
	}
	return nil
}

// sealedArgs returns the files of the template the seal covers, after
// checking that it still covers what must be sealed: every sealed file is
// still named and there (a ChangedError otherwise), every glob is sealed,
// and the program — argv[0], or the script an interpreter runs — is a
// sealed file if it is a file at all. Another argv element naming a file
// the plan did not seal (one made since) is not the job's code, and is
// left alone.
func sealedArgs(dir string, template, globs []string, sealed map[string]string) ([]ArgFile, error) {
	program := map[int]bool{0: true, -1: true, ProgramAt(template): true}
	if p, ok := Interpreted(template); ok && p.Script >= 0 {
		program[p.Script] = true
	}
	var out []ArgFile
	named := map[string]bool{}
	for _, f := range CodeFiles(dir, template) {
		named[f.Key] = true
		switch _, ok := sealed[f.Key]; {
		case ok:
			out = append(out, f)
		case program[f.Index]:
			return nil, &ChangedError{Key: f.Key}
		}
	}
	for _, g := range globs {
		named[GlobKey+g] = true
		if _, ok := sealed[GlobKey+g]; !ok {
			return nil, &ChangedError{Key: GlobKey + g}
		}
	}
	for k, d := range sealed {
		if !named[k] {
			return nil, &ChangedError{Key: k, Sealed: d}
		}
	}
	return out, nil
}

// copyPath is where a sealed file's private copy lives: at its relative
// path under the private root, or, for a file outside the config's
// directory, under root/.outside.
func copyPath(root, rel string) string {
	if filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
		sum := sha256.Sum256([]byte(rel))
		return filepath.Join(root, ".outside", hex.EncodeToString(sum[:6]), path.Base(rel))
	}
	return filepath.Join(root, filepath.FromSlash(rel))
}

// writeCopy writes a private copy, read-only and executable: whether the
// original was executable is not part of the seal, and a program that
// runs must be executable whatever its mode was at the check.
func writeCopy(root, rel string, b []byte) error {
	p := copyPath(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, b, 0o555)
}
