package notify

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
)

// Action IDs of the buttons refill puts on its messages. Each button's
// value is the plan's ID.
const (
	ActionApprove = "refill_approve"
	ActionReject  = "refill_reject"
	ActionCancel  = "refill_cancel"
)

// actionsBlockID names the block that holds the buttons.
const actionsBlockID = "refill_actions"

// Limits of Block Kit that a long plan could pass: text beyond them makes
// Slack refuse the whole message, so it is cut with an ellipsis instead.
const (
	maxHeader  = 150
	maxText    = 3000
	maxField   = 2000
	maxSteps   = 10
	maxParts   = 5
	maxFinding = 5
	maxContext = 10
)

// Message is the Slack message about a plan, as Block Kit: what it is for
// and who asked, the range, the datasets in run order with the rows each
// partition has and is expected to have, the gate's verdict, what has been
// decided and what it still needs, links to its page and lineage picture,
// and the buttons that fit its status (Approve and Reject while it waits,
// Cancel while it runs). Everything shown comes from the stored plan, so
// the same plan always renders the same message; publicURL is
// server.public_url, "" when unset.
func Message(s *control.State, publicURL string) []slack.Block {
	p := s.Plan
	blocks := []slack.Block{
		slack.NewHeaderBlock(plain(fmt.Sprintf("%s Backfill plan %s · %s", statusEmoji(p.Status), p.ID, p.Tier))),
	}
	// A failed proof first, then what the rebuild changes, then what it
	// is; then what else keeps the plan from auto beyond what decided its
	// tier.
	if failed := failedText(p); failed != "" {
		blocks = append(blocks, slack.NewSectionBlock(md(failed), nil, nil))
	}
	if changes := changesText(p); changes != "" {
		blocks = append(blocks, slack.NewSectionBlock(md(changes), nil, nil))
	}
	blocks = append(blocks, slack.NewSectionBlock(md(escape(control.Impact(p))), nil, nil))
	if rest := attentionText(p); rest != "" {
		blocks = append(blocks, slack.NewSectionBlock(md(rest), nil, nil))
	}
	blocks = append(blocks,
		slack.NewSectionBlock(nil, []*slack.TextBlockObject{
			field("Requested by", escape(p.Request.RequestedBy)),
			field("Range", fmt.Sprintf("%s → %s (%s)", escape(p.Request.From), escape(p.Request.To), plural(p.Request.Days, "day"))),
			field("Status", escape(string(p.Status))),
			field("Tier", tierText(p)),
		}, nil),
		slack.NewSectionBlock(md(datasetsText(p)), nil, nil),
		slack.NewSectionBlock(md(gateText(p.Gate)), nil, nil),
	)
	if lines := stateLines(s); len(lines) > 0 {
		blocks = append(blocks, contextBlock(lines...))
	}
	blocks = append(blocks, links(p.ID, publicURL))
	if b := buttons(s); b != nil {
		blocks = append(blocks, b)
	}
	return blocks
}

// Outcome is the short message that tells a plan's news — a decision, its
// run starting or stopping — where the plan's own message cannot be
// updated in place (an incoming webhook cannot edit what it posted).
func Outcome(e *refill.Event, s *control.State, publicURL string) []slack.Block {
	id := "`" + escape(e.PlanID) + "`"
	actor := "*" + escape(e.Actor) + "*"
	var text string
	switch e.Kind {
	case refill.EventApproval:
		text = fmt.Sprintf(":white_check_mark: *Plan %s approved* by %s%s", id, actor, colon(detail(e, "note")))
	case refill.EventRejection:
		text = fmt.Sprintf(":no_entry_sign: *Plan %s rejected* by %s%s", id, actor, colon(detail(e, "note")))
	case refill.EventRunStarted:
		text = fmt.Sprintf(":arrows_counterclockwise: *Plan %s is running*, started by %s", id, actor)
	case refill.EventCancelRequested:
		text = fmt.Sprintf(":black_square_for_stop: *Cancel of plan %s requested* by %s%s. Partitions in flight finish first.", id, actor, colon(detail(e, "reason")))
	case refill.EventRunCancelled:
		text = fmt.Sprintf(":black_square_for_stop: *Plan %s cancelled* by %s%s", id, actor, colon(detail(e, "reason")))
	case refill.EventRunFinished:
		text = fmt.Sprintf(":heavy_check_mark: *Plan %s applied*", id)
	case refill.EventRunPaused:
		text = fmt.Sprintf(":pause_button: *Plan %s paused for a restart*: the partitions in flight finished; the next `refill serve` or `refill worker` resumes it", id)
	case refill.EventResolved:
		said := "it did not run, and runs again when the plan resumes"
		var d struct {
			Ran bool `json:"ran"`
		}
		if json.Unmarshal(e.Detail, &d) == nil && d.Ran {
			said = "it ran, and counts as published"
		}
		text = fmt.Sprintf(":memo: *Plan %s*: %s said of `%s %s` that %s%s", id, actor, escape(e.Dataset), escape(e.Partition), said, colon(detail(e, "reason")))
	default:
		text = fmt.Sprintf("*Plan %s*: %s by %s", id, escape(string(e.Kind)), actor)
	}
	if s != nil {
		text += "\n" + escape(control.Impact(s.Plan))
	}
	blocks := []slack.Block{slack.NewSectionBlock(md(text), nil, nil), links(e.PlanID, publicURL)}
	if s != nil {
		if b := buttons(s); b != nil {
			blocks = append(blocks, b)
		}
	}
	return blocks
}

