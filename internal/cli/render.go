package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/dustin/go-humanize"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/lineage"
)

// partitionsShown bounds how many partitions of one step the text rendering
// lists before eliding the middle; -o json always has them all.
const partitionsShown = 12

// renderPlan writes a plan the way `terraform plan` reads: what changes, how
// much, and why this tier, with what to do next.
func renderPlan(p *refill.Plan, cfg *refill.Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Plan %s  %s  status %s\n", p.ID, shortHash(p.Hash), p.Status)
	fmt.Fprintf(&b, "  request   %s  %s..%s (%d %s)  by %s\n", strings.Join(p.Request.Targets, ", "),
		p.Request.From, p.Request.To, p.Request.Days, plural(p.Request.Days, "day", "days"), p.Request.RequestedBy)
	if sel := selectionText(p.Request); sel != "" {
		fmt.Fprintf(&b, "  selected  %s\n", sel)
	}
	fmt.Fprintf(&b, "  reason    %s\n", refill.OneLine(p.Request.Reason))
	fmt.Fprintf(&b, "  created   %s\n\n", p.CreatedAt.Format("2006-01-02 15:04:05 MST"))

	// A failed proof is what the approver must see first, whatever the
	// tier (in reasons when it decided it, in attention otherwise).
	failed := p.FailedProofs()
	for _, r := range failed {
		fmt.Fprintf(&b, "%s\n", red("  FAILED PROOF  "+refill.OneLine(r)))
	}
	if len(failed) > 0 {
		b.WriteString("\n")
	}

	renderChanges(&b, p)
	renderGate(&b, p.Gate)

	nparts := 0
	var cur, exp int64
	var curUnknown, expUnknown int
	for _, s := range p.Steps {
		nparts += len(s.Partitions)
		c, e, cu, eu := s.RowTotals()
		cur, exp, curUnknown, expUnknown = cur+c, exp+e, curUnknown+cu, expUnknown+eu
	}
	written := "nothing has been written"
	switch p.Status {
	case refill.StatusRunning, refill.StatusFailed, refill.StatusNeedsReview:
		written = "a run began: refill report " + p.ID + " says what was written"
	case refill.StatusCancelled:
		written = "cancelled: refill report " + p.ID + " says what, if anything, was written"
	case refill.StatusApplied:
		written = "applied: refill report " + p.ID + " says what was written"
	case refill.StatusRolledBack:
		written = "it was applied and rolled back: the partitions hold what they held before"
	}
	fmt.Fprintf(&b, "refill %s %d %s, %d %s, in this order (%s):\n\n", willOrDid(p.Status),
		len(p.Steps), plural(len(p.Steps), "dataset", "datasets"), nparts, plural(nparts, "partition", "partitions"), written)
	order := 0
	for _, s := range p.Steps {
		if s.Order != order {
			order = s.Order
			fmt.Fprintf(&b, "  order %d\n", order)
		}
		renderStep(&b, s)
	}
	fmt.Fprintf(&b, "\n  total rows now %s, expected after %s\n\n", control.Total(cur, curUnknown), control.Total(exp, expUnknown))
	renderConsumers(&b, p.Consumers)
	renderLeftOut(&b, p.LeftOut)

	fmt.Fprintf(&b, "Tier: %s\n", strings.ToUpper(string(p.Tier)))
	// A reason may quote warehouse data (a proof's example row): one line
	// each, its control characters shown, never run.
	for _, r := range p.Reasons {
		fmt.Fprintf(&b, "  - %s\n", refill.OneLine(r))
	}
	if len(p.Attention) > 0 {
		fmt.Fprintf(&b, "Also keeping it from auto:\n")
		for _, r := range p.Attention {
			fmt.Fprintf(&b, "  - %s\n", refill.OneLine(r))
		}
	}
	b.WriteString("\n")
	b.WriteString(nextSteps(p, cfg))
	return b.String()
}

