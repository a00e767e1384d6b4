package openapi

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/executors/rest"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/schemas"
)

// loadSource returns an Source named "pets" for testdata/file.
func loadSource(t testing.TB, file string) Source {
	t.Helper()
	loc := filepath.Join("testdata", file)
	b, err := os.ReadFile(loc)
	if err != nil {
		t.Fatal(err)
	}
	return Source{Name: "pets", Spec: b, Location: loc}
}

func specNames(specs []rest.Spec) []string {
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	return names
}

// specView is a Spec with its JSON fields decoded, for cmp.Diff.
type specView struct {
	Name, Description, Source, Method, URL string
	Query, Headers                         map[string]string
	Body                                   string
	InputSchema                            any
	Timeout                                time.Duration
	MaxResponseBytes                       int64
	Secrets                                []string
}

func viewOf(t *testing.T, s rest.Spec) specView {
	t.Helper()
	var schema any
	if err := json.Unmarshal(s.InputSchema, &schema); err != nil {
		t.Fatalf("%s: InputSchema is not JSON: %v\n%s", s.Name, err, s.InputSchema)
	}
	return specView{
		Name: s.Name, Description: s.Description, Source: s.Source, Method: s.Method, URL: s.URL,
		Query: s.Query, Headers: s.Headers, Body: string(s.Body), InputSchema: schema,
		Timeout: s.Timeout, MaxResponseBytes: s.MaxResponseBytes, Secrets: s.Secrets,
	}
}

func decodeJSON(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decoding %s: %v", s, err)
	}
	return v
}