// Alert is a message of its own about something that needs a person: a
// run blocked by the gate as it began, a run that failed, a finished run
// whose report is out of tolerance (rep), and a freeze or its end. s is
// the plan, nil for a freeze.
func Alert(e *refill.Event, s *control.State, rep *control.Report, publicURL string) []slack.Block {
	var title, text string
	switch e.Kind {
	case refill.EventGateResult:
		var d struct {
			Failed   int              `json:"failed"`
			Findings []refill.Finding `json:"findings"`
		}
		_ = json.Unmarshal(e.Detail, &d) // a detail that does not decode shows no findings
		title = fmt.Sprintf(":rotating_light: Plan %s blocked at apply", e.PlanID)
		text = fmt.Sprintf("The source gate failed when the run began: %s. Nothing was written, and the plan can never run: repair the source and plan again.",
			plural(d.Failed, "check"))
		if lines := findingLines(d.Findings); lines != "" {
			text += "\n" + lines
		}
	case refill.EventRunFailed:
		title = fmt.Sprintf(":rotating_light: Plan %s: run failed", e.PlanID)
		text = fmt.Sprintf("```%s```\nPublished partitions are kept. `refill apply %s` resumes the run; `refill rollback %s` undoes what it wrote.",
			strings.ReplaceAll(mrkdwn(refill.Visible(detail(e, "error"))), "```", "'''"), escape(e.PlanID), escape(e.PlanID))
	case refill.EventRunFinished:
		flagged := 0
		var lines []string
		if rep != nil {
			flagged = rep.Flagged
			for _, r := range rep.Partitions {
				if !r.Flagged {
					continue
				}
				if len(lines) == maxFinding {
					lines = append(lines, fmt.Sprintf("• … and %d more", flagged-maxFinding))
					break
				}
				lines = append(lines, "• "+flaggedLine(r))
			}
		}
		title = fmt.Sprintf(":rotating_light: Plan %s: %s off expectation", e.PlanID, plural(flagged, "partition"))
		tol := 0.0
		if rep != nil {
			tol = rep.Tolerance
		}
		trouble := fmt.Sprintf("%s further than ±%.0f%% from what the plan expected", plural(flagged, "partition"), 100*tol)
		if rep != nil && rep.DryRunMismatches > 0 {
			trouble = escape(rep.Trouble())
		}
		text = fmt.Sprintf("The run finished, and its report finds %s:\n%s\nLook at them, and roll back if they are wrong: `refill rollback %s`.",
			trouble, strings.Join(lines, "\n"), escape(e.PlanID))
	case refill.EventRunWaiting:
		title = fmt.Sprintf(":hourglass_flowing_sand: Plan %s: waiting for the %s", e.PlanID, detail(e, "waiting_for"))
		text = fmt.Sprintf("`%s %s` has waited for the %s since %s: ```%s```\nThe run goes on by itself when it answers, for up to `run.outage_patience`.",
			escape(e.Dataset), escape(e.Partition), escape(detail(e, "waiting_for")), escape(detail(e, "since")),
			strings.ReplaceAll(mrkdwn(refill.Visible(detail(e, "error"))), "```", "'''"))
	case refill.EventNeedsReview:
		title = fmt.Sprintf(":rotating_light: Plan %s: %s %s needs review", e.PlanID, e.Dataset, e.Partition)
		text = fmt.Sprintf("%s\nSay whether it ran: `refill resolve %s --partition %s --ran|--not-ran --reason ...`; then `refill apply %s` resumes the run.",
			escape(detail(e, "why")), escape(e.PlanID), escape(e.Partition), escape(e.PlanID))
	case refill.EventFreeze:
		title = ":rotating_light: refill is frozen"
		text = fmt.Sprintf("*%s* froze automatic applies%s. Auto plans and the watcher wait until `refill unfreeze`; approved plans may still be applied by hand.",
			escape(e.Actor), colon(detail(e, "reason")))
	case refill.EventUnfreeze:
		title = ":arrow_forward: refill is unfrozen"
		text = fmt.Sprintf("*%s* lifted the freeze%s. Automatic applies run again.", escape(e.Actor), colon(detail(e, "reason")))
	default:
		title = fmt.Sprintf(":rotating_light: %s", e.Kind)
		text = escape(string(e.Detail))
	}
	blocks := []slack.Block{slack.NewHeaderBlock(plain(title)), slack.NewSectionBlock(md(text), nil, nil)}
	if s != nil {
		blocks = append(blocks, contextBlock(escape(control.Impact(s.Plan))), links(s.Plan.ID, publicURL))
	}
	return blocks
}

