// Package configtest holds what tests of several packages need to build a
// configuration: a document written line by line, parsed in a working
// directory of its own with the files it names.
package configtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/config"
)

// TinyOpenAPI is a valid OpenAPI document with one operation, list.
const TinyOpenAPI = `openapi: 3.0.3
info: {title: t, version: "1"}
servers: [{url: "http://127.0.0.1:9/"}]
paths:
  /list:
    get:
      operationId: list
      responses: {"200": {description: OK}}
`

// ShopOpenAPI is a small OpenAPI document of three operations in two tags
// (listPets, createPet, getOrder), for the tests of catalog: search.
const ShopOpenAPI = `openapi: 3.0.3
info: {title: shop, version: "1"}
servers: [{url: "http://127.0.0.1:9/"}]
paths:
  /pets:
    get:
      operationId: listPets
      summary: List every pet in the shop
      tags: [pets]
      parameters:
        - {name: limit, in: query, schema: {type: integer, maximum: 100}}
      responses: {"200": {description: OK}}
    post:
      operationId: createPet
      summary: Add a pet
      tags: [pets]
      requestBody:
        required: true
        content:
          application/json:
            schema: {type: object, required: [name], properties: {name: {type: string}}}
      responses: {"200": {description: OK}}
  /orders/{id}:
    get:
      operationId: getOrder
      summary: Read an order
      tags: [store]
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
      responses: {"200": {description: OK}}
`

// Lines joins lines into a YAML document, so positions in a test case can
// be read off line by line.
func Lines(lines ...string) []byte { return []byte(strings.Join(lines, "\n") + "\n") }

// ParseIn writes files into a fresh working directory, changes to it for
// the rest of the test, and parses in as t.yaml there; a problem fails t.
func ParseIn(t *testing.T, in []byte, files map[string]string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	cfg, err := config.Parse("t.yaml", in, nil)
	if err != nil {
		t.Fatalf("config.Parse = %v", err)
	}
	return cfg
}
