package airflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/refill-dev/refill"
)

// DAGRun is one DAG run as DAGRuns lists it. Times are in UTC; a zero time
// stands for a field Airflow left null.
type DAGRun struct {
	RunID string
	// State is queued, running, success or failed (DagState in v1,
	// DagRunState in v2), or whatever a later Airflow adds.
	State string
	// LogicalDate is zero for an Airflow 3 run triggered without one, as
	// Run triggers them.
	LogicalDate time.Time
	// DataIntervalStart and DataIntervalEnd bound the data the run covers
	// by the DAG's timetable. For a run triggered through the API Airflow
	// infers them from the trigger time (v1) or leaves them null (v2).
	DataIntervalStart, DataIntervalEnd time.Time
	// StartDate is when the run (its latest attempt, after a clear) began
	// running; zero while it is queued.
	StartDate time.Time
	// RunAfter is when the run became due (v2 only): the end of the data
	// interval for a scheduled run, the trigger time for a manual one.
	RunAfter time.Time
	// ConfStart and ConfEnd are the run's conf.start_date and
	// conf.end_date, when they hold RFC 3339 timestamps (or dates): the
	// partition bounds Run passes to the DAG.
	ConfStart, ConfEnd time.Time
}

// IntervalStart is the start of the data the run processes: conf's
// start_date when the run carries one (every run Run triggers does, and
// its logical date and data interval are those of the trigger time, not
// the partition's), else the start of its data interval, else its logical
// date. It is zero for a run that has none of them.
func (r DAGRun) IntervalStart() time.Time {
	switch {
	case !r.ConfStart.IsZero():
		return r.ConfStart
	case !r.DataIntervalStart.IsZero():
		return r.DataIntervalStart
	}
	return r.LogicalDate
}

// Began orders runs of the same data: when the run (its latest attempt)
// started, else — still queued — when it became due, else its logical
// date. A later Began is a later attempt at the data.
func (r DAGRun) Began() time.Time {
	switch {
	case !r.StartDate.IsZero():
		return r.StartDate
	case !r.RunAfter.IsZero():
		return r.RunAfter
	}
	return r.LogicalDate
}

// Listing bounds.
const (
	// listPageSize is the limit asked for per page: Airflow's default
	// [api] maximum_page_limit. A server configured lower answers with
	// smaller pages, which the listing follows just as well.
	listPageSize = 100
	// MaxListPages bounds the pages one listing reads (per query), so that
	// a server that ignores offset, or a DAG with an enormous history,
	// cannot hold the caller in a loop.
	MaxListPages = 100
)

// DAGRuns lists every DAG run of job's DAG whose logical date is in
// [from, to], following Airflow's pagination. A zero from or to leaves
// that side open. On Airflow 3, a run without a logical date (a manual run
// triggered without one, as Run triggers them) counts by its run_after —
// its trigger time — instead, so that such runs are listed too; on
// Airflow 2 such a run has the trigger time as its logical date already.
//
// Runs are returned in the order Airflow lists them (by its internal ID:
// creation order) and once each. Listing more than MaxListPages pages is
// an error, as is an answer missing what a run must have (its ID, its
// state, the date it is listed by).
func (c *Client) DAGRuns(ctx context.Context, job *refill.AirflowJob, from, to time.Time) ([]DAGRun, error) {
	s, err := c.listSession(job)
	if err != nil {
		return nil, err
	}
	if !from.IsZero() && !to.IsZero() && to.Before(from) {
		return nil, refill.BadInputf("%s: list DAG runs: the range ends (%s) before it starts (%s)", s.listWhat(), stamp(to), stamp(from))
	}
	field := "execution_date" // v1 calls the logical date that in its filters
	if s.api == "v2" {
		field = "logical_date"
	}
	runs, err := s.listRuns(ctx, field, from, to, nil)
	if err != nil {
		return nil, err
	}
	if s.api == "v2" {
		// logical_date_gte/lte leave out runs whose logical date is null:
		// ask for those by run_after.
		seen := make(map[string]bool, len(runs))
		for _, r := range runs {
			seen[r.RunID] = true
		}
		more, err := s.listRuns(ctx, "run_after", from, to, func(r DAGRun) bool { return r.LogicalDate.IsZero() && !seen[r.RunID] })
		if err != nil {
			return nil, err
		}
		runs = append(runs, more...)
	}
	return runs, nil
}