func renderGate(b *strings.Builder, g refill.GateVerdict) {
	var bad, warn, accepted []refill.Finding
	for _, f := range g.Findings {
		switch {
		case f.Warning:
			warn = append(warn, f)
		case f.Accepted != nil:
			accepted = append(accepted, f)
		case !f.Passed:
			bad = append(bad, f)
		}
	}
	switch {
	case !g.Passed:
		fmt.Fprintf(b, "Source gate: FAILED (%d %s)\n", len(bad), plural(len(bad), "finding", "findings"))
	case len(g.Checked) == 0:
		b.WriteString("Source gate: no upstream sources to check\n")
	default:
		fmt.Fprintf(b, "Source gate: passed (%s)\n", strings.Join(g.Checked, ", "))
	}
	line := func(f refill.Finding, mark string) {
		col := ""
		if f.Column != "" {
			col = "." + f.Column
		}
		msg := f.Message
		if msg == "" {
			msg = fmt.Sprintf("observed %g, limit %g", f.Observed, f.Limit)
		}
		fmt.Fprintf(b, "  %s %s%s %s %s: %s\n", mark, f.Dataset, col, f.Partition, f.Check, msg)
	}
	for _, f := range bad {
		line(f, "x")
	}
	// Warnings that say the same of many partitions read as one line.
	for _, g := range refill.GroupWarnings(warn) {
		if len(g.Partitions) == 1 {
			line(refill.Finding{Dataset: g.Dataset, Column: g.Column, Partition: g.First, Check: g.Check, Message: g.Example}, "!")
			continue
		}
		col := ""
		if g.Column != "" {
			col = "." + g.Column
		}
		fmt.Fprintf(b, "  ! %s%s %s, %s: %d partitions, %s … %s (e.g. %s)\n", g.Dataset, col, g.Check, g.What, len(g.Partitions), g.First, g.Last, g.Example)
	}
	for _, f := range accepted {
		line(f, "=")
	}
	b.WriteString("\n")
}