// TestFromOpenAPIPetstoreSpecs pins down every field of every tool made
// from testdata/petstore.yaml.
func TestFromOpenAPIPetstoreSpecs(t *testing.T) {
	src := loadSource(t, "petstore.yaml")
	src.Headers = map[string]string{"X-Api-Key": "k{1}", "x-request-id": "from-source"}
	src.Timeout = 7 * time.Second
	src.MaxResponseBytes = 4096
	src.Secrets = []string{"s3cret"}
	specs, _, err := Specs(src)
	if err != nil {
		t.Fatalf("Specs = %v", err)
	}
	const base = "https://eu.petstore.example/v1"
	common := func(v specView) specView {
		v.Source = "openapi:pets"
		v.Timeout = 7 * time.Second
		v.MaxResponseBytes = 4096
		v.Secrets = []string{"s3cret"}
		return v
	}
	srcHeaders := map[string]string{"X-Api-Key": "k{{1}}", "x-request-id": "from-source"}
	petID := `{"type":"integer","format":"int64","description":"The pet's id."}`
	tests := []struct {
		name   string
		want   specView
		schema string
	}{
		{
			name: "pets__listPets",
			want: specView{
				Description: "List pets\n\nReturns the pets in the store, newest first.",
				Method:      "GET",
				URL:         base + "/pets",
				Query:       map[string]string{"status": "{status}", "limit": "{limit}"},
				// The header parameter wins over the source's header of the
				// same name in another case; Accept is ignored.
				Headers: map[string]string{"X-Api-Key": "k{{1}}", "X-Request-ID": "{X-Request-ID}"},
			},
			schema: `{
				"type": "object",
				"properties": {
					"status": {"type": "string", "enum": ["available", "sold"], "description": "Only pets with this status."},
					"limit": {"type": "integer", "format": "int32", "minimum": 1, "maximum": 100, "default": 20, "description": "At most this many pets."},
					"X-Request-ID": {"type": "string", "format": "uuid", "description": "Correlates logs."}
				},
				"required": ["status"],
				"additionalProperties": false
			}`,
		},
		{
			name: "pets__createPet",
			want: specView{
				Description: "Add a pet",
				Method:      "POST",
				URL:         base + "/pets",
				Headers:     srcHeaders,
				Body:        `"{body}"`,
			},
			// Pet and its nested Category are inlined; readOnly id is gone
			// (from required too); nullable, example, exclusiveMinimum are
			// translated; xml, externalDocs, discriminator and x- keywords
			// are dropped (a property called x-internal stays).
			schema: `{
				"type": "object",
				"properties": {
					"body": {
						"type": "object",
						"description": "The pet to add.",
						"required": ["name"],
						"properties": {
							"name": {"type": "string", "examples": ["Rex"], "pattern": "^[A-Z][a-z]+$"},
							"age": {"type": "integer", "exclusiveMinimum": 0},
							"tag": {"type": ["string", "null"]},
							"status": {"type": ["string", "null"], "enum": ["available", "sold", null]},
							"category": {
								"type": "object",
								"description": "A group of pets.",
								"properties": {"kind": {"type": "string"}, "name": {"type": "string"}}
							},
							"x-internal": {"type": "string"}
						}
					}
				},
				"required": ["body"],
				"additionalProperties": false
			}`,
		},
		{
			name: "pets__get_pets_petid",
			want: specView{
				Description: "GET /pets/{petId}",
				Method:      "GET",
				URL:         base + "/pets/{petId}",
				Headers:     srcHeaders,
			},
			schema: `{
				"type": "object",
				"properties": {"petId": ` + petID + `},
				"required": ["petId"],
				"additionalProperties": false
			}`,
		},
		{
			name: "pets__addNote",
			want: specView{
				Description: "Attach a note to a pet.",
				Method:      "POST",
				URL:         base + "/pets/{petId}/notes",
				Query:       map[string]string{"body": "{body}"},
				Headers: map[string]string{
					"X-Api-Key": "k{{1}}", "x-request-id": "from-source",
					"Content-Type": "application/vnd.petstore.note+json",
				},
				Body: `"{request_body}"`,
			},
			schema: `{
				"type": "object",
				"properties": {
					"petId": ` + petID + `,
					"body": {"type": "string", "maxLength": 500, "description": "The note's text."},
					"request_body": {
						"type": "object",
						"properties": {"author": {"type": ["string", "null"], "examples": ["ada"]}}
					}
				},
				"required": ["petId", "body"],
				"additionalProperties": false
			}`,
		},
	}
	if diff := cmp.Diff([]string{"pets__listPets", "pets__createPet", "pets__deletePet", "pets__get_pets_petid", "pets__addNote", "pets__uploadPhoto"}, specNames(specs)); diff != "" {
		t.Fatalf("tool names (-want +got):\n%s", diff)
	}
	// deletePet (a cookie parameter) and uploadPhoto (multipart) are
	// checked on the wire by TestWire*.
	specs = slices.DeleteFunc(specs, func(s rest.Spec) bool { return s.Name == "pets__deletePet" || s.Name == "pets__uploadPhoto" })
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := common(tc.want)
			want.Name = tc.name
			want.InputSchema = decodeJSON(t, tc.schema)
			if diff := cmp.Diff(want, viewOf(t, specs[i])); diff != "" {
				t.Errorf("Specs(petstore.yaml)[%d] mismatch (-want +got):\n%s", i, diff)
			}
		})
	}
}

