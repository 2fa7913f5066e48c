package server

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
)

// FuzzDagRunBody feeds the Airflow-style trigger's parser arbitrary bodies:
// it never panics, refuses what it cannot read as bad input, and a range it
// accepts has both ends, in order for a data interval.
func FuzzDagRunBody(f *testing.F) {
	for _, seed := range []string{
		`{"conf":{"start_date":"2026-11-01","end_date":"2026-11-03"},"note":"x"}`,
		`{"dag_run_id":"manual__1","data_interval_start":"2026-11-01T00:00:00Z","data_interval_end":"2026-11-02T00:00:00Z","note":"x"}`,
		`{"data_interval_start":"2026-11-01T05:00:00+09:00","data_interval_end":"2026-11-01T06:00:00+09:00"}`,
		`{"conf":{"start_date":"2026-11-01"}}`,
		`{"conf":null,"note":null}`,
		`{"logical_date":1,"run_after":[],"partition_key":{}}`,
		`[]`, `{"conf":{"start_date":"2026-11-01","end_date":"2026-11-03"}}{}`, `{"extra":1}`,
	} {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	f.Fuzz(func(t *testing.T, body string, hourly bool) {
		r := httptest.NewRequest("POST", "/api/v1/dags/d/dagRuns", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		var b dagRunBody
		if err := decode(httptest.NewRecorder(), r, &b); err != nil {
			if !errors.Is(err, refill.ErrBadInput) {
				t.Fatalf("decode: %v is not bad input", err)
			}
			return
		}
		grain := refill.GrainDay
		if hourly {
			grain = refill.GrainHour
		}
		from, to, err := dagRunRange(b, grain)
		if err != nil {
			if !errors.Is(err, refill.ErrBadInput) {
				t.Fatalf("range: %v is not bad input", err)
			}
			return
		}
		if from == "" || to == "" {
			t.Fatalf("accepted an empty end: %q..%q", from, to)
		}
		if b.Conf == nil || (b.Conf.StartDate == "" && b.Conf.EndDate == "") {
			// From a data interval: both ends are formatted partitions, in order.
			if from > to {
				t.Fatalf("data interval gave %s..%s", from, to)
			}
			if _, err := refill.PartitionTime(from, grain); err != nil {
				t.Fatalf("from %q: %v", from, err)
			}
			if _, err := refill.PartitionTime(to, grain); err != nil {
				t.Fatalf("to %q: %v", to, err)
			}
		}
	})
}
