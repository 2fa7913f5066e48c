package server_test

import (
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/refill-dev/refill/internal/apitest"
)

// The document describes every route the server serves under /api/v1,
// with the methods it serves, and is served itself without a token.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	t.Parallel()
	doc, _ := apitest.Contract(t)
	e := apiServe(t, "")
	resp, err := http.Get(e.url + "/api/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var served map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&served); err != nil || resp.StatusCode != 200 || served["openapi"] != "3.1.0" {
		t.Fatalf("GET /api/v1/openapi.json: %d, %v, openapi %v", resp.StatusCode, err, served["openapi"])
	}
	// The routes api.go registers, read from its source.
	raw, err := os.ReadFile("api.go")
	if err != nil {
		t.Fatal(err)
	}
	src := string(raw)
	re := regexp.MustCompile(`h\("(GET|POST|DELETE) (/api/v1/[^"]+)"`)
	var routes []string
	for _, m := range re.FindAllStringSubmatch(src, -1) {
		routes = append(routes, m[1]+" "+m[2])
	}
	if len(routes) < 20 {
		t.Fatalf("found %d routes in api.go", len(routes))
	}
	var described []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			described = append(described, method+" "+path)
		}
	}
	for _, r := range routes {
		if !slices.Contains(described, r) {
			t.Errorf("%s is served but not in the OpenAPI document", r)
		}
	}
	for _, d := range described {
		if !slices.Contains(routes, d) && d != "GET /api/v1/openapi.json" {
			t.Errorf("%s is in the OpenAPI document but not served", d)
		}
	}
}