// listRunID stands in for the run ID that session requires; listing has
// none.
const listRunID = "~"

// listSession is a session for listing: session's checks, without a run.
func (c *Client) listSession(job *refill.AirflowJob) (*session, error) {
	const epoch = "1970-01-01T00:00:00Z"
	s, err := c.session(job, listRunID, epoch, epoch)
	if err != nil {
		// session's messages name the run (what); a listing has none.
		msg := strings.Replace(err.Error(), fmt.Sprintf(" run %q", listRunID), "", 1)
		if errors.Is(err, refill.ErrBadInput) {
			return nil, refill.BadInputf("%s", msg)
		}
		return nil, errors.New(msg)
	}
	s.runID = ""
	return s, nil
}

// listWhat names the DAG in a listing's errors.
func (s *session) listWhat() string { return fmt.Sprintf("airflow dag %q", s.dag) }

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// listRuns reads every page of GET dagRuns filtered on field's _gte and
// _lte in [from, to], keeping the runs keep accepts (all when nil).
func (s *session) listRuns(ctx context.Context, field string, from, to time.Time, keep func(DAGRun) bool) ([]DAGRun, error) {
	q := url.Values{}
	if !from.IsZero() {
		q.Set(field+"_gte", stamp(from))
	}
	if !to.IsZero() {
		q.Set(field+"_lte", stamp(to))
	}
	q.Set("limit", strconv.Itoa(listPageSize))
	var out []DAGRun
	seen := map[string]bool{}
	offset := 0
	for page := 0; ; page++ {
		if page == MaxListPages {
			return nil, fmt.Errorf("%s: list DAG runs: more than %d pages (%d runs listed so far, by %s from %s to %s): narrow the range",
				s.listWhat(), MaxListPages, offset, field, orOpen(from), orOpen(to))
		}
		q.Set("offset", strconv.Itoa(offset))
		resp, err := s.call(ctx, http.MethodGet, s.runsPath()+"?"+q.Encode(), nil)
		if err != nil {
			return nil, fmt.Errorf("%s: list DAG runs: %w", s.listWhat(), err)
		}
		if resp.status/100 != 2 {
			return nil, s.listStatusError(resp)
		}
		runs, total, err := s.decodeRuns(resp.body)
		if err != nil {
			return nil, fmt.Errorf("%s: list DAG runs (offset %d) answered HTTP %d: %w", s.listWhat(), offset, resp.status, err)
		}
		for _, r := range runs {
			if seen[r.RunID] || (keep != nil && !keep(r)) {
				continue
			}
			seen[r.RunID] = true
			out = append(out, r)
		}
		offset += len(runs)
		// An empty page before the total is reached means runs were
		// deleted meanwhile: what is left has been read.
		if len(runs) == 0 || offset >= total {
			return out, nil
		}
	}
}

func orOpen(t time.Time) string {
	if t.IsZero() {
		return "(open)"
	}
	return stamp(t)
}

// listStatusError is statusError for a listing, which names no run.
func (s *session) listStatusError(resp *response) error {
	msg := fmt.Sprintf("%s: list DAG runs: HTTP %d %s%s", s.listWhat(), resp.status, http.StatusText(resp.status), s.detailSuffix(resp))
	if resp.status == http.StatusUnauthorized || resp.status == http.StatusForbidden {
		if s.creds {
			msg += " (credentials from " + s.envs + ")"
		} else {
			msg += " (no username_env/password_env configured)"
		}
	}
	if permanent(resp.status) {
		return refill.BadInputf("%s", msg)
	}
	return errors.New(msg)
}

// listedRun holds the fields of DAGRun (v1) and DAGRunResponse (v2) that a
// listing reads.
type listedRun struct {
	DagRunID          *string         `json:"dag_run_id"`
	State             *string         `json:"state"`
	LogicalDate       *string         `json:"logical_date"`
	ExecutionDate     *string         `json:"execution_date"` // v1, deprecated alias of logical_date
	DataIntervalStart *string         `json:"data_interval_start"`
	DataIntervalEnd   *string         `json:"data_interval_end"`
	StartDate         *string         `json:"start_date"`
	RunAfter          *string         `json:"run_after"` // v2
	Conf              json.RawMessage `json:"conf"`
}