// TestFromOpenAPISelection checks which tools and warnings each document
// and source setting gives.
func TestFromOpenAPISelection(t *testing.T) {
	tests := []struct {
		name             string
		file             string
		edit             func(*Source)
		wantNames        []string
		wantWarnings     []Warning
		wantURL0, wantB0 string
	}{
		{
			name:      "petstore, everything",
			file:      "petstore.yaml",
			wantNames: []string{"pets__listPets", "pets__createPet", "pets__deletePet", "pets__get_pets_petid", "pets__addNote", "pets__uploadPhoto"},
		},
		{
			name: "include globs",
			file: "petstore.yaml",
			edit: func(s *Source) { s.Include = []string{"*Pets", "GET /pets/*"} },
			// Only selected operations are converted, so no warnings; * crosses /.
			wantNames: []string{"pets__listPets", "pets__get_pets_petid"},
		},
		{
			name: "include then exclude",
			file: "petstore.yaml",
			edit: func(s *Source) {
				s.Include = []string{"*Pet*", "*Note"}
				s.Exclude = []string{"list*", "upload*"}
			},
			// Globs match tool names and operationIds alike.
			wantNames: []string{"pets__createPet", "pets__deletePet", "pets__addNote"},
		},
		{
			name:         "exclude only",
			file:         "petstore.yaml",
			edit:         func(s *Source) { s.Exclude = []string{"[a-f]*", "nothing*"} },
			wantNames:    []string{"pets__listPets", "pets__get_pets_petid", "pets__uploadPhoto"},
			wantWarnings: []Warning{{Msg: `exclude glob "nothing*" matches no operation; check it against toolgate tools, or remove it`}},
		},
		{
			name:      "OpenAPI 3.1 with BaseURL",
			file:      "openapi-31.yaml",
			edit:      func(s *Source) { s.BaseURL = "http://127.0.0.1:9000/inv/" },
			wantNames: []string{"pets__putItem"},
		},
		{
			name: "names: sanitized, shortened, duplicate, TRACE",
			file: "openapi-names.yaml",
			edit: func(s *Source) { s.BaseURL = "http://127.0.0.1:9000" },
			wantNames: []string{
				"pets__get_a_b",
				"pets__get_a_b_2",
				"pets__generateTheQuarterlyInventoryReportForEveryStoreI_f13d2d01",
				"pets__search_pets_by_name",
			},
			wantWarnings: []Warning{
				{Operation: "GET /a_b", Tool: "pets__get_a_b_2", Msg: "tool name pets__get_a_b is taken by GET /a-b; named pets__get_a_b_2"},
				{
					Operation: "GET /reports (generateTheQuarterlyInventoryReportForEveryStoreInEveryRegion)",
					Tool:      "pets__generateTheQuarterlyInventoryReportForEveryStoreI_f13d2d01",
					Msg:       "tool name pets__generateTheQuarterlyInventoryReportForEveryStoreInEveryRegion is longer than 64 characters; shortened to pets__generateTheQuarterlyInventoryReportForEveryStoreI_f13d2d01",
				},
				{Operation: "TRACE /trace (traceIt)", Tool: "pets__traceIt", Msg: "TRACE operations are not supported", Skipped: true},
			},
		},
		{
			name: "names do not depend on the selection",
			file: "openapi-names.yaml",
			edit: func(s *Source) { s.BaseURL = "http://127.0.0.1:9000"; s.Include = []string{"GET /a_b"} },
			// Still _2: GET /a-b, left out, keeps the name it would have.
			wantNames: []string{"pets__get_a_b_2"},
			wantWarnings: []Warning{
				{Operation: "GET /a_b", Tool: "pets__get_a_b_2", Msg: "tool name pets__get_a_b is taken by GET /a-b; named pets__get_a_b_2"},
			},
		},
		{
			name:      "recursive schema",
			file:      "openapi-recursive.yaml",
			wantNames: []string{"pets__plantTree"},
			wantWarnings: []Warning{{
				Operation: "POST /trees (plantTree)",
				Tool:      "pets__plantTree",
				Msg:       `schema references nest deeper than 10 levels at #/components/schemas/Node (a recursive schema); replaced with {"type":"object"} there`,
			}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := loadSource(t, tc.file)
			if tc.edit != nil {
				tc.edit(&src)
			}
			specs, warnings, err := Specs(src)
			if err != nil {
				t.Fatalf("Specs(%s) = %v", tc.file, err)
			}
			if diff := cmp.Diff(tc.wantNames, specNames(specs)); diff != "" {
				t.Errorf("Specs(%s) names (-want +got):\n%s", tc.file, diff)
			}
			if diff := cmp.Diff(tc.wantWarnings, warnings); diff != "" {
				t.Errorf("Specs(%s) warnings (-want +got):\n%s", tc.file, diff)
			}
		})
	}
}

