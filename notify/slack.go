package notify

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/control"
	"github.com/refill-dev/refill/lineage"
)

// slackTargetName is how store.MarkSent records Slack.
const slackTargetName = "slack"

// slackTarget is where Slack messages go. With a bot token, messages are
// posted to channel through chat.postMessage and each plan's message is
// updated in place as it moves (the notices table keeps its channel and
// ts); with only an incoming webhook, every piece of news is a new message,
// since a webhook cannot edit what it posted.
type slackTarget struct {
	token, channel string
	webhookURL     string
	apiURL         string
}

func (t *slackTarget) bot() bool { return t.token != "" }

func (n *Notifier) slackAPI() *slack.Client {
	opts := []slack.Option{slack.OptionHTTPClient(n.HTTPClient)}
	if api := n.slack.apiURL; api != "" {
		// slack-go joins method names onto the base: it must end in /.
		if !strings.HasSuffix(api, "/") {
			api += "/"
		}
		opts = append(opts, slack.OptionAPIURL(api))
	}
	return slack.New(n.slack.token, opts...)
}

// post sends a new message.
func (n *Notifier) post(ctx context.Context, text string, blocks []slack.Block) (channel, ts string, err error) {
	t := n.slack
	if t.bot() {
		channel, ts, err = n.slackAPI().PostMessageContext(ctx, t.channel, slack.MsgOptionText(text, false), slack.MsgOptionBlocks(blocks...))
		if err != nil {
			return "", "", fmt.Errorf("chat.postMessage to %s: %w", t.channel, err)
		}
		return channel, ts, nil
	}
	err = slack.PostWebhookCustomHTTPContext(ctx, t.webhookURL, n.HTTPClient, &slack.WebhookMessage{Text: text, Blocks: &slack.Blocks{BlockSet: blocks}})
	if err != nil {
		// The URL is a secret: say where it is kept, not what it is.
		return "", "", fmt.Errorf("the Slack incoming webhook (%s): %w", n.cfg.Notify.Slack.WebhookURL(), err)
	}
	return "", "", nil
}

// uploadLineage puts the plan's lineage picture (lineage.PNG of
// lineage.PlanDOT) in the thread of its message, through Slack's external
// upload flow (files.getUploadURLExternal, the upload, then
// files.completeUploadExternal): the approver sees the picture without
// leaving Slack.
func (n *Notifier) uploadLineage(ctx context.Context, s *control.State, channel, ts string) error {
	dot, err := lineage.PlanDOT(s.Plan, n.cfg)
	if err != nil {
		return err
	}
	pic, err := lineage.PNG(ctx, dot)
	if err != nil {
		return err
	}
	_, err = n.slackAPI().UploadFileContext(ctx, slack.UploadFileParameters{
		Reader: bytes.NewReader(pic), FileSize: len(pic), Filename: "lineage-" + s.Plan.ID + ".png",
		Title:   "Lineage of plan " + s.Plan.ID,
		AltTxt:  "The datasets plan " + s.Plan.ID + " rebuilds, in run order, with the sources its gate checked",
		Channel: channel, ThreadTimestamp: ts,
	})
	return err
}

// postPlan posts a plan's first message and, with a bot token, keeps its
// place (to update it as the plan moves) and puts the lineage picture in
// its thread.
func (n *Notifier) postPlan(ctx context.Context, e *refill.Event, s *control.State, blocks []slack.Block) error {
	channel, ts, err := n.post(ctx, fallback(e, s), blocks)
	if err != nil {
		return err
	}
	if ts != "" {
		if err := n.st.SaveNotice(ctx, refill.Notice{PlanID: s.Plan.ID, Target: slackTargetName, Channel: channel, TS: ts}); err != nil {
			return err
		}
		// The message is out: a picture that cannot be uploaded is
		// said in the log, and the notice is not sent again for it.
		if err := n.uploadLineage(ctx, s, channel, ts); err != nil {
			slog.Warn("the plan's lineage picture was not uploaded to Slack; its message links to the page", "plan", s.Plan.ID, "error", err)
		}
	}
	return nil
}

// withPicture puts the plan's lineage picture in its message as an image
// block, by a signed link (lineage.PictureLink), before its buttons.
func (n *Notifier) withPicture(ctx context.Context, blocks []slack.Block, id, publicURL string) ([]slack.Block, error) {
	seal, err := n.st.SealKey(ctx)
	if err != nil {
		return nil, err
	}
	link := lineage.PictureLink(lineage.PictureLinkKey(seal), publicURL, id, time.Now().Add(lineage.PictureLinkFor))
	img := slack.NewImageBlock(link, "The datasets plan "+id+" rebuilds, in run order, with the sources its gate checked", "", plain("Lineage of plan "+id))
	at := len(blocks)
	if at > 0 && blocks[at-1].BlockType() == slack.MBTAction {
		at--
	}
	return slices.Insert(slices.Clone(blocks), at, slack.Block(img)), nil
}

// update replaces a message the bot posted.
func (n *Notifier) update(ctx context.Context, channel, ts, text string, blocks []slack.Block) error {
	if _, _, _, err := n.slackAPI().UpdateMessageContext(ctx, channel, ts, slack.MsgOptionText(text, false), slack.MsgOptionBlocks(blocks...)); err != nil {
		return fmt.Errorf("chat.update of %s in %s: %w", ts, channel, err)
	}
	return nil
}

// refresh updates the plan's message in place to show it as it is now,
// and reports whether there was a message to update (bot mode only).
func (n *Notifier) refresh(ctx context.Context, e *refill.Event, s *control.State) (bool, error) {
	if !n.slack.bot() || s == nil {
		return false, nil
	}
	note, ok, err := n.st.Notice(ctx, s.Plan.ID, slackTargetName)
	if err != nil || !ok {
		return false, err
	}
	return true, n.update(ctx, note.Channel, note.TS, fallback(e, s), Message(s, n.cfg.Server.PublicURL))
}

// sendSlack tells Slack about one audit entry.
func (n *Notifier) sendSlack(ctx context.Context, nt *notice) error {
	e, s, pub := nt.event, nt.state, n.cfg.Server.PublicURL
	switch e.Kind {
	case refill.EventPlanCreated:
		blocks := Message(s, pub)
		if !n.slack.bot() && pub != "" {
			// A webhook cannot upload: the picture comes by a signed,
			// expiring link that refill serve answers without a session.
			with, err := n.withPicture(ctx, blocks, s.Plan.ID, pub)
			if err != nil {
				slog.Warn("the plan's message goes without its lineage picture", "plan", s.Plan.ID, "error", err)
			} else {
				blocks = with
			}
		}
		return n.postPlan(ctx, e, s, blocks)
	case refill.EventApproval, refill.EventRejection, refill.EventRunStarted, refill.EventCancelRequested, refill.EventRunCancelled, refill.EventResolved, refill.EventRunPaused:
		updated, err := n.refresh(ctx, e, s)
		if err != nil || updated {
			return err
		}
		_, _, err = n.post(ctx, fallback(e, s), Outcome(e, s, pub))
		return err
	case refill.EventRunFinished:
		if _, err := n.refresh(ctx, e, s); err != nil {
			return err
		}
		if !nt.offTolerance {
			return nil
		}
	case refill.EventRunFailed, refill.EventGateResult, refill.EventNeedsReview:
		if _, err := n.refresh(ctx, e, s); err != nil {
			return err
		}
	}
	_, _, err := n.post(ctx, fallback(e, s), Alert(e, s, nt.report, pub))
	return err
}
