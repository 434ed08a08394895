package api

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/weirhq/weir/docs"
	"github.com/weirhq/weir/runtime/engine"
)

// docs/openapi.yaml describes every route of the server's route table
// (method and path) and no other, every struct of package apitypes as a
// schema with exactly its JSON fields, and the error shape as engine.Error
// writes it; GET /v1/openapi.json serves it as JSON. A route or a field
// added without its description fails here (DESIGN: shared artefacts stay
// whole).
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	t.Parallel()
	j, err := yamlToJSON(docs.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI    string                                `json:"openapi"`
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]*schema `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(j, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
	b := setup(t, engine.Config{})

	t.Run("routes", func(t *testing.T) {
		if len(b.srv.routes) < 25 {
			t.Fatalf("the route table has %d routes: routes are registered without Server.handle", len(b.srv.routes))
		}
		served := map[string]bool{}
		for _, r := range b.srv.routes {
			method, path, ok := strings.Cut(r, " ")
			if !ok {
				t.Errorf("route %q has no method", r)
				continue
			}
			served[strings.ToLower(method)+" "+path] = true
			if _, ok := doc.Paths[path][strings.ToLower(method)]; !ok {
				t.Errorf("docs/openapi.yaml does not describe %s %s", method, path)
			}
		}
		for path, ops := range doc.Paths {
			for op := range ops {
				if op == "parameters" || op == "summary" || op == "description" {
					continue
				}
				if !served[op+" "+path] {
					t.Errorf("docs/openapi.yaml describes %s %s, which the server does not route", strings.ToUpper(op), path)
				}
			}
		}
	})

	// Every request is counted against its owner's caps before it is
	// routed (admitRequest), so every route may answer 429.
	t.Run("every route may answer 429", func(t *testing.T) {
		for path, ops := range doc.Paths {
			for op, raw := range ops {
				if op == "parameters" || op == "summary" || op == "description" {
					continue
				}
				var o struct {
					Responses map[string]json.RawMessage `json:"responses"`
				}
				if err := json.Unmarshal(raw, &o); err != nil {
					t.Fatalf("%s %s: %v", op, path, err)
				}
				if _, ok := o.Responses["429"]; !ok {
					t.Errorf("docs/openapi.yaml: %s %s lists no 429 (E_TOO_MANY_REQUESTS)", strings.ToUpper(op), path)
				}
			}
		}
	})

	t.Run("fields", func(t *testing.T) {
		types := apitypesFields(t)
		if len(types) < 30 {
			t.Fatalf("read %d structs from apitypes: the parse is broken", len(types))
		}
		for name, fields := range types {
			s, ok := doc.Components.Schemas[name]
			if !ok {
				t.Errorf("apitypes.%s has no schema in docs/openapi.yaml (components.schemas.%s)", name, name)
				continue
			}
			diffFields(t, name, fields, s.fields(doc.Components.Schemas))
		}
		// The error shape is engine.Error's.
		var errFields []string
		et := reflect.TypeFor[engine.Error]()
		for i := range et.NumField() {
			if tag, _, _ := strings.Cut(et.Field(i).Tag.Get("json"), ","); tag != "" && tag != "-" {
				errFields = append(errFields, tag)
			}
		}
		diffFields(t, "Error", errFields, doc.Components.Schemas["Error"].fields(doc.Components.Schemas))
	})

	t.Run("served", func(t *testing.T) {
		a := b.send(t, alice, "GET", "/v1/openapi.json", nil)
		if a.status != http.StatusOK || a.header.Get("Content-Type") != "application/json" {
			t.Fatalf("GET /v1/openapi.json: %d %s", a.status, a.header.Get("Content-Type"))
		}
		if !bytes.Equal(a.body, j) {
			t.Error("GET /v1/openapi.json is not docs/openapi.yaml as JSON")
		}
		if a := b.send(t, alice, "GET", "/v1/openapi.json?format=yaml", nil); a.status != http.StatusBadRequest {
			t.Errorf("an unknown parameter answered %d", a.status)
		}
	})
}

// diffFields reports the fields one side has and the other lacks.
func diffFields(t *testing.T, name string, code, documented []string) {
	t.Helper()
	for _, f := range code {
		if !slices.Contains(documented, f) {
			t.Errorf("%s.%s is missing from its schema in docs/openapi.yaml", name, f)
		}
	}
	for _, f := range documented {
		if !slices.Contains(code, f) {
			t.Errorf("docs/openapi.yaml's %s has %s, which the type has not", name, f)
		}
	}
}

// schema is the part of a JSON schema that names an object's properties.
type schema struct {
	Ref        string         `json:"$ref"`
	Properties map[string]any `json:"properties"`
	AllOf      []*schema      `json:"allOf"`
}

// fields are the properties s gives an object, through $ref and allOf.
func (s *schema) fields(all map[string]*schema) []string {
	if s == nil {
		return nil
	}
	var out []string
	if s.Ref != "" {
		out = append(out, all[strings.TrimPrefix(s.Ref, "#/components/schemas/")].fields(all)...)
	}
	for p := range s.Properties {
		out = append(out, p)
	}
	for _, sub := range s.AllOf {
		out = append(out, sub.fields(all)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// apitypesFields reads package apitypes's source: each struct type's JSON
// field names, embedded structs' fields included. Read from the source, so
// a new type needs no list here.
func apitypesFields(t *testing.T) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("apitypes", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	structs := map[string]*ast.StructType{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if st, ok := ts.Type.(*ast.StructType); ok && ts.Name.IsExported() {
					structs[ts.Name.Name] = st
				}
			}
			return true
		})
	}
	var fieldsOf func(st *ast.StructType) []string
	fieldsOf = func(st *ast.StructType) []string {
		var out []string
		for _, f := range st.Fields.List {
			tag := ""
			if f.Tag != nil {
				s, err := strconv.Unquote(f.Tag.Value)
				if err != nil {
					t.Fatal(err)
				}
				tag, _, _ = strings.Cut(reflect.StructTag(s).Get("json"), ",")
			}
			if tag == "-" {
				continue
			}
			if len(f.Names) == 0 { // embedded
				if id, ok := f.Type.(*ast.Ident); ok && tag == "" && structs[id.Name] != nil {
					out = append(out, fieldsOf(structs[id.Name])...)
					continue
				}
				t.Fatalf("apitypes: an embedded field this test cannot read: %#v", f.Type)
			}
			for _, n := range f.Names {
				if !n.IsExported() {
					continue
				}
				if tag == "" {
					tag = n.Name
				}
				out = append(out, tag)
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	out := map[string][]string{}
	for name, st := range structs {
		out[name] = fieldsOf(st)
	}
	return out
}