// TestFromOpenAPIURL checks where each tool's URL comes from.
func TestFromOpenAPIURL(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		baseURL string
		want    []string
	}{
		{
			name: "server variable default",
			file: "petstore.yaml",
			want: []string{
				"https://eu.petstore.example/v1/pets", "https://eu.petstore.example/v1/pets",
				"https://eu.petstore.example/v1/pets/{petId}", "https://eu.petstore.example/v1/pets/{petId}", "https://eu.petstore.example/v1/pets/{petId}/notes", "https://eu.petstore.example/v1/pets/{petId}/photo",
			},
		},
		{
			name:    "BaseURL overrides servers, trailing slash dropped",
			file:    "petstore.yaml",
			baseURL: "http://127.0.0.1:9000/api/",
			want: []string{
				"http://127.0.0.1:9000/api/pets", "http://127.0.0.1:9000/api/pets",
				"http://127.0.0.1:9000/api/pets/{petId}", "http://127.0.0.1:9000/api/pets/{petId}", "http://127.0.0.1:9000/api/pets/{petId}/notes", "http://127.0.0.1:9000/api/pets/{petId}/photo",
			},
		},
		{
			name:    "3.1 document without servers",
			file:    "openapi-31.yaml",
			baseURL: "https://inventory.example",
			want:    []string{"https://inventory.example/items/{sku}"},
		},
		{
			name:    "relative server URL with BaseURL; sanitized query placeholder",
			file:    "openapi-names.yaml",
			baseURL: "http://127.0.0.1:9000",
			want: []string{
				"http://127.0.0.1:9000/a-b", "http://127.0.0.1:9000/a_b", "http://127.0.0.1:9000/reports", "http://127.0.0.1:9000/search",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := loadSource(t, tc.file)
			src.BaseURL = tc.baseURL
			specs, _, err := Specs(src)
			if err != nil {
				t.Fatalf("Specs(%s) = %v", tc.file, err)
			}
			var got []string
			for _, s := range specs {
				got = append(got, s.URL)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Specs(%s) URLs (-want +got):\n%s", tc.file, diff)
			}
		})
	}
}

// TestFromOpenAPISanitizedParameter checks that a parameter whose name is
// not a valid property name keeps its query key but gets a clean
// placeholder and property.
func TestFromOpenAPISanitizedParameter(t *testing.T) {
	src := loadSource(t, "openapi-names.yaml")
	src.BaseURL = "http://127.0.0.1:9000"
	specs, _, err := Specs(src)
	if err != nil {
		t.Fatalf("Specs = %v", err)
	}
	i := slices.IndexFunc(specs, func(s rest.Spec) bool { return s.Name == "pets__search_pets_by_name" })
	if i < 0 {
		t.Fatalf("Specs names = %v, want pets__search_pets_by_name among them", specNames(specs))
	}
	if diff := cmp.Diff(map[string]string{"filter[status]": "{filter_status}"}, specs[i].Query); diff != "" {
		t.Errorf("Query (-want +got):\n%s", diff)
	}
	want := decodeJSON(t, `{"type":"object","properties":{"filter_status":{"type":"string"}},"additionalProperties":false}`)
	if diff := cmp.Diff(want, viewOf(t, specs[i]).InputSchema); diff != "" {
		t.Errorf("InputSchema (-want +got):\n%s", diff)
	}
}

// TestFromOpenAPI31Schema checks an OpenAPI 3.1 schema: type arrays,
// const, examples and numeric exclusiveMinimum pass through; a sibling
// description of $ref applies.
func TestFromOpenAPI31Schema(t *testing.T) {
	src := loadSource(t, "openapi-31.yaml")
	src.BaseURL = "https://inventory.example"
	specs, _, err := Specs(src)
	if err != nil {
		t.Fatalf("Specs = %v", err)
	}
	if len(specs) != 1 {
		t.Fatalf("Specs names = %v, want one tool", specNames(specs))
	}
	want := decodeJSON(t, `{
		"type": "object",
		"properties": {
			"sku": {"type": "string", "const": "ABC"},
			"body": {
				"type": "object",
				"description": "The new item.",
				"required": ["name"],
				"properties": {
					"name": {"type": "string", "examples": ["widget"]},
					"price": {"type": ["number", "null"], "exclusiveMinimum": 0}
				}
			}
		},
		"required": ["sku", "body"],
		"additionalProperties": false
	}`)
	if diff := cmp.Diff(want, viewOf(t, specs[0]).InputSchema); diff != "" {
		t.Errorf("InputSchema (-want +got):\n%s", diff)
	}
	if got := specs[0].Method; got != "PUT" {
		t.Errorf("Method = %q, want PUT", got)
	}
}

