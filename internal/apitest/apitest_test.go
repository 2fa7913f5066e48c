package apitest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps what Check reports.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Helper() {}

// Check catches an answer the document does not describe, a request the
// server took that the document refuses, and a route it does not have;
// and passes an exchange that is as described.
func TestCheckCatchesWhatTheDocumentRefuses(t *testing.T) {
	req := func(method, path string) *http.Request {
		r, _ := http.NewRequest(method, "http://x"+path, nil)
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer t")
		return r
	}
	json := http.Header{"Content-Type": {"application/json"}}
	for _, c := range []struct {
		what   string
		r      *http.Request
		body   string
		status int
		answer string
		want   string
	}{
		{"an error without its code", req("GET", "/api/v1/plans/p1"), "", 404, `{"error": "no plan p1"}`, "not as the OpenAPI document says"},
		{"an unknown field the server took", req("POST", "/api/v1/plans"), `{"targets": ["a"], "from": "2026-11-01", "to": "2026-11-02", "reason": "r", "force": true}`, 201, `{}`, "the server took (201) a request the OpenAPI document refuses"},
		{"a route the document lacks", req("GET", "/api/v1/nothing/here"), "", 200, `{}`, "has no such route"},
		{"a list of plans that is not one", req("GET", "/api/v1/plans"), "", 200, `{"plans": []}`, "not as the OpenAPI document says"},
		{"a described error", req("GET", "/api/v1/plans/p1"), "", 404, `{"error": "no plan p1", "code": 2}`, ""},
		{"a described list", req("GET", "/api/v1/plans?limit=5"), "", 200, `[]`, ""},
	} {
		rec := &recorder{TB: t}
		Check(rec, c.r, []byte(c.body), c.status, json, []byte(c.answer))
		got := strings.Join(rec.errs, "\n")
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s: Check reported %q, want %q", c.what, got, c.want)
		}
	}
}
