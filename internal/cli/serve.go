package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/refill-dev/refill/server"
)

// Version is the binary's version, shown on /healthz.
var Version = "dev"

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
			srv := server.New(&server.Server{Config: e.cfg, Store: e.st, Control: c, Runner: r, Log: log, Version: Version,
				Slack: e.notifier.Interactions(c, log.With(slog.String("component", "slack")))})
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
			log.Info("shutting down", slog.Duration("grace", grace))
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
