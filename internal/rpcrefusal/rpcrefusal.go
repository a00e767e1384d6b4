// Package rpcrefusal writes an HTTP refusal of an MCP endpoint the way MCP
// clients read one: the status, and a JSON-RPC error with no id whose
// message says what is needed. The Host and Origin rules, authentication
// and an endpoint's principals refuse through it, so that a client shows
// the same kind of answer whichever refused it.
package rpcrefusal

import (
	"encoding/json"
	"net/http"
)

// Codes of the refusals (JSON-RPC's implementation-defined server errors,
// and its invalid request).
const (
	// Unauthorized is the code of a request that needs (other)
	// credentials, and of one whose credentials may not use the endpoint.
	Unauthorized = -32001
	// InvalidRequest is the code of a request the endpoint refuses for
	// where it comes from (its Host or Origin).
	InvalidRequest = -32600
)

// Write answers with status and a JSON-RPC error of code carrying msg. The
// caller sets any other header (WWW-Authenticate, Retry-After) first.
func Write(w http.ResponseWriter, status, code int, msg string) {
	type rpcError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	body, _ := json.Marshal(struct { // a string and an int: cannot fail
		JSONRPC string   `json:"jsonrpc"`
		ID      *string  `json:"id"`
		Error   rpcError `json:"error"`
	}{"2.0", nil, rpcError{code, msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