// fallback is a message's top-level text: what notifications and screen
// readers show, since they do not render blocks. Slack reads it as mrkdwn
// too, so it is escaped like the blocks.
func fallback(e *refill.Event, s *control.State) string {
	return escape(fallbackText(e, s))
}

func fallbackText(e *refill.Event, s *control.State) string {
	switch {
	case e.Kind == refill.EventPlanCreated && s != nil:
		p := s.Plan
		verb := "was planned"
		if p.Status == refill.StatusPending {
			verb = "waits for approval"
		}
		text := fmt.Sprintf("Backfill plan %s (%s) by %s %s: ", p.ID, p.Tier, p.Request.RequestedBy, verb)
		if h := p.ChangeHeadline(); h != "" {
			text += h + ". "
		}
		return text + control.Impact(p)
	case e.PlanID != "":
		return fmt.Sprintf("refill: plan %s: %s by %s", e.PlanID, strings.ReplaceAll(string(e.Kind), "_", " "), e.Actor)
	}
	return fmt.Sprintf("refill: %s by %s", e.Kind, e.Actor)
}

func statusEmoji(st refill.Status) string {
	switch st {
	case refill.StatusPending:
		return ":hourglass_flowing_sand:"
	case refill.StatusReady, refill.StatusApproved:
		return ":white_check_mark:"
	case refill.StatusRunning:
		return ":arrows_counterclockwise:"
	case refill.StatusApplied:
		return ":heavy_check_mark:"
	case refill.StatusBlocked, refill.StatusFailed:
		return ":x:"
	case refill.StatusRejected:
		return ":no_entry_sign:"
	case refill.StatusCancelled:
		return ":black_square_for_stop:"
	}
	return ":card_index_dividers:"
}

// failedText is the plan's failed proofs, red, "" when it has none.
func failedText(p *refill.Plan) string {
	var failed []string
	for _, r := range p.FailedProofs() {
		failed = append(failed, ":red_circle: *Failed proof:* "+escape(r))
	}
	return strings.Join(failed, "\n")
}

// attentionText is the plan's attention list beyond its failed proofs,
// "" when it has none.
func attentionText(p *refill.Plan) string {
	var rest []string
	for _, r := range p.Attention {
		if !refill.IsFailedProof(r) {
			rest = append(rest, "• "+escape(r))
		}
	}
	if len(rest) > 0 {
		rest = append([]string{":warning: *Also keeping it from auto:*"}, rest...)
	}
	return strings.Join(rest, "\n")
}

// changesText is what the plan's content diffs found, step by step, the
// changed ones first, with a few changed rows of the first changed
// partition; "" for a plan made before content diffs.
func changesText(p *refill.Plan) string {
	changes := p.Changes()
	if changes == nil {
		return ""
	}
	lines := []string{"*What changes* (each partition rebuilt in a rolled-back rehearsal and compared with the live one)"}
	for i, c := range refill.ChangedFirst(changes) {
		if i == maxSteps {
			lines = append(lines, fmt.Sprintf("… and %s more", plural(len(changes)-maxSteps, "dataset")))
			break
		}
		mark := ":white_circle:"
		switch {
		case c.Changed > 0:
			mark = ":large_orange_diamond:"
		case c.Unchanged == 0:
			mark = ":grey_question:"
		}
		lines = append(lines, fmt.Sprintf("%s *%s* %s", mark, escape(c.Name()), escape(clip(c.Summary(), 300))))
	}
	for _, st := range p.Steps {
		for _, pp := range st.Partitions {
			if !pp.Diff.Changes() || len(pp.Diff.Sample) == 0 {
				continue
			}
			lines = append(lines, fmt.Sprintf("_e.g. %s `%s`:_", escape(st.Dataset), escape(pp.Partition)))
			for i, row := range pp.Diff.Sample {
				if i == 3 {
					break
				}
				lines = append(lines, "      • `"+strings.ReplaceAll(escape(row.Describe(pp.Diff.Key)), "`", "'")+"`")
			}
			return strings.Join(lines, "\n")
		}
	}
	return strings.Join(lines, "\n")
}

