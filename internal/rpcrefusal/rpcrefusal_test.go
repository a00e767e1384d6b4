package rpcrefusal

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestWrite(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Header().Set("WWW-Authenticate", `Bearer realm="x"`)
	Write(rec, http.StatusForbidden, Unauthorized, `endpoint "ops" is not open to "alice"`)
	want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"endpoint \"ops\" is not open to \"alice\""}}`
	if rec.Code != http.StatusForbidden || rec.Body.String() != want ||
		rec.Header().Get("Content-Type") != "application/json" || rec.Header().Get("WWW-Authenticate") == "" {
		t.Errorf("got %d %v %s; want 403, JSON, the caller's header kept, %s", rec.Code, rec.Header(), rec.Body, want)
	}
}