// TestFromOpenAPIRecursion checks that a recursive schema is inlined to
// depth 10 and then cut to {"type":"object"}.
func TestFromOpenAPIRecursion(t *testing.T) {
	specs, _, err := Specs(loadSource(t, "openapi-recursive.yaml"))
	if err != nil {
		t.Fatalf("Specs = %v", err)
	}
	if len(specs) != 1 {
		t.Fatalf("Specs names = %v, want one tool", specNames(specs))
	}
	node := viewOf(t, specs[0]).InputSchema.(map[string]any)["properties"].(map[string]any)["body"]
	depth := 0
	for {
		m := node.(map[string]any)
		props, ok := m["properties"].(map[string]any)
		if !ok {
			if diff := cmp.Diff(map[string]any{"type": "object"}, m); diff != "" {
				t.Errorf("schema at depth %d (-want +got):\n%s", depth, diff)
			}
			break
		}
		depth++
		node = props["children"].(map[string]any)["items"]
	}
	if depth != oapiMaxRefDepth {
		t.Errorf("Node inlined %d levels deep, want %d", depth, oapiMaxRefDepth)
	}
}

// TestFromOpenAPIErrors checks documents and sources that give no tools.
func TestFromOpenAPIErrors(t *testing.T) {
	tests := []struct {
		name     string
		file     string // "" means spec below
		spec     string
		edit     func(*Source)
		wantErr  error // matched with errors.Is; nil means only *Error
		location string
	}{
		{name: "not OpenAPI", spec: "just: [a, list", location: "https://specs.example/broken.yaml"},
		{name: "missing openapi version", spec: "info: {title: x, version: '1'}\npaths: {}\n", location: "inline.yaml"},
		{
			name: "external reference refused",
			spec: `openapi: 3.0.3
info: {title: x, version: "1"}
servers: [{url: "http://127.0.0.1:9000"}]
paths:
  /a:
    post:
      requestBody:
        content:
          application/json:
            schema: {$ref: "other.yaml#/Thing"}
      responses: {"200": {description: OK}}
`,
			location: "refs.yaml",
		},
		{name: "relative server and no BaseURL", file: "openapi-names.yaml", wantErr: ErrNoBaseURL},
		{name: "no servers and no BaseURL", file: "openapi-31.yaml", wantErr: ErrNoBaseURL},
		{
			name:    "relative BaseURL",
			file:    "petstore.yaml",
			edit:    func(s *Source) { s.BaseURL = "/api" },
			wantErr: nil,
		},
		{
			name:    "bad glob",
			file:    "petstore.yaml",
			edit:    func(s *Source) { s.Exclude = []string{"[list"} },
			wantErr: errBadGlob,
		},
		{
			name: "bad source name",
			file: "petstore.yaml",
			edit: func(s *Source) { s.Name = "pet store" },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var src Source
			if tc.file != "" {
				src = loadSource(t, tc.file)
			} else {
				src = Source{Name: "pets", Spec: []byte(tc.spec), Location: tc.location}
			}
			if tc.edit != nil {
				tc.edit(&src)
			}
			specs, warnings, err := Specs(src)
			if err == nil {
				t.Fatalf("Specs(%s) = %d specs, %d warnings, nil error; want an error", src.Location, len(specs), len(warnings))
			}
			oe, ok := errors.AsType[*Error](err)
			if !ok {
				t.Fatalf("Specs(%s) = %T %v, want *Error", src.Location, err, err)
			}
			if oe.Location != src.Location || oe.Source != src.Name {
				t.Errorf("Error{Source: %q, Location: %q}, want %q, %q", oe.Source, oe.Location, src.Name, src.Location)
			}
			if !strings.Contains(err.Error(), src.Location) {
				t.Errorf("Specs(%s) = %q, want the location in the message", src.Location, err)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("Specs(%s) = %v, want errors.Is %v", src.Location, err, tc.wantErr)
			}
			if specs != nil || warnings != nil {
				t.Errorf("Specs(%s) returned specs or warnings with an error", src.Location)
			}
		})
	}
}

// TestFromOpenAPISchemasCompile checks that every input schema made from
// the test documents compiles, and that tool names follow MCP's rule.
func TestFromOpenAPISchemasCompile(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	nameRE := regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	seen := 0
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src := loadSource(t, filepath.Base(f))
			src.BaseURL = "http://127.0.0.1:9000"
			specs, _, err := Specs(src)
			if err != nil {
				if filepath.Base(f) == "openapi-invalid.yaml" {
					return
				}
				t.Fatalf("Specs(%s) = %v", f, err)
			}
			for _, s := range specs {
				seen++
				if !nameRE.MatchString(s.Name) {
					t.Errorf("tool name %q does not match %s", s.Name, nameRE)
				}
				if _, err := schemas.Compile(s.InputSchema); err != nil {
					t.Errorf("schemas.Compile(%s input schema) = %v\n%s", s.Name, err, s.InputSchema)
				}
			}
		})
	}
	if seen < 8 {
		t.Errorf("compiled %d schemas, want at least 8: are the testdata files there?", seen)
	}
}

