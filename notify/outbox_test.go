package notify_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/refill-dev/refill/lineage"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivertype"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/notify"
	"github.com/refill-dev/refill/queue"
	"github.com/refill-dev/refill/store"
)

func eachStore(t *testing.T, fn func(t *testing.T, pg bool)) {
	for _, pg := range []bool{false, true} {
		t.Run(map[bool]string{false: "sqlite", true: "postgres"}[pg], func(t *testing.T) {
			t.Parallel()
			fn(t, pg)
		})
	}
}

// TestOutboxQueuesInTheTransaction checks that a plan queues exactly one
// notice job, that the job commits and rolls back with its audit entry,
// and which entries are worth a notice.
func TestOutboxQueuesInTheTransaction(t *testing.T) {
	eachStore(t, func(t *testing.T, pg bool) {
		e := setup(t, options{postgres: pg})
		ctx := context.Background()
		st := e.p.Store
		if n := jobs(t, st); n != 0 {
			t.Fatalf("%d jobs before anything happened", n)
		}
		plan := e.plan(t)
		if n := jobs(t, st); n != 1 {
			t.Fatalf("a new plan queued %d notice jobs, want 1 (its plan_created entry)", n)
		}
		// A change that rolls back takes its job with it.
		err := st.Update(ctx, func(tx *store.Tx) error {
			if err := tx.Append(ctx, &refill.Event{Kind: refill.EventFreeze, Actor: "carol"}); err != nil {
				return err
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatal(err)
		}
		if n := jobs(t, st); n != 1 {
			t.Errorf("a rolled-back change left %d jobs, want the 1 from before", n)
		}
		for _, c := range []struct {
			name string
			e    refill.Event
			want bool
		}{
			{"gate passed at planning", refill.Event{Kind: refill.EventGateResult, Detail: refill.Detail(map[string]any{"passed": true})}, false},
			{"gate failed at planning", refill.Event{Kind: refill.EventGateResult, Detail: refill.Detail(map[string]any{"passed": false})}, false},
			{"gate blocked at apply", refill.Event{Kind: refill.EventGateResult, Detail: refill.Detail(map[string]any{"passed": false, "at": "apply"})}, true},
			{"a partition flagged at apply", refill.Event{Kind: refill.EventGateResult, Dataset: "orders", Partition: "2026-11-01", Detail: refill.Detail(map[string]any{"passed": false, "at": "apply"})}, false},
			{"a partition failed", refill.Event{Kind: refill.EventRunFailed, Dataset: "orders_daily", Partition: "2026-11-01"}, false},
			{"the run failed", refill.Event{Kind: refill.EventRunFailed, Detail: refill.Detail(map[string]any{"error": "boom"})}, true},
			{"a partition published", refill.Event{Kind: refill.EventPartitionPublished, Dataset: "orders_daily", Partition: "2026-11-01"}, false},
			{"run finished", refill.Event{Kind: refill.EventRunFinished}, true},
			{"approval", refill.Event{Kind: refill.EventApproval}, true},
			{"scope", refill.Event{Kind: refill.EventScope}, false},
			{"token created", refill.Event{Kind: refill.EventTokenCreated}, false},
		} {
			before := jobs(t, st)
			ev := c.e
			ev.Actor, ev.PlanID = "refill", plan.ID
			if err := st.Update(ctx, func(tx *store.Tx) error { return tx.Append(ctx, &ev) }); err != nil {
				t.Fatal(err)
			}
			if got := jobs(t, st) - before; got != map[bool]int{false: 0, true: 1}[c.want] {
				t.Errorf("%s: queued %d jobs, want notice=%v", c.name, got, c.want)
			}
		}
	})
}

// TestNothingWithoutNotify: a project without notify: installs no outbox,
// creates no River tables and queues nothing; Run returns at once.
func TestNothingWithoutNotify(t *testing.T) {
	e := setup(t, options{noNotify: true})
	if e.n.Enabled() {
		t.Fatal("Enabled without notify:")
	}
	e.plan(t)
	var n int
	if err := e.p.Store.DB().QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'river_job'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("river_job tables: %d (%v), want none", n, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.n.Run(ctx, e.p.Control, nil); err != nil || ctx.Err() != nil {
		t.Errorf("Run without notify: %v (context %v), want nil at once", err, ctx.Err())
	}
}

// riverClient is a River client of the test's own on the state store,
// to look at and re-run notice jobs.
func riverClient(t *testing.T, st *store.Store) *river.Client[*sql.Tx] {
	t.Helper()
	var c *river.Client[*sql.Tx]
	var err error
	if st.SQLitePath() != "" {
		c, err = river.NewClient(riversqlite.New(st.DB()), &river.Config{})
	} else {
		c, err = river.NewClient(riverdatabasesql.New(st.DB()), &river.Config{})
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitJob waits for a job to be completed with at least attempts attempts.
func waitJob(t *testing.T, c *river.Client[*sql.Tx], id int64, attempts int) *rivertype.JobRow {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		j, err := c.JobGet(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if j.State == rivertype.JobStateCompleted && j.Attempt >= attempts {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d is %s after %d attempts (errors %v); waited for completion after %d", id, j.State, j.Attempt, j.Errors, attempts)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRunDeliversOnce runs the notice queue: a new plan reaches Slack
// (bot mode: chat.postMessage, its ts remembered) and the webhook, signed;
// the same job run again sends nothing twice; an approval through the
// command line's door updates the message in place; a freeze is an alert.
func TestRunDeliversOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, pg bool) {
		e := setup(t, options{postgres: pg, bot: true})
		ctx := context.Background()
		e.run(t, e.p, e.n)
		plan := e.plan(t)

		post := e.slack.wait(t, "/api/chat.postMessage", 1)[0]
		if post.Form.Get("channel") != channel || post.Form.Get("token") != "xoxb-test" {
			t.Errorf("posted to %q with token %q", post.Form.Get("channel"), post.Form.Get("token"))
		}
		if b := post.Form.Get("blocks"); !strings.Contains(b, plan.ID) || !strings.Contains(b, notify.ActionApprove) {
			t.Errorf("the message should name the plan and offer Approve: %s", b)
		}
		// The reason came from a person: it may not ping the channel.
		var blocks any
		if err := json.Unmarshal([]byte(post.Form.Get("blocks")), &blocks); err != nil {
			t.Fatal(err)
		}
		for _, part := range []string{post.Form.Get("text"), fmt.Sprint(blocks)} {
			if strings.Contains(part, "<!here>") || !strings.Contains(part, "&lt;!here&gt;") {
				t.Errorf("the reason is not escaped: %s", part)
			}
		}
		// The lineage picture, a PNG, lands in the message's thread.
		up := e.slack.wait(t, "/upload/F1", 1)[0]
		if !bytes.Contains(up.Body, []byte("\x89PNG\r\n\x1a\n")) || !bytes.Contains(up.Body, []byte("lineage-"+plan.ID+".png")) {
			t.Errorf("the upload is not the plan's PNG: %.200q", up.Body)
		}
		done := e.slack.wait(t, "/api/files.completeUploadExternal", 1)[0]
		if done.Form.Get("channel_id") != channel || done.Form.Get("thread_ts") != "1700000000.000001" {
			t.Errorf("the picture was shared to %q thread %q, want the plan's message in %s", done.Form.Get("channel_id"), done.Form.Get("thread_ts"), channel)
		}
		hook := e.slack.wait(t, "/hook", 1)[0]
		ts, sig := hook.Header.Get(notify.HeaderTimestamp), hook.Header.Get(notify.HeaderSignature)
		if err := notify.VerifyWebhook(hookSecret, ts, sig, hook.Body, time.Now()); err != nil {
			t.Errorf("webhook signature: %v", err)
		}
		tampered := []byte(strings.Replace(string(hook.Body), plan.ID, "deadbeef", 1))
		if err := notify.VerifyWebhook(hookSecret, ts, sig, tampered, time.Now()); !errors.Is(err, notify.ErrWebhookSignature) {
			t.Errorf("tampered webhook body: %v, want ErrWebhookSignature", err)
		}
		if err := notify.VerifyWebhook(hookSecret, ts, sig, hook.Body, time.Now().Add(6*time.Minute)); !errors.Is(err, notify.ErrWebhookExpired) {
			t.Errorf("webhook checked six minutes later: %v, want ErrWebhookExpired", err)
		}
		var payload notify.WebhookPayload
		if err := json.Unmarshal(hook.Body, &payload); err != nil {
			t.Fatal(err)
		}
		if payload.Event != refill.EventPlanCreated || payload.Plan == nil || payload.Plan.ID != plan.ID || payload.Seq == 0 {
			t.Errorf("webhook payload: event %s, seq %d, plan %+v", payload.Event, payload.Seq, payload.Plan)
		}
		if hook.Header.Get(notify.HeaderDelivery) == "" || hook.Header.Get(notify.HeaderEvent) != "plan_created" {
			t.Errorf("webhook headers: %v", hook.Header)
		}
		note, ok, err := e.p.Store.Notice(ctx, plan.ID, "slack")
		if err != nil || !ok || note.Channel != channel || note.TS != "1700000000.000001" {
			t.Errorf("notice = %+v, %v, %v; want the posted message's channel and ts", note, ok, err)
		}

		// Run the same job again: everything was sent already.
		rc := riverClient(t, e.p.Store)
		res, err := rc.JobList(ctx, river.NewJobListParams().Kinds(queue.NotifyArgs{}.Kind()))
		if err != nil || len(res.Jobs) != 1 {
			t.Fatalf("notice jobs: %d, %v", len(res.Jobs), err)
		}
		id := res.Jobs[0].ID
		waitJob(t, rc, id, 1)
		if _, err := rc.JobRetry(ctx, id); err != nil {
			t.Fatal(err)
		}
		waitJob(t, rc, id, 2)
		if n, m := len(e.slack.requests("/api/chat.postMessage")), len(e.slack.requests("/hook")); n != 1 || m != 1 {
			t.Errorf("after the job ran twice: %d Slack posts and %d webhook deliveries, want 1 each", n, m)
		}

		// An approval through another door updates the message in place.
		if _, err := e.p.Control.Approve(ctx, plan.ID, "bob", "looks right"); err != nil {
			t.Fatal(err)
		}
		upd := e.slack.wait(t, "/api/chat.update", 1)[0]
		if upd.Form.Get("ts") != note.TS || !strings.Contains(upd.Form.Get("blocks"), "Approved by *bob*: looks right") ||
			strings.Contains(upd.Form.Get("blocks"), notify.ActionApprove) {
			t.Errorf("chat.update ts %s: %s", upd.Form.Get("ts"), upd.Form.Get("blocks"))
		}

		// A freeze is an alert of its own.
		if _, err := e.p.Control.Freeze(ctx, "carol", "warehouse migration"); err != nil {
			t.Fatal(err)
		}
		alert := e.slack.wait(t, "/api/chat.postMessage", 2)[1]
		if b := alert.Form.Get("blocks"); !strings.Contains(b, ":rotating_light: refill is frozen") || !strings.Contains(b, "warehouse migration") {
			t.Errorf("freeze alert: %s", b)
		}
		// The approval's and the freeze's deliveries are separate jobs:
		// either may land first.
		hooks := e.slack.wait(t, "/hook", 3)
		var events []refill.EventKind
		for _, h := range hooks[1:] {
			var p notify.WebhookPayload
			if err := json.Unmarshal(h.Body, &p); err != nil {
				t.Fatal(err)
			}
			events = append(events, p.Event)
			if p.Event == refill.EventFreeze && p.Plan != nil {
				t.Errorf("freeze webhook names a plan: %+v", p)
			}
		}
		if !slices.Contains(events, refill.EventFreeze) || !slices.Contains(events, refill.EventApproval) {
			t.Errorf("webhooks after the first: %v, want an approval and a freeze", events)
		}
	})
}

// TestFailedTargetIsRetriedAlone makes Slack fail once: River retries the
// job with backoff, Slack gets the message on the second attempt, and the
// webhook, which had it the first time, is not sent it again.
func TestFailedTargetIsRetriedAlone(t *testing.T) {
	e := setup(t, options{})
	e.slack.failNext.Store(1) // the first request is the Slack webhook's
	e.run(t, e.p, e.n)
	plan := e.plan(t)
	got := e.slack.wait(t, "/webhook", 1)
	if failed := e.slack.requests("/webhook (failed)"); len(failed) != 1 {
		t.Fatalf("Slack failed %d times, want once", len(failed))
	}
	if m := got[0].JSON(t); !strings.Contains(mustJSON(t, m["blocks"]), plan.ID) {
		t.Errorf("the retried message: %v", m)
	}
	// A webhook cannot upload: the lineage picture is an image block whose
	// link is signed for this plan, and answers without a session.
	var msg struct {
		Blocks []struct {
			Type     string `json:"type"`
			ImageURL string `json:"image_url"`
		} `json:"blocks"`
	}
	if err := json.Unmarshal(got[0].Body, &msg); err != nil {
		t.Fatal(err)
	}
	var link string
	for _, b := range msg.Blocks {
		if b.Type == "image" {
			link = b.ImageURL
		}
	}
	u, err := url.Parse(link)
	if err != nil || !strings.HasSuffix(u.Path, "/pictures/plans/"+plan.ID+"/lineage.png") {
		t.Fatalf("no image block with the plan's picture link: %q (%v)", link, err)
	}
	seal, err := e.p.Store.SealKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := lineage.CheckPictureLink(lineage.PictureLinkKey(seal), plan.ID, u.Query().Get("expires"), u.Query().Get("sig"), time.Now()); err != nil {
		t.Errorf("the picture link does not check: %v", err)
	}
	rc := riverClient(t, e.p.Store)
	res, err := rc.JobList(context.Background(), river.NewJobListParams().Kinds(queue.NotifyArgs{}.Kind()))
	if err != nil || len(res.Jobs) != 1 {
		t.Fatalf("jobs: %v %v", res, err)
	}
	j := waitJob(t, rc, res.Jobs[0].ID, 2)
	if len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Error, "slack") {
		t.Errorf("job errors: %+v, want Slack's one failure", j.Errors)
	}
	if n := len(e.slack.requests("/hook")); n != 1 {
		t.Errorf("the webhook got %d deliveries, want 1", n)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
