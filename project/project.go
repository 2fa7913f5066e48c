// Package project opens a refill project — its refill.yaml, warehouse and
// state store — and wires the core: a control.Control that plans, decides,
// runs and reports with every rule the command line enforces. The command
// line is one front door onto it; a server is another; a Go program may be
// a third:
//
//	p, err := project.Open(ctx, project.Options{Config: "refill.yaml"})
//	plan, err := p.Control.Plan(ctx, "alice", planner.Request{...})
//	_, err = p.Control.Approve(ctx, plan.ID, "bob", "")
//	err = p.Control.Apply(ctx, plan.ID, "alice")
//	rep, err := p.Control.Report(ctx, plan.ID)
package project

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/config"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/gate"
	"github.com/refill-dev/refill/internal/secret"
	"github.com/refill-dev/refill/jobs/command"
	"github.com/refill-dev/refill/notify"
	"github.com/refill-dev/refill/planner"
	"github.com/refill-dev/refill/proof"
	"github.com/refill-dev/refill/proof/scratch"
	"github.com/refill-dev/refill/run"
	"github.com/refill-dev/refill/store"
	"github.com/refill-dev/refill/warehouse"
)

// Options say which project to open and how.
type Options struct {
	// Config is the path to refill.yaml.
	Config string
	// Getenv reads the environment, for secrets the process's start
	// (secret.Keep) did not withhold — every one, when refill runs
	// in-process, as in tests; nil means os.Getenv.
	Getenv func(string) string
	// Now is the "as of" clock plans run on (REFILL_NOW in the CLI); nil
	// means the real clock. Housekeeping and the audit log always use the
	// real clock, which REFILL_NOW must not move.
	Now func() time.Time
	// Log receives the runner's log lines; nil discards them.
	Log io.Writer
	// NoWarehouse opens the state store only, for commands that need no
	// data (show, plans, history).
	NoWarehouse bool
}

// Project is an open project and its wired core.
type Project struct {
	Config    *refill.Config
	Warehouse refill.Warehouse
	Store     *store.Store
	Control   *control.Control
	Runner    *run.Runner
	// Notifier queues and delivers Slack messages and webhooks.
	Notifier *notify.Notifier
}

// Open loads the config, opens the warehouse and the state store (keyed
// with the audit key from the environment) and wires the core.
func Open(ctx context.Context, o Options) (*Project, error) {
	cfg, err := config.Load(o.Config)
	if err != nil {
		return nil, err
	}
	secrets := secret.Reader{Dir: cfg.Dir, Getenv: o.Getenv}
	p := &Project{Config: cfg}
	if !o.NoWarehouse {
		if p.Warehouse, err = warehouse.Open(ctx, secrets.DSN(cfg.Warehouse), cfg.Dir); err != nil {
			return nil, fmt.Errorf("warehouse: %w", err)
		}
	}
	if p.Store, err = OpenStore(ctx, cfg, secrets); err != nil {
		p.Close()
		return nil, err
	}
	if p.Control, p.Runner, err = Wire(cfg, p.Warehouse, p.Store, o.Now); err != nil {
		p.Close()
		return nil, err
	}
	p.Runner.Log = o.Log
	// Slack messages and webhooks are queued in the transaction of the
	// change they tell of; Notifier.Run (refill serve, refill worker)
	// delivers them.
	if p.Notifier, err = notify.New(cfg, p.Store, secrets.Read); err != nil {
		p.Close()
		return nil, fmt.Errorf("notify: %w", err)
	}
	if err := p.Notifier.Install(ctx); err != nil {
		p.Close()
		return nil, fmt.Errorf("notify: %w", err)
	}
	return p, nil
}

// OpenStore opens cfg's state store — at the DSN state: gives, or the one
// kept in the secret state_env or state_file names — keyed with the audit
// key, which lives outside the store (audit.key_env or audit.key_file).
func OpenStore(ctx context.Context, cfg *refill.Config, secrets secret.Reader) (*store.Store, error) {
	dsn := cfg.State
	if s := cfg.StateSecret(); s.IsSet() {
		v, err := secrets.Read(s)
		if err != nil {
			return nil, fmt.Errorf("state store: %w", err)
		}
		if dsn = strings.TrimSpace(v); dsn == "" {
			return nil, refill.BadInputf("state store: %s, which %s names, holds no DSN", s, s.Key)
		}
	}
	key, err := secrets.Read(cfg.AuditKey())
	if err != nil {
		return nil, fmt.Errorf("the audit key: %w", err)
	}
	st, err := store.Open(ctx, secrets.DSN(dsn), cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("state store: %w", err)
	}
	st.SetAuditKey([]byte(key))
	return st, nil
}

// Wire builds the core over an open warehouse (nil for state-only work)
// and state store: the planner with proof evidence, the prover with
// proof_warehouse for command jobs, the runner as the control's executor,
// all on the clock now (nil: the real one).
func Wire(cfg *refill.Config, wh refill.Warehouse, st *store.Store, now func() time.Time) (*control.Control, *run.Runner, error) {
	if now == nil {
		now = time.Now
	}
	// The small interfaces the gate and planner take stay nil without a
	// store (a nil *store.Store inside one would not be).
	var gs planner.Store
	if st != nil {
		gs = st
	}
	c := &control.Control{Config: cfg, Store: st, Warehouse: wh, Now: now}
	r := &run.Runner{Config: cfg, Warehouse: wh, Store: st, Now: now,
		Gate:    &gate.Gate{Config: cfg, Warehouse: wh, Store: gs, Now: now},
		Backoff: time.Duration(cfg.Run.Backoff), RescueAfter: time.Duration(cfg.Run.RescueAfter)}
	c.Executor = r
	// A plan seals the values its command jobs pass through from refill's
	// environment as keyed digests (never the values), and a run refuses
	// other values: the key comes from the audit key or the store.
	if st != nil {
		key, err := st.SealKey(context.Background())
		if err != nil {
			return nil, nil, err
		}
		r.EnvKey = key
		lookup := command.Lookup(secret.Withheld(cfg))
		for _, d := range cfg.Datasets {
			if d.Job != nil && d.Job.Kind == refill.JobCommand {
				d.Job.EnvSeal = command.EnvSeal(key, d.Job.Env, lookup)
			}
		}
	}
	c.Prover = &proof.Prover{Config: cfg, Warehouse: wh, Store: st, Now: now,
		OpenCommands: scratch.Opener(cfg, wh)}
	if wh != nil {
		pl, err := planner.New(cfg, wh, gs)
		if err != nil {
			return nil, nil, err
		}
		pl.Now = now
		if st != nil {
			pl.Proofs = proof.Status{Store: st}
		}
		c.Planner = pl
	}
	return c, r, nil
}

// Close releases the warehouse and the state store.
func (p *Project) Close() error {
	var err error
	if p.Warehouse != nil {
		err = p.Warehouse.Close()
	}
	if p.Store != nil {
		if e := p.Store.Close(); err == nil {
			err = e
		}
	}
	return err
}
