package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/demo"
	"github.com/refill-dev/refill/planner"
	"github.com/refill-dev/refill/watch"
)

// demoRun is what the walkthrough did, for -o json and for tests.
type demoRun struct {
	Dir      string          `json:"dir"`
	Config   string          `json:"config"`
	Broken   []string        `json:"broken"`
	Blocked  *refill.Plan    `json:"blocked"`
	Proofs   []*refill.Proof `json:"proofs"`
	Repaired int64           `json:"repaired_rows"`
	Plans    []*refill.Plan  `json:"plans"`
	// Runs are the reports of the runs, in the order they ran; RolledBack
	// and Redo are the manual plan that was rolled back and its redo.
	Runs       []control.Report `json:"runs"`
	RolledBack string           `json:"rolled_back"`
	Redo       string           `json:"redo"`
	// Serve is the one command that serves the demo's web UI, and a
	// token (valid for a day) to sign in with as bob.
	Serve     string          `json:"serve"`
	SignInAs  string          `json:"sign_in_as"`
	SignInKey string          `json:"sign_in_token"`
	History   []control.Touch `json:"history"`
	Audit     int             `json:"audit_entries"`
	// Watch is the watcher's tick over the day whose load never ran.
	Watch watch.Report `json:"watch"`
}

func (a *app) demoCmd() *cobra.Command {
	var engine string
	cmd := &cobra.Command{
		Use:   "demo [DIR]",
		Short: "Build a self-contained replay of the incident (SQLite, no server) and walk through it",
		Long: `Write a SQLite warehouse and a refill.yaml into DIR (default ./refill-demo)
that replay the incident refill exists for — an upstream schema change that left
72 hours of events broken, an aggregate built on them, a billing table and a
partner export — then walk through it: the source gate blocks a backfill over
the broken source, a proof catches a job that is not safe to rerun, and once
the source is repaired three plans land in the three tiers.

Everything stays in DIR; rerunning the demo replaces an earlier demo there.
--warehouse duckdb writes the warehouse as a DuckDB file instead, in a refill
built with -tags duckdb.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "refill-demo"
			if len(args) == 1 {
				dir = args[0]
			}
			return a.demo(cmd.Context(), dir, engine)
		},
	}
	cmd.Flags().StringVar(&engine, "warehouse", "sqlite", "the warehouse's engine: "+strings.Join(demo.Engines(), " or "))
	return cmd
}

func (a *app) demo(ctx context.Context, dir, engine string) error {
	nowFn, err := a.now()
	if err != nil {
		return err
	}
	sc, err := demo.WriteOn(ctx, dir, nowFn(), engine)
	if err != nil {
		return err
	}
	a.configPath = sc.Config
	e, err := a.open(ctx, true, true)
	if err != nil {
		return err
	}
	defer e.Close()
	c, err := a.control(e)
	if err != nil {
		return err
	}
	abs, _ := filepath.Abs(dir)
	out := demoRun{Dir: abs, Config: sc.Config, Broken: []string{sc.BrokenFrom, sc.BrokenTo}}
	say := func(format string, args ...any) {
		if !a.json() {
			fmt.Fprintf(a.stdout, format, args...)
		}
	}
	chapter := 0
	title := func(t, story string) {
		chapter++
		say("── %d · %s ──\n%s\n\n", chapter, t, story)
	}
	plan := func(req planner.Request) (*refill.Plan, error) {
		say("$ refill plan %s --from %s --to %s --reason %q --as %s\n\n", req.Targets[0], req.From, req.To, req.Reason, req.Actor)
		pl, err := c.Plan(ctx, req.Actor, req)
		if pl == nil {
			return nil, err
		}
		if !a.json() {
			_ = printPainted(a.stdout, renderPlan(pl, e.cfg)+"\n", a.color())
		}
		return pl, err
	}
	prove := func(dataset, partition string) (*refill.Proof, error) {
		say("$ refill prove %s --partition %s --as alice\n\n", dataset, partition)
		pr, err := c.Prove(ctx, dataset, partition, "alice")
		if pr == nil {
			return nil, err
		}
		if err != nil && !errors.Is(err, refill.ErrVerification) {
			return nil, err
		}
		say("%s\n", renderProof(pr))
		out.Proofs = append(out.Proofs, pr)
		return pr, nil
	}

	say("refill demo — the incident, replayed in %s\n\n", abs)
	say("  %-16s events_raw: %s events over %d days (weekends ~40%% of weekdays)\n", sc.Warehouse, humanize.Comma(int64(sc.Rows)), demo.Days)
	say("                   sessions, events_daily [aggregate], revenue_daily [billing], partner_feed [external]\n")
	say("  refill.yaml      the datasets, their lineage, checks, policy and three users\n\n")
	say("On %s an upstream schema change emptied events_raw.amount for 72 hours\n", sc.BrokenFrom)
	say("(%s..%s). events_daily mis-aggregated those days into one 'unknown' row, and\n", sc.BrokenFrom, sc.BrokenTo)
	say("billing and the partner export were built on it. The pipeline has been fixed.\n\n")

	incident := planner.Request{Targets: []string{"events_raw"}, From: sc.BrokenFrom, To: sc.BrokenTo,
		Reason: "upstream schema change broke 72h of events (INC-4711)", Actor: "alice"}
	title("the obvious backfill, over a source that is still broken",
		"A fixed pipeline over a still-broken source gives the same wrong answer. The\nsource gate checks events_raw first, in one scan of the range.")
	// The source gate blocks it: stored and shown, the story goes on.
	if out.Blocked, err = plan(incident); err != nil && !errors.Is(err, refill.ErrBlocked) {
		return err
	}

	title("prove the jobs before trusting them to rerun",
		"Each job builds one partition three times inside a transaction that is rolled\nback: over its existing rows, again, and from empty. All three must agree.")
	for _, pr := range [][2]string{{"revenue_daily", sc.Day(2)}, {"sessions", sc.Day(2)}, {"events_daily", sc.Day(2)}} {
		if _, err := prove(pr[0], pr[1]); err != nil {
			return err
		}
	}

	title("the source team re-delivers the broken days",
		"The upstream re-sends the 72 hours with amount filled in.")
	if out.Repaired, err = sc.Repair(ctx); err != nil {
		return err
	}
	say("  %s rows of events_raw repaired (%s..%s)\n\n", humanize.Comma(out.Repaired), sc.BrokenFrom, sc.BrokenTo)

	steps := []struct {
		title, story string
		req          planner.Request
	}{
		{"auto: a small backfill of a proven leaf table",
			"sessions has nothing downstream, its job is proven, and 3 days is inside the\nauto band: it may run on its own.",
			planner.Request{Targets: []string{"sessions"}, From: sc.Day(3), To: sc.Day(1),
				Reason: "late-arriving events for the last three days", Actor: "alice"}},
		{"semi-auto: two weeks of sessions after a sessionization fix",
			"14 days is past the auto limit of 7: one approval, by someone other than the\nrequester, after this dry run.",
			planner.Request{Targets: []string{"sessions"}, From: sc.Day(24), To: sc.Day(11),
				Reason: "sessionization bug fixed in v2.4; recompute two weeks", Actor: "alice"}},
		{"manual: the broken 72 hours, now that the source is clean",
			"The gate passes. Billing and the partner export are downstream: manual, with\nsnapshot, scope, lead approval and sign-off. The dry run rebuilds every partition\nin a rolled-back rehearsal and compares it with today's: events_daily's 1 wrong\nrow becomes 5 with the amounts back, and revenue_daily does not change at all —\nits job cannot repair a stale row, as its failed proof warned.",
			incident},
	}
	for _, s := range steps {
		title(s.title, s.story)
		pl, err := plan(s.req)
		if err != nil {
			return err
		}
		out.Plans = append(out.Plans, pl)
	}
	if err := a.demoRuns(ctx, sc, &out, say, title); err != nil {
		return err
	}
	if err := a.demoSignIn(ctx, sc, &out); err != nil {
		return err
	}
	if a.json() {
		return a.printJSON(out)
	}
	first, cmd := "cd "+shellQuote(dir)+"\n  refill", "refill"
	if self := selfCommand(); self != "refill" {
		// go run: from where it ran, with the demo's config.
		cmd = self + " --config " + shellQuote(sc.Config)
		first = cmd
	}
	say("Try it yourself:\n  %s plans\n  %s show %s\n  %s check events_raw --from %s --to %s\n  %s lineage --format mermaid\n\n",
		first, cmd, out.Plans[len(out.Plans)-1].ID, cmd, sc.Day(14), sc.Day(1), cmd)
	say("See it in the browser — the web UI, the API and the workers, until Ctrl-C:\n  %s\nthen open http://127.0.0.1:8080 and sign in as %s with this token (valid for a day):\n  %s\n",
		out.Serve, out.SignInAs, out.SignInKey)
	return nil
}

// demoRuns runs the three plans: auto on its own, semi-auto after an
// approval, manual through its checklist — which ends in a rollback when the
// report shows billing was not repaired, a fixed billing job, and the
// checklist again through sign-off.
func (a *app) demoRuns(ctx context.Context, sc *demo.Scenario, out *demoRun, say func(string, ...any),
	title func(string, string)) error {
	open := func() (*env, *control.Control, error) {
		e, err := a.open(ctx, true, true)
		if err != nil {
			return nil, nil, err
		}
		c, err := a.control(e)
		if err != nil {
			return nil, nil, err
		}
		return e, c, nil
	}
	e, c, err := open()
	if err != nil {
		return err
	}
	defer func() { e.Close() }()
	apply := func(id, actor string) error {
		say("$ refill apply %s --as %s\n\n", id, actor)
		if err := c.Apply(ctx, id, actor); err != nil {
			return err
		}
		rep, err := c.Report(ctx, id)
		if err != nil && !errors.Is(err, refill.ErrVerification) {
			return err
		}
		out.Runs = append(out.Runs, rep)
		say("%s\n", renderReport(rep))
		return nil
	}
	do := func(cmdline string, f func() error) error {
		say("$ refill %s\n", cmdline)
		return f()
	}
	checklist := func(id string) error {
		if err := do("snapshot "+id+" --as alice", func() error { _, _, err := c.Snapshot(ctx, id, "alice"); return err }); err != nil {
			return err
		}
		if err := do("scope "+id+" --as alice --note \"the 72 broken hours of INC-4711, nothing else\"", func() error {
			_, err := c.Scope(ctx, id, "alice", "the 72 broken hours of INC-4711, nothing else")
			return err
		}); err != nil {
			return err
		}
		if err := do("approve "+id+" --as carol", func() error { _, err := c.Approve(ctx, id, "carol", "scope and dry run reviewed"); return err }); err != nil {
			return err
		}
		say("\n")
		return apply(id, "alice")
	}

	auto, semi, manual := out.Plans[0].ID, out.Plans[1].ID, out.Plans[2].ID
	title("the auto plan runs on its own",
		"River runs one job per partition; each is rebuilt and published in one transaction.")
	if err := apply(auto, "alice"); err != nil {
		return err
	}
	title("the semi-auto plan: bob looks at the dry run and approves",
		"Nobody approves their own request; the approval is bound to the plan's hash.")
	if err := do("approve "+semi+" --as bob --note \"range checked against the v2.4 release\"", func() error {
		_, err := c.Approve(ctx, semi, "bob", "range checked against the v2.4 release")
		return err
	}); err != nil {
		return err
	}
	say("\n")
	if err := apply(semi, "alice"); err != nil {
		return err
	}
	title("the manual plan: snapshot, scope, a lead's approval, the run",
		"Then the report: events_daily went 1 -> 5 rows a day, but revenue_daily's checksum\ndid not change. Its INSERT OR IGNORE kept the stale rows, as its proof warned.")
	if err := checklist(manual); err != nil {
		return err
	}
	title("carol rolls back rather than sign off",
		"Every snapshotted partition is restored in one transaction, proven by checksum.")
	if err := do("rollback "+manual+" --as carol", func() error { _, _, err := c.Rollback(ctx, manual, "carol", control.RollbackOptions{}); return err }); err != nil {
		return err
	}
	out.RolledBack = manual
	say("  restored; plan %s is rolled_back\n\n", manual)

	title("fix billing's job, prove it, and do it again",
		"revenue_daily now deletes and re-inserts its partition.")
	if err := sc.FixBillingJob(); err != nil {
		return err
	}
	e.Close()
	if e, c, err = open(); err != nil {
		return err
	}
	say("$ refill prove revenue_daily --partition %s --as alice\n\n", sc.Day(2))
	pr, err := c.Prove(ctx, "revenue_daily", sc.Day(2), "alice")
	if err != nil {
		return fmt.Errorf("the fixed billing job: %w", err)
	}
	out.Proofs = append(out.Proofs, pr)
	say("%s\n", renderProof(pr))
	req := planner.Request{Targets: []string{"events_raw"}, From: sc.BrokenFrom, To: sc.BrokenTo,
		Reason: "upstream schema change broke 72h of events (INC-4711); billing job fixed", Actor: "alice"}
	say("$ refill plan events_raw --from %s --to %s --reason %q --as alice\n\n", req.From, req.To, req.Reason)
	redo, err := c.Plan(ctx, "alice", req)
	if err != nil {
		return err
	}
	say("  plan %s: %s, %s\n\n", redo.ID, redo.Tier, redo.Status)
	out.Redo = redo.ID
	if err := checklist(redo.ID); err != nil {
		return err
	}
	if err := do("signoff "+redo.ID+" --as carol --note \"billing and partner export match the report\"", func() error {
		_, err := c.Signoff(ctx, redo.ID, "carol", "billing and partner export match the report")
		return err
	}); err != nil {
		return err
	}
	say("\n")

	title("a load that never ran: the watcher, not blind catch-up",
		"events_daily has a schedule (every day, 2h lag, 35 days back). Its load for one\nday never ran. The watcher finds the gap and plans it as \"watcher\"; it would\nrun the plan on its own only if it were auto with a passing gate. Billing and\nthe partner export are downstream, so it asks instead.")
	if _, err := sc.MissDay(ctx, sc.Day(2)); err != nil {
		return err
	}
	say("$ refill watch --once\n\n")
	w := &watch.Watcher{Config: e.cfg, Store: e.st, Warehouse: e.wh, Control: c, Now: c.Now}
	if out.Watch, err = w.Tick(ctx); err != nil {
		return err
	}
	say("%s\n", renderWatch(out.Watch))

	title("months later: why was this date reprocessed?", "")
	say("$ refill history revenue_daily --partition %s\n\n", sc.Day(8))
	if out.History, err = c.History(ctx, "revenue_daily", sc.Day(8)); err != nil {
		return err
	}
	say("%s", renderHistory("revenue_daily", sc.Day(8), out.History))
	rep, err := c.VerifyAudit(ctx)
	if err != nil {
		return err
	}
	out.Audit = rep.Entries
	say("$ refill audit verify\naudit log intact: %d entries, head %s\n\n", rep.Entries, rep.Head)
	return nil
}

// demoSignIn makes the one command that serves the demo, and a token to
// sign in with: bob reviews plans in the story.
func (a *app) demoSignIn(ctx context.Context, sc *demo.Scenario, out *demoRun) error {
	e, err := a.open(ctx, false, true)
	if err != nil {
		return err
	}
	defer e.Close()
	c, err := a.control(e)
	if err != nil {
		return err
	}
	tok, _, err := c.CreateToken(ctx, "bob", 24*time.Hour)
	if err != nil {
		return err
	}
	out.Serve = selfCommand() + " --config " + shellQuote(sc.Config) + " serve"
	out.SignInAs, out.SignInKey = "bob", tok
	return nil
}

// shellQuote quotes a path for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// selfCommand is how the user ran refill: "go run ./cmd/refill" when the
// binary is one go run built in a temporary directory, else "refill".
func selfCommand() string {
	exe, err := os.Executable()
	if err == nil && strings.Contains(filepath.ToSlash(exe), "/go-build") {
		return "go run ./cmd/refill"
	}
	return "refill"
}
