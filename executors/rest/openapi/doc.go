// Package openapi turns the operations of an OpenAPI 3 document into REST
// tool specs ([rest.Spec]) for the REST executor: [Specs] parses and
// validates the document with kin-openapi (3.0 and 3.1, external $refs
// refused), selects operations with a [registry.Filter], names each tool
// <source>__<operationId> within MCP's 64 characters, and inlines every
// $ref of a request into the tool's input schema.
//
// openapi is the only toolgate package that imports kin-openapi. It must
// not import gateway or config: the gateway reads the document and passes
// it in a [Source].
package openapi
