// Package cli is refill's command line: cobra commands over the planner,
// stores and warehouses, human text on a terminal and one JSON document with
// -o json. Exit codes are mapped from error classes in exactly one place,
// Main.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/config"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/internal/secret"
	"github.com/refill-dev/refill/notify"
	"github.com/refill-dev/refill/planner"
	"github.com/refill-dev/refill/project"
	"github.com/refill-dev/refill/proof"
	"github.com/refill-dev/refill/store"
	"github.com/refill-dev/refill/warehouse"
)

// app carries what every command shares: global flags, output streams and
// the environment, so tests can run commands in-process.
type app struct {
	stdout, stderr io.Writer
	getenv         func(string) string

	configPath string
	output     string
	as         string
	// printed is set once a JSON document went to stdout: a command that
	// reports and then fails (a blocked plan, a failed proof) has already
	// printed its one document, which carries the verdict.
	printed bool
}

// Main runs the command line and returns the process exit code.
// Everything it prints passes through an escaper (escape.go), whatever
// the command and whoever stored the text.
func Main(args []string, stdout, stderr io.Writer) int {
	out, errs := newEscaper(stdout), newEscaper(stderr)
	defer errs.Flush()
	defer out.Flush()
	a := &app{stdout: out, stderr: errs, getenv: secret.Getenv}
	notify.Version = Build().Version
	root := a.root()
	root.SetArgs(args)
	root.SetOut(out)
	root.SetErr(errs)
	err := root.ExecuteContext(context.Background())
	if err == nil {
		return refill.ExitOK
	}
	var ue *usageError
	if errors.As(err, &ue) {
		err = refill.BadInputf("%s", ue.Error())
	}
	code := refill.ExitCode(err)
	if a.output == "json" && !a.printed {
		a.printJSON(map[string]any{"error": err.Error(), "code": code})
	}
	fmt.Fprintf(a.stderr, "refill: %s\n", err)
	return code
}

// usageError marks cobra's own argument and flag errors as bad input.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }

