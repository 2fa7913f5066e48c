package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/queue"
	"github.com/refill-dev/refill/store"
)

// Run works the notice queue until ctx ends, then stops River gracefully:
// notices being sent are finished, and anything left waits in the queue for
// the next process that runs notices. It returns at once, with nil, when
// notify: configures nothing. A process that works other kinds too adds
// Notices to its one client instead; c reads the plans the notices are
// about.
func (n *Notifier) Run(ctx context.Context, c *control.Control, log *slog.Logger) error {
	var o queue.Options
	if !n.Notices(&o, c, log) {
		return nil
	}
	// Notices in flight finish (or, past the deadline, are cancelled and
	// retried by the next process).
	if err := queue.Serve(ctx, n.st, o, stopDeadline, nil); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}

// Notices adds the notice worker to o and reports whether it did: not
// when notify: configures nothing.
//
// Each notice goes to every target that has not had it yet, and is
// recorded sent per target (store.MarkSent), so a job that River runs twice
// sends nothing twice, and a job that failed for one target retries that
// target alone, with backoff.
func (n *Notifier) Notices(o *queue.Options, c *control.Control, log *slog.Logger) bool {
	if !n.Enabled() {
		return false
	}
	if log == nil {
		log = quiet
	}
	if n.cfg.Notify.Slack != nil && n.slack == nil {
		s := n.cfg.Notify.Slack
		log.Warn("notify: Slack is configured but gets nothing: set the bot token (" + orNone(s.BotToken()) +
			", with notify.slack.channel) or the incoming webhook URL (" + orNone(s.WebhookURL()) + ")")
	}
	rescueAfter := time.Duration(n.cfg.Run.RescueAfter)
	if rescueAfter <= 0 {
		rescueAfter = time.Duration(refill.DefaultRunConfig().RescueAfter)
	}
	deliver := func(ctx context.Context, a queue.NotifyArgs) error { return n.deliver(ctx, c, a, log) }
	o.Notify = &worker{deliver: deliver, timeout: min(queue.NotifyTimeout, queue.PartitionTimeout(rescueAfter))}
	o.NotifyWorkers = 2
	if o.RescueAfter <= 0 {
		o.RescueAfter = rescueAfter
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.Periodic == nil {
		o.Periodic = queue.WatchPeriodic(n.cfg)
	}
	if o.Logger == nil {
		// River speaks at info level about its own housekeeping; only
		// its warnings and errors are refill's business.
		o.Logger = slog.New(atLeast{Handler: log.Handler(), min: slog.LevelWarn})
	}
	log.Info("notify: delivering notices", slog.Any("targets", n.Targets()))
	return true
}

// notice is what a job tells: the audit entry, the plan it is about as it
// is now (nil for a freeze), and for a finished run its report.
type notice struct {
	event        *refill.Event
	state        *control.State
	report       *control.Report
	offTolerance bool
}

// deliver sends the notice of one audit entry to every target that has not
// had it.
func (n *Notifier) deliver(ctx context.Context, c *control.Control, a queue.NotifyArgs, log *slog.Logger) error {
	var pending []string
	for _, t := range n.Targets() {
		sent, err := n.st.Sent(ctx, a.Seq, t)
		if err != nil {
			return fmt.Errorf("notice of audit entry %d: %w", a.Seq, err)
		}
		if !sent {
			pending = append(pending, t)
		}
	}
	if len(pending) == 0 {
		return nil
	}
	nt, err := n.notice(ctx, c, a)
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range pending {
		if err := n.send(ctx, t, nt); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", t, err))
			continue
		}
		if _, err := n.st.MarkSent(ctx, a.Seq, t); err != nil {
			errs = append(errs, fmt.Errorf("%s: sent, but not recorded (it may be sent again): %w", t, err))
		}
	}
	if len(errs) > 0 {
		err := fmt.Errorf("notice of audit entry %d (%s, plan %q): %w", a.Seq, a.Event, a.PlanID, errors.Join(errs...))
		log.Warn("notify: "+err.Error()+"; River retries it with backoff", slog.Int64("seq", a.Seq))
		return err
	}
	return nil
}

// notice reads what a job tells. An entry or plan that is not in the store
// is not worth retrying: the job is cancelled.
func (n *Notifier) notice(ctx context.Context, c *control.Control, a queue.NotifyArgs) (*notice, error) {
	evs, err := n.st.Audit(ctx, store.AuditFilter{PlanID: a.PlanID, Kind: a.Event})
	if err != nil {
		return nil, fmt.Errorf("notice of audit entry %d: %w", a.Seq, err)
	}
	nt := &notice{}
	for i := range evs {
		if evs[i].Seq == a.Seq {
			nt.event = &evs[i]
			break
		}
	}
	if nt.event == nil {
		return nil, river.JobCancel(fmt.Errorf("notice of audit entry %d (%s): no such entry in the audit log", a.Seq, a.Event))
	}
	if a.PlanID == "" {
		return nt, nil
	}
	if nt.state, err = c.Load(ctx, a.PlanID); err != nil {
		if errors.Is(err, refill.ErrNotFound) || errors.Is(err, refill.ErrVerification) {
			return nil, river.JobCancel(fmt.Errorf("notice of audit entry %d: %w", a.Seq, err))
		}
		return nil, fmt.Errorf("notice of audit entry %d: %w", a.Seq, err)
	}
	if a.Event == refill.EventRunFinished {
		rep, err := c.Report(ctx, a.PlanID)
		switch {
		case errors.Is(err, refill.ErrVerification):
			nt.offTolerance = true
		case err != nil:
			return nil, fmt.Errorf("notice of audit entry %d: report of plan %s: %w", a.Seq, a.PlanID, err)
		}
		nt.report = &rep
	}
	return nt, nil
}

// send tells one target.
func (n *Notifier) send(ctx context.Context, target string, nt *notice) error {
	if target == openLineageTargetName {
		return n.sendOpenLineage(ctx, nt)
	}
	if target == slackTargetName {
		if n.slack == nil {
			return fmt.Errorf("slack is not configured in this process")
		}
		return n.sendSlack(ctx, nt)
	}
	i, err := strconv.Atoi(strings.TrimPrefix(target, webhookPrefix))
	if err != nil || !strings.HasPrefix(target, webhookPrefix) || i < 0 || i >= len(n.webhooks) {
		return fmt.Errorf("unknown target %q", target)
	}
	return n.sendWebhook(ctx, n.webhooks[i], nt)
}

func orNone(s refill.Secret) string {
	if !s.IsSet() {
		return "not configured"
	}
	return s.String()
}

// atLeast drops records below a level.
type atLeast struct {
	slog.Handler
	min slog.Level
}

func (h atLeast) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h atLeast) WithAttrs(as []slog.Attr) slog.Handler {
	return atLeast{Handler: h.Handler.WithAttrs(as), min: h.min}
}

func (h atLeast) WithGroup(name string) slog.Handler {
	return atLeast{Handler: h.Handler.WithGroup(name), min: h.min}
}