func tierText(p *refill.Plan) string {
	t := escape(string(p.Tier))
	var rs []string
	for _, r := range p.Reasons {
		if refill.IsFailedProof(r) {
			// Shown first, in the risks section above.
			rs = append(rs, "the failed proof above")
			continue
		}
		rs = append(rs, escape(r))
	}
	if len(rs) > 0 {
		t += ": " + strings.Join(rs, "; ")
	}
	return t
}

// datasetsText lists the plan's datasets in run order, each with its
// partitions and the rows they hold now and are expected to hold after.
func datasetsText(p *refill.Plan) string {
	steps := slices.Clone(p.Steps)
	slices.SortStableFunc(steps, func(a, b refill.Step) int { return cmp.Compare(a.Order, b.Order) })
	var b strings.Builder
	b.WriteString("*Rows to rewrite, in run order*")
	for i, st := range steps {
		if i == maxSteps {
			fmt.Fprintf(&b, "\n… and %s more", plural(len(steps)-maxSteps, "dataset"))
			break
		}
		cur, exp, curUnknown, expUnknown := st.RowTotals()
		fmt.Fprintf(&b, "\n%d. *%s* (%s) · %s · %s → %s rows", i+1, escape(st.Dataset), escape(string(st.Kind)),
			plural(len(st.Partitions), "partition"), control.Total(cur, curUnknown), control.Total(exp, expUnknown))
		for j, pp := range st.Partitions {
			if j == maxParts {
				fmt.Fprintf(&b, "\n      • … and %d more", len(st.Partitions)-maxParts)
				break
			}
			fmt.Fprintf(&b, "\n      • `%s` %s → %s", escape(pp.Partition), rows(pp.CurrentRows), rows(pp.ExpectedRows))
			if m := pp.ExpectedMethod; m != "" && m != refill.ExpectedQuery && pp.ExpectedRows != nil {
				fmt.Fprintf(&b, " (%s)", escape(strings.ReplaceAll(string(m), "_", " ")))
			}
			switch d := pp.Diff; {
			case d.Changes():
				fmt.Fprintf(&b, " · %s", escape(d.Summary()))
			case d != nil && d.Skipped == "":
				b.WriteString(" · unchanged")
			}
		}
	}
	return b.String()
}

func rows(n *int64) string {
	if n == nil {
		return "?"
	}
	return control.Total(*n, 0)
}

// gateText is the source gate's verdict: passed, or its failed findings.
func gateText(g refill.GateVerdict) string {
	var warnings []refill.Finding
	var failed []refill.Finding
	for _, f := range g.Findings {
		switch {
		case f.Warning:
			warnings = append(warnings, f)
		case !f.Passed:
			failed = append(failed, f)
		}
	}
	var b strings.Builder
	if g.Passed && len(failed) == 0 {
		b.WriteString(":white_check_mark: *Source gate passed*")
		if len(g.Checked) > 0 {
			names := make([]string, len(g.Checked))
			for i, c := range g.Checked {
				names[i] = "`" + escape(c) + "`"
			}
			b.WriteString(" · checked " + strings.Join(names, ", "))
		}
	} else {
		fmt.Fprintf(&b, ":x: *Source gate failed: %s*", plural(len(failed), "finding"))
		if lines := findingLines(failed); lines != "" {
			b.WriteString("\n" + lines)
		}
	}
	if len(warnings) > 0 {
		fmt.Fprintf(&b, "\n:warning: %s (shown, not blocking):\n%s", plural(len(warnings), "warning"), findingLines(warnings))
	}
	return b.String()
}

