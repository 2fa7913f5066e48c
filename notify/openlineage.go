package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/openlineage"
	"github.com/refill-dev/refill/store"
)

// OpenLineage out.
//
// With openlineage: in refill.yaml, every run of a plan is told to a
// lineage tool (Marquez and the like) as OpenLineage RunEvents
// (package openlineage: Events), POSTed one at a time to url + endpoint,
// as the OpenLineage HTTP transport does, with the API key as a bearer
// token: START when the run begins; COMPLETE, FAIL or ABORT when it
// ends. They leave through the same outbox as every notice, so they are
// sent when the change commits, retried with backoff until the receiver
// answers 2xx, and each is sent once: each event is recorded sent by its
// run and type (store.MarkSent), so a retry after some of a moment's
// events went out sends only the rest.

// openLineageTargetName is the target name of the OpenLineage receiver.
const openLineageTargetName = "openlineage"

// Version is refill's version, for the producer URI of OpenLineage
// events; the command line sets it.
var Version = "dev"

type openLineageTarget struct {
	url string // url + endpoint
	key string
	// mu makes this process send one moment at a time, so that a run's
	// end, whose notice may be worked before its start's, sends the start
	// first and the start is not sent twice by two workers.
	mu sync.Mutex
}

func newOpenLineageTarget(cfg *refill.OpenLineageConfig, key string) *openLineageTarget {
	return &openLineageTarget{url: strings.TrimSuffix(cfg.URL, "/") + "/" + strings.TrimPrefix(cfg.Endpoint, "/"), key: key}
}

// outcomeOf is the OpenLineage moment an audit entry is, if any.
func outcomeOf(e *refill.Event) (openlineage.Outcome, bool) {
	switch e.Kind {
	case refill.EventRunStarted:
		return openlineage.Start, true
	case refill.EventRunFinished:
		return openlineage.Complete, true
	case refill.EventRunFailed:
		return openlineage.Fail, e.Partition == ""
	case refill.EventRunCancelled:
		return openlineage.Abort, e.Partition == ""
	}
	return "", false
}

// sendOpenLineage tells the receiver of one moment of a run; other
// notices are nothing to it. A run's end sends its start first, if that
// has not gone yet: the two are separate notices, and either may be
// worked first.
func (n *Notifier) sendOpenLineage(ctx context.Context, nt *notice) error {
	outcome, ok := outcomeOf(nt.event)
	if !ok || nt.state == nil {
		return nil
	}
	n.ol.mu.Lock()
	defer n.ol.mu.Unlock()
	p := nt.state.Plan
	evs, err := n.st.Audit(ctx, store.AuditFilter{PlanID: p.ID})
	if err != nil {
		return err
	}
	var approvers []string
	for _, a := range nt.state.Approvals {
		if a.Decision == refill.DecisionApprove {
			approvers = append(approvers, a.Actor)
		}
	}
	moment := func(seq int64, outcome openlineage.Outcome, at time.Time, detail json.RawMessage) error {
		r := openlineage.RunReport{Config: n.cfg, Plan: p, Outcome: outcome, At: at, Published: map[string]int{}, Version: Version, Approvers: approvers}
		for _, e := range evs {
			switch {
			case e.Kind == refill.EventRunStarted && e.Seq <= seq:
				r.Started = e.Seq
			case e.Kind == refill.EventPartitionPublished && e.Seq <= seq:
				r.Published[e.Dataset]++
			}
		}
		if r.Started == 0 {
			return errNoRun // a plan cancelled before it ever ran: no run to tell
		}
		if outcome == openlineage.Fail {
			var d struct {
				Error string `json:"error"`
			}
			_ = json.Unmarshal(detail, &d)
			r.Error = d.Error
			if r.Error == "" {
				r.Error = "the run failed"
			}
		}
		bodies, err := openlineage.Events(r)
		if err != nil {
			return err
		}
		for _, body := range bodies {
			if err := n.sendOpenLineageOnce(ctx, seq, body); err != nil {
				return err
			}
		}
		return nil
	}
	if outcome != openlineage.Start {
		// The run this entry ends: the last started before it. A run has
		// one end: a plan cancelled after its run failed or finished
		// tells nothing more.
		var started *refill.Event
		for i := range slices.Backward(evs) {
			if e := &evs[i]; e.Kind == refill.EventRunStarted && e.Seq < nt.event.Seq {
				started = e
				break
			}
		}
		if started == nil {
			return nil
		}
		for _, e := range evs {
			if e.Seq > started.Seq && e.Seq < nt.event.Seq {
				if o, ok := outcomeOf(&e); ok && o != openlineage.Start {
					return nil
				}
			}
		}
		if err := moment(started.Seq, openlineage.Start, started.At, started.Detail); err != nil {
			return err
		}
	}
	err = moment(nt.event.Seq, outcome, nt.event.At, nt.event.Detail)
	if errors.Is(err, errNoRun) {
		return nil
	}
	return err
}

// errNoRun is a moment of a run that never started.
var errNoRun = errors.New("no run started before this entry")

// sendOpenLineageOnce posts one event of audit entry seq unless it was
// sent already, and records it sent.
func (n *Notifier) sendOpenLineageOnce(ctx context.Context, seq int64, body []byte) error {
	var id struct {
		Run struct {
			RunID string `json:"runId"`
		} `json:"run"`
		EventType string `json:"eventType"`
	}
	if err := json.Unmarshal(body, &id); err != nil {
		return err
	}
	sub := openLineageTargetName + "/" + id.Run.RunID + "/" + id.EventType
	if sent, err := n.st.Sent(ctx, seq, sub); err != nil {
		return err
	} else if sent {
		return nil
	}
	if err := n.postOpenLineage(ctx, body); err != nil {
		return err
	}
	if _, err := n.st.MarkSent(ctx, seq, sub); err != nil {
		return fmt.Errorf("sent, but not recorded (it may be sent again): %w", err)
	}
	return nil
}

func (n *Notifier) postOpenLineage(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.ol.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if n.ol.key != "" {
		req.Header.Set("Authorization", "Bearer "+n.ol.key)
	}
	resp, err := n.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s answered %s: %s", n.ol.url, resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}
