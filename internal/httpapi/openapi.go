package httpapi

import (
	_ "embed"
	"net/http"
)

// openAPIDoc is the OpenAPI 3.1 description of the API; TestHTTPOpenAPI checks that it names every
// route Handler serves.
//
//go:embed openapi.json
var openAPIDoc []byte

// openAPI serves GET /v1/openapi.json.
func (a *API) openAPI(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPIDoc)
	return nil
}