func findingLines(fs []refill.Finding) string {
	var lines []string
	for i, f := range fs {
		if i == maxFinding {
			lines = append(lines, fmt.Sprintf("• … and %d more", len(fs)-maxFinding))
			break
		}
		check := escape(f.Check)
		if f.Column != "" {
			check += "(" + escape(f.Column) + ")"
		}
		msg := escape(f.Message)
		if msg == "" {
			msg = fmt.Sprintf("observed %g, limit %g", f.Observed, f.Limit)
		}
		where := "`" + escape(f.Dataset) + "`"
		if f.Partition != "" {
			where += " " + escape(f.Partition)
		}
		lines = append(lines, fmt.Sprintf("• %s · %s: %s", where, check, msg))
	}
	return strings.Join(lines, "\n")
}

func flaggedLine(r control.PartitionReport) string {
	after := "?"
	if r.After != nil {
		after = control.Total(r.After.Rows, 0)
	}
	dev := ""
	if r.Deviation != nil {
		dev = fmt.Sprintf(" (%+.1f%%)", 100**r.Deviation)
	}
	line := fmt.Sprintf("`%s` %s: expected %s, got %s%s", escape(r.Dataset), escape(r.Partition), rows(r.Expected), after, dev)
	if r.DryRun != "" {
		line += "; " + escape(r.DryRun)
	}
	return line
}

// stateLines say what has happened to the plan and what it still needs.
func stateLines(s *control.State) []string {
	p := s.Plan
	var lines []string
	for _, a := range s.Approvals {
		switch a.Decision {
		case refill.DecisionApprove:
			lines = append(lines, fmt.Sprintf(":white_check_mark: Approved by *%s*%s", escape(a.Actor), colon(a.Note)))
		case refill.DecisionReject:
			lines = append(lines, fmt.Sprintf(":no_entry_sign: Rejected by *%s*%s", escape(a.Actor), colon(a.Note)))
		}
	}
	if c := s.Cancel; c != nil {
		verb := "Cancel requested by"
		if p.Status == refill.StatusCancelled {
			verb = "Cancelled by"
		}
		lines = append(lines, fmt.Sprintf(":black_square_for_stop: %s *%s*%s", verb, escape(c.Actor), colon(c.Reason)))
	}
	if len(s.Stale) > 0 {
		lines = append(lines, ":warning: The config changed since this plan was sealed: it is stale and cannot be approved or applied; plan again.")
	}
	if s.Expired {
		lines = append(lines, ":hourglass: It waited past policy.plan_ttl and expired.")
	}
	if !s.FourEyes {
		lines = append(lines, ":warning: refill.yaml names no users:, so four-eyes is not enforced.")
	}
	for _, rv := range s.Reviews {
		lines = append(lines, fmt.Sprintf(":rotating_light: `%s %s` needs review: %s", escape(rv.Dataset), escape(rv.Partition), escape(rv.Why)))
	}
	switch p.Status {
	case refill.StatusPending, refill.StatusApproved, refill.StatusReady:
		if p.Tier == refill.TierManual {
			lines = append(lines, checklistLine(s))
		}
		if s.Freeze != nil && p.Tier == refill.TierAuto {
			lines = append(lines, fmt.Sprintf(":rotating_light: refill is frozen by *%s*%s", escape(s.Freeze.By), colon(s.Freeze.Reason)))
		}
		if len(s.Unmet) > 0 {
			need := make([]string, 0, len(s.Unmet))
			for i, u := range s.Unmet {
				if i == maxFinding {
					need = append(need, fmt.Sprintf("… and %d more", len(s.Unmet)-maxFinding))
					break
				}
				need = append(need, "• "+escape(strings.ReplaceAll(u, "\n", " ")))
			}
			lines = append(lines, "*Before it may run:*\n"+strings.Join(need, "\n"))
		}
	}
	if len(lines) > maxContext {
		lines = append(lines[:maxContext-1], fmt.Sprintf("… and %d more", len(lines)-maxContext+1))
	}
	return lines
}

// checklistLine is a manual plan's checklist as it stands: the steps done
// (by whom) and those still to do, in order. Until snapshot and scope are
// done the message offers no Approve; this line says why.
func checklistLine(s *control.State) string {
	var steps []string
	for _, item := range []refill.ChecklistItem{refill.ChecklistSnapshot, refill.ChecklistScope} {
		if st, ok := s.Done(item); ok {
			steps = append(steps, fmt.Sprintf(":ballot_box_with_check: %s by *%s*", item, escape(st.Actor)))
		} else {
			steps = append(steps, fmt.Sprintf(":white_large_square: %s", item))
		}
	}
	approved := false
	for _, a := range s.Approvals {
		approved = approved || a.Decision == refill.DecisionApprove
	}
	if approved {
		steps = append(steps, ":ballot_box_with_check: a lead's approval")
	} else {
		steps = append(steps, ":white_large_square: a lead's approval")
	}
	return "*Checklist:* " + strings.Join(steps, " · ") + " · then the run and its sign-off"
}

