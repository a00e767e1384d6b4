// Package openapi turns the operations of an OpenAPI document into REST
// tool specs ([rest.Spec]) for the REST executor: [Specs] parses the
// document with kin-openapi (3.0 and 3.1; Swagger 2.0 converted with
// openapi2conv; JSON or YAML; $refs to local files next to the spec, never
// URLs), selects operations with include and exclude globs, names each
// tool <source>__<operationId> within MCP's 64 characters, inlines every
// $ref of a request into the tool's input schema, and describes how each
// parameter and request body is sent ([rest.Param], [rest.Payload]) and
// which credentials each operation carries.
//
// A problem in one operation skips that operation only, and a problem
// elsewhere in the document is a [Warning]: only a document that cannot
// be read at all is an [*Error].
//
// openapi is the only toolgate package that imports kin-openapi. It must
// not import gateway or config: the gateway reads the document and passes
// it in a [Source].
package openapi
