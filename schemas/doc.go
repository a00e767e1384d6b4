// Package schemas compiles JSON Schemas once and validates decoded JSON
// values against them, turning every violation into short English text a
// model can act on.
//
// It owns the choice of JSON Schema library and its settings; no other
// toolgate package imports github.com/santhosh-tekuri/jsonschema. It imports
// only the standard library and that library, and must not import any
// toolgate package.
//
// # Decisions
//
//   - Draft 2020-12 is used unless the schema's "$schema" names another
//     draft that the library knows.
//   - Nothing is ever loaded from the network or the disk: a "$ref" (or
//     "$schema", "$dynamicRef") that points outside the schema document
//     makes [Compile] fail, saying where the reference is.
//   - "format" annotates only, in every draft: a string that is not a valid
//     "email" passes. Format assertion is optional in 2020-12, the set of
//     formats differs between validators, and a model cannot tell why an
//     upstream's own check would disagree with ours. Servers that care
//     check formats themselves.
//   - "contentEncoding" and "contentMediaType" annotate only as well.
//   - The root schema must describe an object, as MCP requires of a tool's
//     inputSchema and outputSchema.
//   - Text shown to a model never echoes large values: every quoted value
//     is cut to 80 bytes, and pointer tokens longer than 80 bytes are cut
//     the same way, so such a pointer is for reading, not for resolving.
package schemas