func TestOpenAPINames(t *testing.T) {
	tests := []struct {
		method, path, opID string
		want               string
	}{
		{"GET", "/pets/{petId}", "", "pets__get_pets_petid"},
		{"DELETE", "/", "", "pets__delete"},
		{"PATCH", "/v2/Users/{user-id}/tags.json", "", "pets__patch_v2_users_user_id_tags_json"},
		{"GET", "/x", "getX", "pets__getX"},
		{"GET", "/x", "get.x-y_z", "pets__get.x-y_z"},
		{"GET", "/x", "  list all (v2)! ", "pets__list_all_v2"},
		{"GET", "/x", strings.Repeat("a", 58), "pets__" + strings.Repeat("a", 58)},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			id := tc.opID
			if oapiSanitize(id) == "" {
				id = oapiDerivedName(tc.method, tc.path)
			}
			got, shortened, ok := registry.ShortName("pets__" + oapiSanitize(id))
			if got != tc.want || shortened || !ok {
				t.Errorf("registry.ShortName(pets, %q) = %q, %v, %v, want %q, false, true", id, got, shortened, ok, tc.want)
			}
		})
	}
}

// FuzzFromOpenAPI checks that no document makes Specs panic, and
// that what it returns is well formed.
func FuzzFromOpenAPI(f *testing.F) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	nameRE := regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	f.Fuzz(func(t *testing.T, doc []byte) {
		specs, _, err := Specs(Source{Name: "f", Spec: doc, BaseURL: "http://127.0.0.1:9000"})
		if err != nil {
			return
		}
		for _, s := range specs {
			if !nameRE.MatchString(s.Name) {
				t.Errorf("tool name %q does not match %s", s.Name, nameRE)
			}
			if !json.Valid(s.InputSchema) {
				t.Errorf("%s: InputSchema is not JSON: %s", s.Name, s.InputSchema)
			}
		}
	})
}

// TestAddSpecs checks that the REST executor accepts every Spec Specs makes
// from the test documents.
func TestAddSpecs(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e := rest.New(nil)
	t.Cleanup(e.Close)
	added := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src := Source{Name: strings.TrimSuffix(filepath.Base(f), ".yaml"), Spec: b, Location: f, BaseURL: "http://127.0.0.1:9000/api"}
		specs, _, err := Specs(src)
		if err != nil {
			continue // the invalid document
		}
		for _, s := range specs {
			if _, _, err := e.Add(s); err != nil {
				t.Errorf("Add(%s from %s) = %v", s.Name, f, err)
			}
			added++
		}
	}
	if added == 0 {
		t.Error("no spec added: are the testdata documents there?")
	}
}

// TestSpecsDocumentProblem checks that a problem in one operation skips
// that operation only, with its reason, and that the document's own
// validation failure is a warning, not an error.
func TestSpecsDocumentProblem(t *testing.T) {
	specs, warnings, err := Specs(loadSource(t, "openapi-invalid.yaml"))
	if err != nil {
		t.Fatalf("Specs(openapi-invalid.yaml) = %v, want warnings only", err)
	}
	if len(specs) != 0 {
		t.Errorf("Specs(openapi-invalid.yaml) = %d specs, want 0", len(specs))
	}
	if len(warnings) != 2 || warnings[0].Operation != "" || warnings[0].Skipped ||
		!strings.Contains(warnings[0].Msg, "the document does not validate") ||
		warnings[1].Operation != "GET /things/{id} (getThing)" || !warnings[1].Skipped ||
		warnings[1].Msg != "path placeholder {id} has no path parameter" {
		t.Errorf("warnings = %q, want the document's problem, then getThing skipped for its placeholder", warnings)
	}
}

