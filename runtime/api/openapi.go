package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"go.yaml.in/yaml/v4"

	"github.com/weirhq/weir/docs"
	"github.com/weirhq/weir/runtime/engine"
)

// openAPIJSON is docs/openapi.yaml as JSON, converted once (NewServer
// asks first): the document is part of the binary, so a failure is a
// defect of the build, which TestOpenAPIDescribesEveryRoute catches.
var openAPIJSON = sync.OnceValues(func() ([]byte, error) { return yamlToJSON(docs.OpenAPI) })

// yamlToJSON converts a YAML document to JSON. Keys are strings (a YAML
// key that is not, such as an unquoted status code, is written as text).
func yamlToJSON(y []byte) ([]byte, error) {
	var v any
	if err := yaml.Unmarshal(y, &v); err != nil {
		return nil, fmt.Errorf("reading the OpenAPI document: %w", err)
	}
	return json.Marshal(jsonable(v))
}

// jsonable turns what the YAML decoder produced into values
// encoding/json writes: maps with other keys than strings get text keys.
func jsonable(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = jsonable(e)
		}
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case []any:
		for i, e := range t {
			t[i] = jsonable(e)
		}
	}
	return v
}

// openAPI is GET /v1/openapi.json: the API's own description.
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r) {
		return
	}
	doc, err := openAPIJSON()
	if err != nil {
		writeErr(w, http.StatusInternalServerError, &engine.Error{Code: CodeInternal, Class: engine.ClassProtocol, Message: err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(doc)
}
