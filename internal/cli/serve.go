package cli

import (
	"context"
	"errors"
	"fmt"
	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/config"
	"github.com/refill-dev/refill/control"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/refill-dev/refill/server"
)

func (a *app) serveCmd() *cobra.Command {
	var addr, logFormat string
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "serve [--addr 127.0.0.1:8080]",
		Short: "HTTP API, web UI, Slack endpoint and workers, until interrupted",
		Long: `Serve the project: the JSON API under /api/v1 (bearer tokens from
refill token create), the web UI at /, Slack's interactions at
/slack/interactions, /healthz and Prometheus /metrics. It also runs the
workers: plans approved in the browser or in Slack run without a terminal,
and Slack messages and webhooks queued by any door go out from here.

On SIGINT or SIGTERM it stops taking requests and new runs, lets partitions in
flight finish for --grace, then stops the rest: their transactions roll back
and refill apply resumes them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var h slog.Handler = slog.NewJSONHandler(a.stderr, nil)
			switch logFormat {
			case "json":
			case "text":
				h = slog.NewTextHandler(a.stderr, nil)
			default:
				return fmt.Errorf("--log-format %q: want json or text", logFormat)
			}
			log := slog.New(h)
			// What refill's packages log on their own (a warning that
			// command jobs run as root) goes to the same log.
			slog.SetDefault(log)
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			e, err := a.open(ctx, true, true)
			if err != nil {
				return err
			}
			defer e.Close()
			c, r, err := a.core(e)
			if err != nil {
				return err
			}
			r.Log = slogWriter{log: log}
			r.Grace = grace
			var srv *server.Server
			current := func(ctx context.Context) (*control.Control, error) {
				core, err := srv.Current(ctx)
				if err != nil {
					return nil, err
				}
				return core.Control, nil
			}
			reload, err := a.reloader(e, log)
			if err != nil {
				return err
			}
			srv = server.New(&server.Server{Config: e.cfg, Store: e.st, Control: c, Runner: r, Log: log, Version: Build().Version,
				Slack: e.notifier.InteractionsWith(current, log.With(slog.String("component", "slack"))), Reload: reload})
			workers, err := a.serveWorkers(ctx, e, c, r, srv, log)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("--addr %s: %w", addr, err)
			}
			hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
				WriteTimeout: 2 * time.Minute, IdleTimeout: 2 * time.Minute}
			url := "http://" + ln.Addr().String()
			log.Info("serving", slog.String("url", url), slog.String("state_store", e.st.Driver()), slog.String("config", e.cfg.Name()))
			fmt.Fprintf(a.stderr, "refill serve: %s (web UI; API under %s/api/v1) — sign in with a token from refill token create --as USER\n", url, url)
			served := make(chan error, 1)
			go func() { served <- hs.Serve(ln) }()
			select {
			case err := <-served:
				return err
			case <-ctx.Done():
			}
			log.Info("shutting down", slog.Float64("grace_s", grace.Seconds()))
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
			defer cancel()
			if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				log.Warn("http shutdown", slog.String("error", err.Error()))
			}
			srv.Shutdown(sctx)
			workers()
			log.Info("stopped")
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8080", "where to listen")
	cmd.Flags().DurationVar(&grace, "grace", 30*time.Second, "how long running partitions may finish on shutdown")
	cmd.Flags().StringVar(&logFormat, "log-format", "json", "json or text (slog, on stderr)")
	return cmd
}

// slogWriter turns the runner's log lines into structured records.
type slogWriter struct{ log *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	// The runner prefixes its own clock; slog has one.
	if i := strings.Index(line, "  "); i > 0 && i < 16 {
		line = line[i+2:]
	}
	lvl := slog.LevelInfo
	if strings.HasPrefix(line, "ALERT") {
		lvl = slog.LevelWarn
	}
	w.log.Log(context.Background(), lvl, line, slog.String("component", "runner"))
	return len(p), nil
}

// stamp is what a file looked like: a change in it is a change.
type stamp struct {
	size int64
	mod  time.Time
	ino  uint64
}

// stamps are the files a config was built from: refill.yaml, and every
// script whose digest a command job seals.
func stamps(cfg *refill.Config) map[string]stamp {
	files := []string{cfg.File}
	for _, d := range cfg.Datasets {
		// A dbt manifest the datasets were imported from (datasets_from).
		if m, ok := strings.CutPrefix(d.From, "dbt:"); ok && m != "" {
			if !filepath.IsAbs(m) {
				m = filepath.Join(cfg.Dir, m)
			}
			if !slices.Contains(files, m) {
				files = append(files, m)
			}
		}
		if d.Job == nil || d.Job.Kind != refill.JobCommand || len(d.Job.Command) == 0 || !strings.Contains(d.Job.Command[0], "/") {
			continue
		}
		p := d.Job.Command[0]
		if !filepath.IsAbs(p) {
			p = filepath.Join(cfg.Dir, p)
		}
		files = append(files, p)
	}
	out := map[string]stamp{}
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			out[f] = stamp{size: -1}
			continue
		}
		st := stamp{size: fi.Size(), mod: fi.ModTime()}
		if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
			st.ino = sys.Ino
		}
		out[f] = st
	}
	return out
}

// reloader gives refill serve a fresh core whenever refill.yaml or a
// script a job seals changed since the core it decides with was built: a
// user removed, a lead demoted, a job edited are seen at the next request,
// as the CLI would see them. A config that no longer loads, or that moves
// the warehouse or the state store (which need a restart), stops every
// decision until it is fixed.
func (a *app) reloader(e *env, log *slog.Logger) (func(context.Context) (*server.Core, error), error) {
	cur := e.cfg
	last := stamps(cur)
	return func(ctx context.Context) (*server.Core, error) {
		now := stamps(cur)
		if maps.Equal(now, last) {
			return nil, nil
		}
		cfg, err := config.Load(cur.File)
		if err != nil {
			return nil, fmt.Errorf("%s changed and no longer loads; fix it (nothing is decided until then): %w", cur.Name(), err)
		}
		if cfg.Warehouse != cur.Warehouse || cfg.State != cur.State || cfg.StateSecret() != cur.StateSecret() {
			return nil, fmt.Errorf("%s changed its warehouse or state store: restart refill serve to use them", cur.Name())
		}
		ne := &env{cfg: cfg, wh: e.wh, st: e.st, notifier: e.notifier}
		c, r, err := a.core(ne)
		if err != nil {
			return nil, err
		}
		r.Log = slogWriter{log: log}
		// What was read is what was stamped before reading: a change made
		// while loading is seen at the next request. (A script the new
		// config names for the first time makes one more reload.)
		cur, last = cfg, now
		return &server.Core{Config: cfg, Control: c, Runner: r}, nil
	}, nil
}