// TestSpecs31KeywordsIn30 checks that a document that says 3.0 but uses
// 3.1 keywords in a parameter (as many real ones do) keeps the operation.
func TestSpecs31KeywordsIn30(t *testing.T) {
	doc := `openapi: 3.0.3
info: {title: x, version: "1"}
servers: [{url: "http://127.0.0.1:9"}]
paths:
  /a/{id}:
    get:
      operationId: a
      parameters:
        - {name: id, in: path, required: true, schema: {type: string, examples: ["x"]}}
      responses: {"200": {description: OK}}
`
	specs, warnings, err := Specs(Source{Name: "s", Spec: []byte(doc)})
	if err != nil || len(specs) != 1 {
		t.Fatalf("Specs = %d specs, %q, %v; want the operation kept", len(specs), warnings, err)
	}
	for _, w := range warnings {
		if w.Skipped {
			t.Errorf("warning %s", w)
		}
	}
}

// TestSpecsRepairs checks that shapes kin-openapi cannot decode (a schema
// $ref to a response, a pattern that is a number) are repaired with a
// warning instead of refusing the document.
func TestSpecsRepairs(t *testing.T) {
	doc := `{"openapi": "3.0.3", "info": {"title": "x", "version": "1"},
"servers": [{"url": "http://127.0.0.1:9"}],
"components": {"responses": {"Err": {"description": "e"}}},
"paths": {"/a": {"post": {"operationId": "a",
  "requestBody": {"content": {"application/json": {"schema": {"type": "object", "properties": {
    "code": {"type": "string", "pattern": 5}, "err": {"$ref": "#/components/responses/Err"}}}}}},
  "responses": {"200": {"description": "OK"}}}}}}`
	specs, warnings, err := Specs(Source{Name: "s", Spec: []byte(doc)})
	if err != nil || len(specs) != 1 {
		t.Fatalf("Specs = %d specs, %q, %v; want the document repaired", len(specs), warnings, err)
	}
	var repaired []string
	for _, w := range warnings {
		if strings.HasPrefix(w.Msg, "the document was repaired to load: ") {
			repaired = append(repaired, strings.TrimPrefix(w.Msg, "the document was repaired to load: "))
		}
	}
	want := []string{
		"dropped 1 schema patterns that are not strings",
		"dropped 1 references to #/components/responses/Err, which is the wrong kind of object there",
	}
	if diff := cmp.Diff(want, repaired); diff != "" {
		t.Errorf("repairs (-want +got):\n%s\nall warnings: %q", diff, warnings)
	}
}

// TestSpecsRelativeServerFromURL checks that a relative server URL is
// resolved against the URL the document came from, and that server
// variables without a default take their first enum value.
func TestSpecsRelativeServerFromURL(t *testing.T) {
	for _, tc := range []struct{ servers, location, want string }{
		{`[{url: /v2}]`, "https://api.example.com/specs/openapi.yaml", "https://api.example.com/v2/a"},
		{`[{url: "https://{region}.example.com", variables: {region: {enum: [eu, us]}}}]`, "", "https://eu.example.com/a"},
		{`[{url: /v2}, {url: "http://127.0.0.1:9/x"}]`, "spec.yaml", "http://127.0.0.1:9/x/a"},
	} {
		doc := "openapi: 3.0.3\ninfo: {title: x, version: '1'}\nservers: " + tc.servers +
			"\npaths:\n  /a:\n    get:\n      operationId: a\n      responses: {'200': {description: OK}}\n"
		specs, _, err := Specs(Source{Name: "s", Spec: []byte(doc), Location: tc.location})
		if err != nil || len(specs) != 1 || specs[0].URL != tc.want {
			t.Errorf("servers %s from %q: %v, %v; want URL %s", tc.servers, tc.location, specs, err, tc.want)
		}
	}
}

// TestSpecsWithOperations checks what a catalog searches: each spec's
// operation, its path as written, tags, and a one-line summary without
// HTML (the summary, else the description's first line, else METHOD
// path).
func TestSpecsWithOperations(t *testing.T) {
	doc := `openapi: 3.0.3
info: {title: t, version: "1"}
servers: [{url: "http://127.0.0.1:9"}]
paths:
  /a#v1:
    get:
      operationId: getA
      tags: [x, y]
      summary: "<p>Returns   the <b>list</b>.</p>"
      responses: {"200": {description: OK}}
  /b:
    post:
      description: "First line.\nSecond line."
      responses: {"200": {description: OK}}
    delete:
      responses: {"200": {description: OK}}
`
	specs, ops, _, err := SpecsWithOperations(Source{Name: "s", Spec: []byte(doc)})
	if err != nil {
		t.Fatal(err)
	}
	want := []Operation{
		{Method: "GET", Path: "/a#v1", OperationID: "getA", Tags: []string{"x", "y"}, Summary: "Returns the list.", Tool: "s__getA"},
		{Method: "DELETE", Path: "/b", Summary: "DELETE /b", Tool: "s__delete_b"},
		{Method: "POST", Path: "/b", Summary: "First line.", Tool: "s__post_b"},
	}
	if diff := cmp.Diff(want, ops); diff != "" || len(specs) != len(ops) {
		t.Errorf("SpecsWithOperations operations (-want +got):\n%s", diff)
	}
}

