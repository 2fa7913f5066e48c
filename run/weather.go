package run

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/queue"
	"github.com/refill-dev/refill/store"
)

// Transient reports whether err is bad weather — the warehouse or the
// state store briefly unavailable — rather than a failure of the job's
// own: a connection refused, reset or timed out, a server shutting down or
// starting up, SQLite's file busy or locked, a read-only failover, a
// serialization failure or deadlock. A run waits these out (weather)
// instead of spending the job's attempts on them; a SQL error, a job's
// non-zero exit or a refusal of refill's is never transient.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	// A name that does not resolve is a wrong DSN, not an outage.
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
		return false
	}
	// A connection that could not be made in time (a black-holed
	// network, a server not answering) is weather, even though its cause
	// reads as a deadline; any other deadline is the attempt's own time
	// limit, which ends the attempt.
	var connect *pgconn.ConnectError
	if errors.As(err, &connect) {
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, refill.ErrBadInput) || errors.Is(err, refill.ErrNotPermitted) || errors.Is(err, refill.ErrVerification) || errors.Is(err, refill.ErrBlocked) {
		return false
	}
	for _, e := range []error{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE, syscall.ETIMEDOUT,
		syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ENETDOWN, io.ErrUnexpectedEOF, driver.ErrBadConn, sql.ErrConnDone} {
		if errors.Is(err, e) {
			return true
		}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			pgErr.Code == "40001", pgErr.Code == "40P01", // serialization failure, deadlock
			pgErr.Code == "25006",                                               // read-only transaction: a failover
			pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03", // shutting down, crashed, starting up
			pgErr.Code == "53300", pgErr.Code == "53400": // too many connections, configuration limit
			return true
		}
		return false
	}
	if pgconn.Timeout(err) {
		return true
	}
	var sqliteErr *msqlite.Error
	if errors.As(err, &sqliteErr) {
		switch sqliteErr.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return true
		}
		return false
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return true
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return true
	}
	// What drivers say in words when they lose a connection.
	msg := strings.ToLower(err.Error())
	for _, s := range []string{"connection refused", "connection reset", "broken pipe", "unexpected eof", "conn closed",
		"database is locked", "database table is locked", "the database system is starting up", "the database system is shutting down",
		"server closed the connection unexpectedly", "terminating connection due to administrator command"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// weather waits out transient failures of one partition's steps, within
// the run's patience (run.outage_patience) counted from the first: each
// step is retried with exponential backoff and jitter while it fails
// transiently, and the partition fails once the warehouse or the state
// store has been unavailable for longer. While it waits, the run's log
// (and show, through the store when it answers) says since when; past a
// minute, one notice goes to Slack and the webhooks.
type weather struct {
	r         *Runner
	a         queue.PartitionArgs
	patience  time.Duration
	since     time.Time
	what      string
	announced bool
}

func (r *Runner) weather(a queue.PartitionArgs) *weather {
	p := time.Duration(r.settings().OutagePatience)
	return &weather{r: r, a: a, patience: p}
}

// spent is how long each partition of a run has waited in waits that
// ended, across its attempts in this process: its patience is for all of
// them, not for each attempt.
type spentKey struct {
	plan, dataset, partition string
	run                      int
}

// spentBefore is what the partition's earlier waits used of its patience
// (none for a plan's own waits, which are not a partition's).
func (w *weather) spentBefore() time.Duration {
	if w.a.Dataset == "" {
		return 0
	}
	v, _ := w.r.spent.Load(spentKey{w.a.PlanID, w.a.Dataset, w.a.Partition, w.a.Run})
	d, _ := v.(time.Duration)
	return d
}

func (w *weather) spend(d time.Duration) {
	k := spentKey{w.a.PlanID, w.a.Dataset, w.a.Partition, w.a.Run}
	w.r.spent.Store(k, w.spentBefore()+d)
}

// do runs step, what it needs naming the party ("warehouse", "state
// store"), until it succeeds, fails for good, or patience runs out.
func (w *weather) do(ctx context.Context, party string, step func() error) error {
	backoff := 200 * time.Millisecond
	for {
		err := step()
		if err == nil || !Transient(err) {
			if !w.since.IsZero() {
				if w.a.Dataset != "" {
					w.spend(time.Since(w.since)) // a partition's patience is for all its waits
				}
				if err == nil {
					w.r.logf("%s: the %s answers again after %s", w.label(), w.what, time.Since(w.since).Round(time.Second))
				} else {
					w.r.logf("%s: stopped waiting for the %s after %s: %v", w.label(), w.what, time.Since(w.since).Round(time.Second), err)
				}
				w.r.waiting(ctx, w.a, "", time.Time{})
				w.since, w.what = time.Time{}, ""
			}
			return err
		}
		now := time.Now()
		if party == "warehouse" && w.r.storeDown(ctx) {
			// A warehouse step that also asks the state store (the run's
			// last look, the audit head) may be failing for the store.
			party = "state store"
		}
		if w.since.IsZero() || w.what != party {
			if w.since.IsZero() {
				w.since = now
			}
			w.what = party
			w.r.waiting(ctx, w.a, party, w.since)
			w.r.logf("%s: waiting for the %s (since %s): %v", w.label(), party, w.since.UTC().Format("15:04:05"), err)
		}
		waited := w.spentBefore() + now.Sub(w.since)
		if waited >= w.patience {
			w.r.waiting(ctx, w.a, "", time.Time{})
			return fmt.Errorf("the %s was unavailable for %s, longer than run.outage_patience (%s): %w", party, waited.Round(time.Second), w.patience, err)
		}
		if now.Sub(w.since) >= time.Minute && !w.announced {
			w.announced = true
			w.r.announceWait(ctx, w.a, party, w.since, err)
		}
		sleep := backoff/2 + rand.N(backoff/2+1)
		if left := w.patience - waited; sleep > left {
			sleep = left
		}
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

// storeDown reports whether the state store fails to answer a ping now.
func (r *Runner) storeDown(ctx context.Context) bool {
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	err := r.Store.DB().PingContext(c)
	return err != nil && ctx.Err() == nil
}

// label names what waits in the run's log: a partition, or the plan.
func (w *weather) label() string {
	if w.a.Dataset == "" {
		return "plan " + w.a.PlanID
	}
	return w.a.Dataset + " " + w.a.Partition
}

// waiting records (for "" clears) that a partition waits for party, in
// the state store when it answers, so that refill show, in any process,
// can say so.
func (r *Runner) waiting(ctx context.Context, a queue.PartitionArgs, party string, since time.Time) {
	if party == "state store" || a.Dataset == "" {
		return // it cannot be told
	}
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = r.Store.SetOutageWait(c, store.OutageWait{PlanID: a.PlanID, Dataset: a.Dataset, Partition: a.Partition, For: party, Since: since})
}

// announceWait tells Slack and the webhooks, once, that a partition has
// waited for a minute: an audit entry, whose notice goes out with it. The
// state store must answer for that; when it is what is down, the run's
// log alone says so.
func (r *Runner) announceWait(ctx context.Context, a queue.PartitionArgs, party string, since time.Time, cause error) {
	if party == "state store" {
		r.logf("ALERT %s: waiting for the state store for a minute now (since %s)", a.PlanID, since.UTC().Format("15:04:05"))
		return
	}
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = r.Store.Update(c, func(tx *store.Tx) error {
		return tx.Append(c, &refill.Event{Kind: refill.EventRunWaiting, Actor: "refill", PlanID: a.PlanID, Dataset: a.Dataset, Partition: a.Partition,
			At: r.Now.Now(), Detail: refill.Detail(map[string]any{"waiting_for": party, "since": since.UTC().Format(time.RFC3339), "error": cause.Error()})})
	})
	r.logf("ALERT %s %s: waiting for the %s for a minute now (since %s)", a.Dataset, a.Partition, party, since.UTC().Format("15:04:05"))
}