// decodeRuns parses DAGRunCollection (v1) or DAGRunCollectionResponse
// (v2): dag_runs and total_entries must both be there.
func (s *session) decodeRuns(body []byte) ([]DAGRun, int, error) {
	var coll struct {
		DagRuns      *[]json.RawMessage `json:"dag_runs"`
		TotalEntries *int               `json:"total_entries"`
	}
	if err := json.Unmarshal(body, &coll); err != nil {
		return nil, 0, fmt.Errorf("decoding the DAG runs: %w", err)
	}
	if coll.DagRuns == nil {
		return nil, 0, errors.New("the answer has no dag_runs")
	}
	if coll.TotalEntries == nil {
		return nil, 0, errors.New("the answer has no total_entries")
	}
	out := make([]DAGRun, 0, len(*coll.DagRuns))
	for i, raw := range *coll.DagRuns {
		r, err := s.decodeListed(raw)
		if err != nil {
			return nil, 0, fmt.Errorf("dag_runs[%d]: %w", i, err)
		}
		out = append(out, r)
	}
	return out, *coll.TotalEntries, nil
}

// decodeListed parses one listed run. It insists on an ID and a state, and
// on the date the listing filters by: logical_date (or execution_date) in
// v1, run_after in v2 (where logical_date may be null).
func (s *session) decodeListed(raw json.RawMessage) (DAGRun, error) {
	var l listedRun
	if err := json.Unmarshal(raw, &l); err != nil {
		return DAGRun{}, fmt.Errorf("decoding the DAG run: %w", err)
	}
	if l.DagRunID == nil || *l.DagRunID == "" {
		return DAGRun{}, errors.New("a DAG run has no dag_run_id")
	}
	r := DAGRun{RunID: *l.DagRunID}
	if l.State == nil || *l.State == "" {
		return DAGRun{}, fmt.Errorf("DAG run %q has no state", r.RunID)
	}
	r.State = *l.State
	var err error
	field := func(name string, v *string, dst *time.Time) {
		if err != nil || v == nil || *v == "" {
			return
		}
		t, perr := time.Parse(time.RFC3339Nano, *v)
		if perr != nil {
			err = fmt.Errorf("DAG run %q: %s %q is not an RFC 3339 timestamp", r.RunID, name, *v)
			return
		}
		*dst = t.UTC()
	}
	field("logical_date", l.LogicalDate, &r.LogicalDate)
	if r.LogicalDate.IsZero() {
		field("execution_date", l.ExecutionDate, &r.LogicalDate)
	}
	field("data_interval_start", l.DataIntervalStart, &r.DataIntervalStart)
	field("data_interval_end", l.DataIntervalEnd, &r.DataIntervalEnd)
	field("start_date", l.StartDate, &r.StartDate)
	field("run_after", l.RunAfter, &r.RunAfter)
	if err != nil {
		return DAGRun{}, err
	}
	switch {
	case s.api == "v1" && r.LogicalDate.IsZero():
		return DAGRun{}, fmt.Errorf("DAG run %q has no logical_date", r.RunID)
	case s.api == "v2" && r.RunAfter.IsZero():
		return DAGRun{}, fmt.Errorf("DAG run %q has no run_after", r.RunID)
	}
	r.ConfStart, r.ConfEnd = confBounds(l.Conf)
	return r, nil
}

// confBounds reads conf.start_date and conf.end_date, as Run sets them.
// Anything else in conf, or a conf that is not an object, is the DAG's own
// business and ignored.
func confBounds(raw json.RawMessage) (start, end time.Time) {
	var conf map[string]any
	if len(raw) == 0 || json.Unmarshal(raw, &conf) != nil {
		return
	}
	return confTime(conf["start_date"]), confTime(conf["end_date"])
}

func confTime(v any) time.Time {
	s, ok := v.(string)
	if !ok {
		return time.Time{}
	}
	for _, layout := range []string{time.RFC3339Nano, time.DateOnly} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}