func renderStep(b *strings.Builder, s refill.Step) {
	tags := ""
	if len(s.Tags) > 0 {
		tags = "  [" + strings.Join(s.Tags, ", ") + "]"
	}
	table := s.Table
	if table == "" {
		table = "(no table: rows unknown)"
	}
	fmt.Fprintf(b, "  ~ %s  %s job -> %s%s\n", s.Dataset, s.Kind, table, tags)
	if j := s.Job; j != nil && j.DbtProject != "" && len(j.Command) > 0 {
		// What refill asks dbt to do, per partition, is the approver's
		// business: --event-time-start/end or --vars, which target.
		fmt.Fprintf(b, "      runs %s\n", refill.OneLine(strings.Join(j.Command, " ")))
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	// A long step shows its first and last partitions, and every changed
	// one between them (up to partitionsShown more): the rest are counted.
	show := make([]bool, len(s.Partitions))
	extra := 0
	for i, pp := range s.Partitions {
		switch {
		case len(s.Partitions) <= partitionsShown || i < partitionsShown-3 || i >= len(s.Partitions)-3:
			show[i] = true
		case pp.Diff.Changes() && extra < partitionsShown:
			show[i] = true
			extra++
		}
	}
	hidden := 0
	for i, pp := range s.Partitions {
		if !show[i] {
			hidden++
			continue
		}
		if hidden > 0 {
			fmt.Fprintf(tw, "      … %d more\t\t\t\t\t\n", hidden)
			hidden = 0
		}
		what := change(pp.Diff)
		if what != "" {
			what = "  " + what
		}
		fmt.Fprintf(tw, "      %s\t%s\t->\t%s\t%s\t%s\t%s\n", pp.Partition, rows(pp.CurrentRows), rows(pp.ExpectedRows), delta(pp), pp.ExpectedMethod, what)
	}
	tw.Flush()
	if s.ExpectedNote != "" {
		fmt.Fprintf(b, "        expected: %s\n", s.ExpectedNote)
	}
	// What the first changed partition's rows look like, old and new.
	for _, pp := range s.Partitions {
		if !pp.Diff.Changes() || len(pp.Diff.Sample) == 0 {
			continue
		}
		fmt.Fprintf(b, "        e.g. %s:\n", pp.Partition)
		for _, row := range pp.Diff.Sample {
			fmt.Fprintf(b, "          %s\n", row.Describe(pp.Diff.Key))
		}
		break
	}
}

// change is a partition's content diff in a few words, after its counts.
func change(d *refill.PartitionDiff) string {
	switch {
	case d == nil || d.Skipped != "":
		return "" // said once, for the step, in the changes above
	case d.Changes():
		return refill.OneLine(d.Summary())
	}
	return "unchanged"
}

// renderChanges leads with what the content diffs found: each step's
// change, the changed ones first, and why any were not diffed.
func renderChanges(b *strings.Builder, p *refill.Plan) {
	changes := p.Changes()
	if changes == nil {
		return
	}
	b.WriteString("What changes (each partition rebuilt in a rolled-back rehearsal and compared with the live one):\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	for _, c := range refill.ChangedFirst(changes) {
		mark := "="
		switch {
		case c.Changed > 0:
			mark = "~"
		case c.Unchanged == 0:
			mark = "?"
		}
		fmt.Fprintf(tw, "  %s %s\t%s\n", mark, c.Name(), refill.OneLine(c.Summary()))
	}
	tw.Flush()
	b.WriteString("\n")
}

func rows(n *int64) string {
	if n == nil {
		return "?"
	}
	return humanize.Comma(*n)
}

// delta shows the expected change; over 10% either way is marked, because
// that is what a person should look at before approving.
func delta(pp refill.PartitionPlan) string {
	if pp.CurrentRows == nil || pp.ExpectedRows == nil {
		return ""
	}
	c, e := *pp.CurrentRows, *pp.ExpectedRows
	if c == e {
		if pp.ExpectedMethod == refill.ExpectedHistory {
			// A median of past partitions is a guess about rows, not a
			// count of what the job will write: never "no change".
			return "≈"
		}
		return "="
	}
	d := e - c
	sign := "+"
	if d < 0 {
		sign = ""
	}
	if c == 0 {
		return fmt.Sprintf("%s%s (new) !", sign, humanize.Comma(d))
	}
	pct := float64(d) / float64(c) * 100
	mark := ""
	if pct > 10 || pct < -10 {
		mark = " !"
	}
	return fmt.Sprintf("%s%s (%s%.1f%%)%s", sign, humanize.Comma(d), sign, pct, mark)
}

func nextSteps(p *refill.Plan, cfg *refill.Config) string {
	switch p.Status {
	case refill.StatusBlocked:
		return "Blocked: the source gate failed. This plan can never be approved or applied;\nrepair the source, then plan again.\n"
	case refill.StatusReady:
		return fmt.Sprintf("Ready: auto tier needs no approval. Run it with: refill apply %s\n", p.ID)
	case refill.StatusPending:
		switch p.Tier {
		case refill.TierManual:
			return fmt.Sprintf("Next (manual checklist): refill snapshot %s; refill scope %s --note ...;\n  approval by a lead other than %s; refill apply %s; refill signoff %s\n",
				p.ID, p.ID, p.Request.RequestedBy, p.ID, p.ID)
		default:
			return fmt.Sprintf("Next: someone other than %s reviews this dry run and runs: refill approve %s --as USER\n", p.Request.RequestedBy, p.ID)
		}
	}
	return ""
}

func renderPlans(list []refill.PlanSummary) string {
	if len(list) == 0 {
		return "no plans yet: run `refill plan TARGET --from D --to D --reason TEXT`\n"
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tTIER\tTARGETS\tRANGE\tDATASETS\tPARTITIONS\tBY\tCREATED\tREASON")
	for _, s := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s..%s\t%d\t%d\t%s\t%s\t%s\n", s.ID, s.Status, s.Tier, strings.Join(s.Targets, ","),
			s.From, s.To, s.Datasets, s.Partitions, s.RequestedBy, s.CreatedAt, truncate(refill.OneLine(s.Reason), 40))
	}
	tw.Flush()
	return b.String()
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func shortHash(h string) string {
	if len(h) > 19 {
		return h[:19]
	}
	return h
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// renderConsumers lists what reads the plan's datasets from outside
// refill, as OpenLineage reported it: nothing will rebuild those.
func renderConsumers(b *strings.Builder, cs []refill.Consumer) {
	if len(cs) == 0 {
		return
	}
	fmt.Fprintf(b, "Seen by OpenLineage reading what this plan rewrites (%d):\n", len(cs))
	for _, c := range cs {
		// Names an OpenLineage producer reported: outside text, kept on
		// its line.
		fmt.Fprintf(b, "  - %s reads %s — not rebuilt: consumer outside refill (job %s, last seen %s)\n",
			refill.OneLine(c.Dataset), refill.OneLine(c.Reads), refill.OneLine(c.Job), c.LastSeen.UTC().Format("2006-01-02 15:04"))
	}
	b.WriteString("\n")
}

// selectionText is the request's selectors as a command line would give
// them, or "" for plain dataset names.
func selectionText(r refill.Request) string {
	if len(r.Select) == 0 {
		return ""
	}
	return lineage.SelectionOf(r).String()
}

func renderLeftOut(b *strings.Builder, ls []refill.LeftOut) {
	if len(ls) == 0 {
		return
	}
	fmt.Fprintf(b, "%s\n", red(fmt.Sprintf("Left out, but reading what this plan rewrites (%d):", len(ls))))
	for _, l := range ls {
		fmt.Fprintf(b, "  - %s\n", l.Describe())
	}
	b.WriteString("\n")
}

// red marks s to be shown in red on a terminal (paint); elsewhere the
// marks are dropped.
func red(s string) string { return redOn + s + redOff }

const (
	redOn  = "\x00<red>"
	redOff = "\x00</red>"
)

// paint turns red's marks into the terminal's colour, or drops them when
// color is false (a pipe, a file). The text it marks was made one line
// (refill.OneLine), so no mark comes from anywhere else.
func paint(s string, color bool) string {
	if color {
		return strings.NewReplacer(redOn, colourRed, redOff, colourOff).Replace(s)
	}
	return strings.NewReplacer(redOn, "", redOff, "").Replace(s)
}

const (
	colourRed = "\x1b[1;31m"
	colourOff = "\x1b[0m"
)

// printPainted writes s to w: with color, the text goes through w (the
// escaper, which shows any control character as text) and only the colour
// codes red's marks stand for go to the terminal itself.
func printPainted(w io.Writer, s string, color bool) error {
	if !color {
		_, err := io.WriteString(w, paint(s, false))
		return err
	}
	for s != "" {
		i := strings.Index(s, redOn)
		if i < 0 {
			_, err := io.WriteString(w, s)
			return err
		}
		if _, err := io.WriteString(w, s[:i]); err != nil {
			return err
		}
		s = s[i+len(redOn):]
		j := strings.Index(s, redOff)
		if j < 0 {
			j = len(s)
		}
		if _, err := io.WriteString(raw(w), colourRed); err != nil {
			return err
		}
		if _, err := io.WriteString(w, s[:j]); err != nil {
			return err
		}
		if _, err := io.WriteString(raw(w), colourOff); err != nil {
			return err
		}
		s = strings.TrimPrefix(s[j:], redOff)
	}
	return nil
}

// willOrDid is what the plan's steps are to the reader: still to come, or
// (once a run began) what the run was to do.
func willOrDid(s refill.Status) string {
	switch s {
	case refill.StatusRunning, refill.StatusFailed, refill.StatusNeedsReview, refill.StatusCancelled, refill.StatusApplied, refill.StatusRolledBack:
		return "was to rebuild"
	}
	return "will rebuild"
}

// color reports whether the command's output is shown in colour: on a
// terminal, unless NO_COLOR is set.
func (a *app) color() bool { return terminal(a.stdout) && os.Getenv("NO_COLOR") == "" }
