package server

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
)

// openAPIYAML is the API's contract, OpenAPI 3.1 (api/openapi.yaml): every
// route, body and error. The tests hold every request and answer of theirs
// to it.
//
//go:embed api/openapi.yaml
var openAPIYAML []byte

var openAPI = sync.OnceValues(func() ([]byte, error) {
	doc, err := openapi3.NewLoader().LoadFromData(openAPIYAML)
	if err != nil {
		return nil, fmt.Errorf("the OpenAPI document: %w", err)
	}
	return json.MarshalIndent(doc, "", "  ")
})

// OpenAPI is the API's OpenAPI document, as JSON.
func OpenAPI() ([]byte, error) { return openAPI() }

// serveOpenAPI answers GET /api/v1/openapi.json, without a token: the
// contract is no secret.
func (s *Server) serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	b, err := openAPI()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=3600")
	_, _ = w.Write(b)
}

// apiRoute is one route's success answer, as the request metric labels it.
type apiRoute struct{ route, method, status string }

// apiSuccesses are every API route with each success status the OpenAPI
// document gives it.
func apiSuccesses() []apiRoute {
	doc, err := openapi3.NewLoader().LoadFromData(openAPIYAML)
	if err != nil {
		return nil
	}
	var out []apiRoute
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for code := range op.Responses.Map() {
				if len(code) == 3 && code[0] == '2' {
					out = append(out, apiRoute{method + " " + path, method, code})
				}
			}
		}
	}
	return out
}
