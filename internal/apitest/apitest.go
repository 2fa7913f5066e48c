// Package apitest holds the API tests' traffic to the API's OpenAPI
// document (server.OpenAPI): every request the server takes and every
// answer it gives must be one the document describes.
package apitest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/refill-dev/refill/server"
)

// The API's OpenAPI document, loaded once for every test's traffic.
var (
	contractOnce   sync.Once
	contractDoc    *openapi3.T
	contractRouter routers.Router
	contractErr    error
)

// Contract is the API's OpenAPI document, validated, and a router over it.
func Contract(t testing.TB) (*openapi3.T, routers.Router) {
	t.Helper()
	contractOnce.Do(func() {
		b, err := server.OpenAPI()
		if err != nil {
			contractErr = err
			return
		}
		l := openapi3.NewLoader()
		if contractDoc, contractErr = l.LoadFromData(b); contractErr != nil {
			return
		}
		if contractErr = contractDoc.Validate(context.Background()); contractErr != nil {
			return
		}
		contractRouter, contractErr = gorillamux.NewRouter(contractDoc)
	})
	if contractErr != nil {
		t.Fatalf("the OpenAPI document: %v", contractErr)
	}
	return contractDoc, contractRouter
}

// Check holds one exchange to the OpenAPI document: every answer
// must be one it describes, with a body its schema accepts; a request the
// server took (2xx) must be one it accepts; and a request it refuses must
// not have been taken.
func Check(t testing.TB, req *http.Request, body []byte, status int, header http.Header, answer []byte) {
	t.Helper()
	if !strings.HasPrefix(req.URL.Path, "/api/v1/") {
		return
	}
	_, router := Contract(t)
	r := req.Clone(context.Background())
	r.Body = io.NopCloser(bytes.NewReader(body))
	u := *req.URL
	u.Scheme, u.Host = "", ""
	r.URL = &u
	route, params, err := router.FindRoute(r)
	if err != nil {
		if status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
			t.Errorf("%s %s answered %d, but the OpenAPI document has no such route: %v", req.Method, req.URL.Path, status, err)
		}
		return
	}
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
	reqErr := openapi3filter.ValidateRequest(context.Background(), in)
	switch {
	case reqErr != nil && status/100 == 2:
		t.Errorf("%s %s: the server took (%d) a request the OpenAPI document refuses: %v\nbody: %s", req.Method, req.URL.Path, status, reqErr, body)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: header,
		Body: io.NopCloser(bytes.NewReader(answer)), Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("%s %s: answer %d is not as the OpenAPI document says: %v\n%s", req.Method, req.URL.Path, status, err, clipBody(answer))
	}
}

func clipBody(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "…"
	}
	return string(b)
}

// Do sends req with body (nil for none), checks the exchange, and returns
// the answer's status, header and body.
func Do(t testing.TB, req *http.Request, body []byte) (int, http.Header, []byte) {
	t.Helper()
	req.Body, req.ContentLength = http.NoBody, 0
	if len(body) > 0 {
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	Check(t, req, body, resp.StatusCode, resp.Header, b)
	return resp.StatusCode, resp.Header, b
}