// links point at the plan's page and its lineage picture on it: the page
// route is the one a click from Slack (a cross-site navigation, without
// the session's SameSite cookie) opens after the page's bounce, where
// /api/v1 would want a bearer token and the picture's own route a session.
// With a bot token the picture itself follows in the thread.
func links(id, publicURL string) slack.Block {
	if publicURL == "" {
		return contextBlock(fmt.Sprintf("Links to the plan need `server.public_url` in refill.yaml. Meanwhile: `refill show %s`", escape(id)))
	}
	base := strings.TrimRight(publicURL, "/")
	return slack.NewSectionBlock(md(fmt.Sprintf("%s · %s",
		link(base+"/plans/"+id, "Open plan "+id),
		link(base+"/plans/"+id+"#lineage", "Lineage picture"))), nil, nil)
}

// buttons are the decisions the plan's status allows: Approve and Reject
// while it waits (Approve not while it is stale), Cancel while it runs.
// Whether the person pressing one may take it is control's decision, made
// when the press arrives.
func buttons(s *control.State) slack.Block {
	p := s.Plan
	var els []slack.BlockElement
	// What the channel may do is control's answer for some configured user
	// (State.Offers); Slack asks control again, as the one who clicks.
	if s.Offers[control.ActApprove] {
		els = append(els, slack.NewButtonBlockElement(ActionApprove, p.ID, plain("Approve")).WithStyle(slack.StylePrimary))
	}
	if s.Offers[control.ActReject] {
		els = append(els, slack.NewButtonBlockElement(ActionReject, p.ID, plain("Reject")).WithStyle(slack.StyleDanger).
			WithConfirm(slack.NewConfirmationBlockObject(plain("Reject plan "+p.ID+"?"),
				plain("A rejected plan can never run; plan again if it should."), plain("Reject"), plain("Keep it"))))
	}
	// Cancel is offered on a run (a requester withdraws a plan that has
	// not started at the CLI or on the page).
	if p.Status == refill.StatusRunning && s.Offers[control.ActCancel] {
		els = append(els, slack.NewButtonBlockElement(ActionCancel, p.ID, plain("Cancel run")).WithStyle(slack.StyleDanger).
			WithConfirm(slack.NewConfirmationBlockObject(plain("Cancel plan "+p.ID+"?"),
				plain("No new partition starts; partitions in flight finish and are kept (refill rollback undoes them)."), plain("Cancel run"), plain("Let it run"))))
	}
	if len(els) == 0 {
		return nil
	}
	return slack.NewActionBlock(actionsBlockID, els...)
}

func contextBlock(lines ...string) slack.Block {
	els := make([]slack.MixedElement, len(lines))
	for i, l := range lines {
		els[i] = slack.NewTextBlockObject(slack.MarkdownType, clip(l, maxField), false, false)
	}
	return slack.NewContextBlock("", els...)
}

func plain(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.PlainTextType, clip(s, maxHeader), true, false)
}

func md(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, clip(s, maxText), false, false)
}

func field(name, value string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, clip("*"+name+"*\n"+value, maxField), false, false)
}

// escape makes a text safe in Slack's mrkdwn, on one line: a reason, a
// note or a name — whoever stored it — can then never mention @channel,
// forge a link, reorder the message or draw a line of its own under
// refill's ("Approved by carol").
func escape(s string) string { return mrkdwn(refill.OneLine(s)) }

// mrkdwn escapes the three characters Slack's mrkdwn gives a meaning to
// (&, < and >), and nothing else: for refill's own text of several lines.
func mrkdwn(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func link(url, text string) string {
	return "<" + escape(url) + "|" + strings.ReplaceAll(escape(text), "|", "¦") + ">"
}

// clip cuts s to at most n characters, ending it with an ellipsis.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// colon appends a note or reason after a colon, or nothing.
func colon(note string) string {
	if strings.TrimSpace(note) == "" {
		return ""
	}
	return ": " + escape(note)
}

// detail reads one string of an audit entry's detail.
func detail(e *refill.Event, key string) string {
	var d map[string]any
	if json.Unmarshal(e.Detail, &d) != nil {
		return ""
	}
	s, _ := d[key].(string)
	return s
}