func (a *app) root() *cobra.Command {
	root := &cobra.Command{
		Use:   "refill",
		Short: "refill decides how far a backfill can be trusted to run on its own, and enforces it",
		Long: `refill is a control plane for data backfills.

Describe datasets in refill.yaml, ask for a plan ("reprocess these targets for
these dates, because ..."), and refill shows every table and partition it would
rewrite, with row counts and the tier the policy gives it: auto, semi-auto or
manual.

Start with:  refill demo`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Build().String(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVar(&a.configPath, "config", "", "path to refill.yaml (default ./refill.yaml or $REFILL_CONFIG)")
	pf.StringVarP(&a.output, "output", "o", "text", "output format: text or json")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if a.output != "text" && a.output != "json" {
			return refill.BadInputf("-o %q: want text or json", a.output)
		}
		return nil
	}
	root.AddCommand(a.planCmd(), a.showCmd(), a.plansCmd(), a.lineageCmd(), a.checkCmd(), a.proveCmd(),
		a.approveCmd(), a.rejectCmd(), a.snapshotCmd(), a.scopeCmd(), a.signoffCmd(), a.rollbackCmd(),
		a.applyCmd(), a.reportCmd(), a.workerCmd(), a.historyCmd(), a.auditCmd(), a.schemaCmd(), a.acceptCmd(), a.demoCmd(),
		a.configCmd(), a.tokenCmd(), a.cancelCmd(), a.resolveCmd(), a.freezeCmd(false), a.freezeCmd(true), a.serveCmd(), a.watchCmd(), a.importCmd(), a.versionCmd())
	for _, c := range root.Commands() {
		c.Args = wrapArgs(c.Args)
	}
	return root
}

// wrapArgs turns positional-argument validation failures into bad input.
func wrapArgs(v cobra.PositionalArgs) cobra.PositionalArgs {
	if v == nil {
		return nil
	}
	return func(cmd *cobra.Command, args []string) error {
		if err := v(cmd, args); err != nil {
			return &usageError{fmt.Errorf("%s: %w", cmd.CommandPath(), err)}
		}
		return nil
	}
}

// env is the project a command works in: its config, warehouse and store.
type env struct {
	cfg      *refill.Config
	wh       refill.Warehouse
	st       *store.Store
	notifier *notify.Notifier
}

func (e *env) Close() {
	if e.wh != nil {
		e.wh.Close()
	}
	if e.st != nil {
		e.st.Close()
	}
}

// configPath is the config a command reads: --config, else
// $REFILL_CONFIG, else ./refill.yaml.
func configPath(flag string, getenv func(string) string) string {
	if flag != "" {
		return flag
	}
	if p := getenv("REFILL_CONFIG"); p != "" {
		return p
	}
	return "refill.yaml"
}

// Secrets says where the config the command line args will read keeps
// refill's secrets (config.Secrets), for secret.Keep before cobra runs:
// it finds --config as cobra would, and never fails — a config it cannot
// read gives none, and the command reports what is wrong with it.
func Secrets(args []string) (dir string, secrets []refill.Secret) {
	flag := ""
	for i := 0; i < len(args); i++ {
		if args[i] == "--" {
			break
		}
		if v, ok := strings.CutPrefix(args[i], "--config="); ok {
			flag = v
		} else if args[i] == "--config" && i+1 < len(args) {
			flag = args[i+1]
			i++
		}
	}
	dir, secrets, err := config.Secrets(configPath(flag, os.Getenv))
	if err != nil {
		return "", nil
	}
	return dir, secrets
}

func (a *app) loadConfig() (*refill.Config, error) {
	path := configPath(a.configPath, a.getenv)
	if _, err := os.Stat(path); err != nil {
		abs, _ := filepath.Abs(path)
		return nil, refill.BadInputf("no config at %s: create refill.yaml, pass --config, or run `refill demo` to see one", abs)
	}
	return config.Load(path)
}

// open loads the config and opens what the command needs.
func (a *app) open(ctx context.Context, needWarehouse, needStore bool) (*env, error) {
	cfg, err := a.loadConfig()
	if err != nil {
		return nil, err
	}
	e := &env{cfg: cfg}
	secrets := a.secrets(cfg)
	if needWarehouse {
		if e.wh, err = warehouse.Open(ctx, secrets.DSN(cfg.Warehouse), cfg.Dir); err != nil {
			return nil, fmt.Errorf("warehouse: %w", err)
		}
	}
	if needStore {
		if e.st, err = project.OpenStore(ctx, cfg, secrets); err != nil {
			e.Close()
			return nil, err
		}
		// Slack messages and webhooks are queued in the transaction of
		// the change they tell of, whichever door made it.
		if e.notifier, err = notify.New(cfg, e.st, secrets.Read); err != nil {
			e.Close()
			return nil, fmt.Errorf("notify: %w", err)
		}
		if err := e.notifier.Install(ctx); err != nil {
			e.Close()
			return nil, fmt.Errorf("notify: %w", err)
		}
	}
	return e, nil
}

// secrets reads cfg's secrets: what secret.Keep held at start, else the
// command's environment.
func (a *app) secrets(cfg *refill.Config) secret.Reader {
	return secret.Reader{Dir: cfg.Dir, Getenv: a.getenv}
}

// openAs opens the project's store (and warehouse, when asked) and resolves
// who is acting: what every command that changes state starts with. The
// rules every change obeys (the audit check, housekeeping) are control's,
// not the command line's.
func (a *app) openAs(ctx context.Context, needWarehouse bool) (*env, string, error) {
	e, err := a.open(ctx, needWarehouse, true)
	if err != nil {
		return nil, "", err
	}
	actor, err := a.actor(e.cfg)
	if err != nil {
		e.Close()
		return nil, "", err
	}
	return e, actor, nil
}

// openControl is openAs with the core wired over it: what every command
// that asks control for a decision starts with.
func (a *app) openControl(ctx context.Context, needWarehouse bool) (*env, *control.Control, string, error) {
	e, actor, err := a.openAs(ctx, needWarehouse)
	if err != nil {
		return nil, nil, "", err
	}
	c, err := a.control(e)
	if err != nil {
		e.Close()
		return nil, nil, "", err
	}
	return e, c, actor, nil
}

// now is the clock: REFILL_NOW (RFC 3339) when set, so tests and demos
// repeat exactly.
func (a *app) now() (func() time.Time, error) {
	s := a.getenv("REFILL_NOW")
	if s == "" {
		return time.Now, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return nil, refill.BadInputf("REFILL_NOW=%q is not an RFC 3339 time (e.g. 2026-11-30T12:00:00Z)", s)
	}
	return func() time.Time { return t }, nil
}

// actor resolves --as, REFILL_USER, then the OS user.
func (a *app) actor(cfg *refill.Config) (string, error) {
	as := a.as
	if as == "" {
		as = a.getenv("REFILL_USER")
	}
	fallback := ""
	if u, err := user.Current(); err == nil {
		fallback = u.Username
	}
	return cfg.Actor(as, fallback)
}

func (a *app) planner(e *env) (*planner.Planner, error) {
	var st planner.Store // a nil *store.Store would be a non-nil Store
	if e.st != nil {
		st = e.st
	}
	p, err := planner.New(e.cfg, e.wh, st)
	if err != nil {
		return nil, err
	}
	if p.Now, err = a.now(); err != nil {
		return nil, err
	}
	if e.st != nil {
		p.Proofs = proof.Status{Store: e.st}
	}
	return p, nil
}

func (a *app) json() bool { return a.output == "json" }

func (a *app) printJSON(v any) error {
	a.printed = true
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