// TestSpecsSchemaCap checks that an input schema whose references inline
// to more than oapiMaxSchemaBytes is inlined to fewer levels until it
// fits, with a warning saying so.
func TestSpecsSchemaCap(t *testing.T) {
	// Node has three references to itself and a long description: inlined
	// ten levels deep it passes the cap many times over.
	doc := `openapi: 3.0.3
info: {title: t, version: "1"}
servers: [{url: "http://127.0.0.1:9"}]
paths:
  /nodes:
    post:
      operationId: addNode
      requestBody:
        content:
          application/json:
            schema: {$ref: "#/components/schemas/Node"}
      responses: {"200": {description: OK}}
components:
  schemas:
    Node:
      type: object
      description: "` + strings.Repeat("A node of the tree. ", 50) + `"
      properties:
        left: {$ref: "#/components/schemas/Node"}
        right: {$ref: "#/components/schemas/Node"}
        parent: {$ref: "#/components/schemas/Node"}
`
	specs, warnings, err := Specs(Source{Name: "s", Spec: []byte(doc)})
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 1 {
		t.Fatalf("Specs = %v, want one tool", specNames(specs))
	}
	if n := len(specs[0].InputSchema); n > oapiMaxSchemaBytes {
		t.Errorf("InputSchema is %d bytes, over the cap of %d", n, oapiMaxSchemaBytes)
	}
	if _, err := schemas.Compile(specs[0].InputSchema); err != nil {
		t.Errorf("the cut schema does not compile: %v", err)
	}
	var notes []string
	for _, w := range warnings {
		notes = append(notes, w.String())
	}
	want := regexp.MustCompile(`^POST /nodes \(addNode\): the input schema with its references inlined is over 128 KiB; references nested deeper than [0-9] levels are replaced with \{"type":"object"\}$`)
	if !slices.ContainsFunc(notes, want.MatchString) {
		t.Errorf("warnings = %q, want one matching %s", notes, want)
	}
}

// TestDocumentOutline checks that an operation's outline is its Spec
// without the input schema, and that both skip the same operations.
func TestDocumentOutline(t *testing.T) {
	for _, file := range []string{"petstore.yaml", "openapi-recursive.yaml", "openapi-31.yaml", "openapi-invalid.yaml", "wire.yaml", "swagger2.yaml"} {
		t.Run(file, func(t *testing.T) {
			src := loadSource(t, file)
			src.BaseURL = "http://127.0.0.1:9"
			d, err := Open(src)
			if err != nil {
				t.Fatal(err)
			}
			if d.Len() == 0 {
				t.Fatal("no operations")
			}
			for i := range d.Len() {
				full, _, okFull := d.Spec(i)
				outline, ws, ok := d.Outline(i)
				if ok != okFull {
					t.Fatalf("operation %d: Outline ok = %v, Spec ok = %v (%v)", i, ok, okFull, ws)
				}
				if !ok {
					continue
				}
				if outline.InputSchema != nil {
					t.Errorf("%s: Outline has an input schema", outline.Name)
				}
				if full.InputSchema == nil {
					t.Errorf("%s: Spec has no input schema", full.Name)
				}
				full.InputSchema = nil
				if diff := cmp.Diff(full, outline); diff != "" {
					t.Errorf("%s: Outline differs from Spec (-spec +outline):\n%s", full.Name, diff)
				}
				if op := d.Operation(i); op.Tool != full.Name {
					t.Errorf("Operation(%d).Tool = %q, want %q", i, op.Tool, full.Name)
				}
			}
		})
	}
}
