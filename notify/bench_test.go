package notify_test

import (
	"strings"
	"testing"
	"time"
)

// BenchmarkPlanToSlack measures how long a new plan takes to reach Slack:
// from Control.Plan's commit (the notice job is queued in that
// transaction) to the test's Slack receiving chat.postMessage, with Run
// working the queue. Planning itself is not timed. River polls SQLite
// every 50ms; on PostgreSQL it also listens for inserts.
//
//	go test ./notify -run '^$' -bench PlanToSlack -benchtime 50x
func BenchmarkPlanToSlack(b *testing.B) {
	for _, store := range []struct {
		name string
		pg   bool
	}{{"sqlite", false}, {"postgres", true}} {
		b.Run(store.name, func(b *testing.B) {
			e := setup(b, options{postgres: store.pg, bot: true})
			e.run(b, e.p, e.n)
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				plan := e.plan(b)
				b.StartTimer()
				wait(b, e, plan.ID)
			}
		})
	}
}

// wait waits for the chat.postMessage about plan.
func wait(b *testing.B, e *env, plan string) {
	timeout := time.After(20 * time.Second)
	for {
		select {
		case r := <-e.slack.arrived:
			if r.Path == "/api/chat.postMessage" && strings.Contains(r.Form.Get("blocks"), plan) {
				return
			}
		case <-timeout:
			b.Fatalf("plan %s did not reach Slack in 20s", plan)
		}
	}
}
