package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/internal/apitest"
	"github.com/refill-dev/refill/planner"
	"github.com/refill-dev/refill/project"
)

var nextLink = regexp.MustCompile(`^<(/api/v1/plans\?[^>]+)>; rel="next"$`)

// TestAPIPlansPage: GET /api/v1/plans answers a bare array as it always
// did, 50 plans by default, and says where the next page is in a Link
// header; following the links reads every plan once, newest first. A
// reason stored at 900 KB is clipped in the list, and only there.
func TestAPIPlansPage(t *testing.T) {
	t.Parallel()
	e := apiServe(t, "")
	long := storeLongReasons(t, e.p, e.sc.Day, 2, 900<<10)
	for i := range 3 {
		if _, err := e.p.Control.Plan(context.Background(), "alice", planner.Request{Targets: []string{"sessions"},
			From: e.sc.Day(12 + 2*i), To: e.sc.Day(12 + 2*i), Reason: "page test"}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(path string) (int, http.Header, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", e.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+e.tokens["alice"])
		return apitest.Do(t, req, nil)
	}
	list := func(body []byte) []refill.PlanSummary {
		t.Helper()
		var l []refill.PlanSummary
		if err := json.Unmarshal(body, &l); err != nil {
			t.Fatalf("not a bare array of plans: %v: %.200s", err, body)
		}
		return l
	}

	st, h, body := get("/api/v1/plans")
	all := list(body)
	if st != http.StatusOK || len(all) != 5 || h.Get("Link") != "" {
		t.Fatalf("GET /api/v1/plans: %d, %d plans, Link %q; want all 5 and no next page", st, len(all), h.Get("Link"))
	}
	if len(body) > 64<<10 {
		t.Errorf("the list of 5 plans is %d bytes: the 900 KB reasons are not clipped", len(body))
	}
	for _, p := range all {
		if slices.Contains(long, p.ID) && (len([]rune(p.Reason)) != refill.MaxText || !strings.HasSuffix(p.Reason, "…")) {
			t.Errorf("plan %s: listed reason of %d characters, want %d ending …", p.ID, len([]rune(p.Reason)), refill.MaxText)
		}
	}
	_, one := e.call("alice", "GET", "/api/v1/plans/"+long[0], "")
	if req, _ := one["request"].(map[string]any); req["reason"] != strings.Repeat("x", 900<<10) {
		t.Error("the plan itself does not hold its whole reason")
	}
	// A partition's history is a list too.
	if st, _, body := get("/api/v1/history?dataset=sessions&partition=" + e.sc.Day(40)); st != http.StatusOK || len(body) > 64<<10 || !strings.Contains(string(body), "…") {
		t.Errorf("history of a partition a long plan touched: %d, %d bytes", st, len(body))
	}

	// Page by two, following the links.
	var paged []string
	path := "/api/v1/plans?limit=2"
	for pages := 0; path != ""; pages++ {
		if pages == 5 {
			t.Fatal("the links do not end")
		}
		st, h, body := get(path)
		if st != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, st, body)
		}
		page := list(body)
		if len(page) > 2 || len(page) == 0 {
			t.Fatalf("GET %s: %d plans", path, len(page))
		}
		for _, p := range page {
			paged = append(paged, p.ID)
		}
		path = ""
		if link := h.Get("Link"); link != "" {
			m := nextLink.FindStringSubmatch(link)
			if m == nil {
				t.Fatalf("Link %q", link)
			}
			path = m[1]
		}
	}
	var want []string
	for _, p := range all {
		want = append(want, p.ID)
	}
	if !slices.Equal(paged, want) {
		t.Errorf("pages read %v, want %v", paged, want)
	}

	// The status filter goes on to the next page; a limit over 500 reads as
	// 500; a bad limit or cursor is bad input.
	if _, h, _ := get("/api/v1/plans?status=pending&limit=1"); !strings.Contains(h.Get("Link"), "status=pending") {
		t.Errorf("next page of pending plans: Link %q", h.Get("Link"))
	}
	if st, _, body := get("/api/v1/plans?limit=1000"); st != http.StatusOK || len(list(body)) != 5 {
		t.Errorf("limit=1000: %d %.100s", st, body)
	}
	for _, q := range []string{"limit=0", "limit=x", "before=nope"} {
		st, res := e.call("alice", "GET", "/api/v1/plans?"+q, "")
		wantError(t, q, st, res, http.StatusBadRequest, refill.ExitBadInput)
	}
}

// TestWebPlansPage: the web's plans list shows 50 plans by default, with a
// link to the older ones and back to the newest, and clips a long reason.
func TestWebPlansPage(t *testing.T) {
	t.Parallel()
	e := webSetup(t)
	p, err := project.Open(e.ctx, project.Options{Config: e.sc.Config, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	long := storeLongReasons(t, p, e.sc.Day, 3, 900<<10)
	first := e.get(t, "/?limit=2", "bob")
	if first.StatusCode != http.StatusOK || !has(first.body, "older") || has(first.body, "newest") {
		t.Fatalf("first page: %d, older link %v, newest link %v", first.StatusCode, has(first.body, "older"), has(first.body, "newest"))
	}
	if len(first.body) > 64<<10 {
		t.Errorf("a page of two plans is %d bytes: the reasons are not clipped", len(first.body))
	}
	href := regexp.MustCompile(`id="older" href="([^"]+)"`).FindStringSubmatch(first.body)
	if href == nil {
		t.Fatal("no link to older plans")
	}
	second := e.get(t, strings.ReplaceAll(href[1], "&amp;", "&"), "bob")
	if second.StatusCode != http.StatusOK || has(second.body, "older") || !has(second.body, "newest") || !strings.Contains(second.body, long[0]) {
		t.Errorf("second page: %d, older link %v, newest link %v, holds %s: %v", second.StatusCode, has(second.body, "older"), has(second.body, "newest"), long[0], strings.Contains(second.body, long[0]))
	}
	if r := e.get(t, "/?before=nope", "bob"); r.StatusCode != http.StatusBadRequest {
		t.Errorf("an unknown cursor: %d, want 400", r.StatusCode)
	}
	// The pages that show a long reason show it clipped: the plan's own
	// and the audit log. The API has it whole.
	for _, path := range []string{"/plans/" + long[0], "/audit"} {
		r := e.get(t, path, "bob")
		if r.StatusCode != http.StatusOK || len(r.body) > 128<<10 || !strings.Contains(r.body, strings.Repeat("x", 100)) {
			t.Errorf("%s: %d, %d bytes; want the reason, clipped", path, r.StatusCode, len(r.body))
		}
	}
}
