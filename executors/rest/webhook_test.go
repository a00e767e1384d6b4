package rest

import (
	"errors"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestWebhookTransportErrorRedacted pins down that a transport failure's
// text, which names the host the transport dialled, never shows a
// secret, while the cause stays reachable for errors.As.
func TestWebhookTransportErrorRedacted(t *testing.T) {
	srv := httptest.NewServer(nil)
	addr := srv.Listener.Addr().String()
	srv.Close() // nothing listens there any more: the dial is refused

	e := New(nil)
	defer e.Close()
	w, err := e.Webhook(WebhookSpec{URL: "http://" + addr + "/hook", Secrets: []string{addr}})
	if err != nil {
		t.Fatalf("Webhook() = %v", err)
	}
	_, err = w.Post(t.Context(), []byte(`{}`))
	if err == nil {
		t.Fatal("Post() = nil error, want a refused connection")
	}
	if strings.Contains(err.Error(), addr) {
		t.Errorf("Post() error = %q, shows the secret %q", err, addr)
	}
	if _, ok := errors.AsType[net.Error](err); !ok {
		t.Errorf("Post() error = %v, want one wrapping a net.Error", err)
	}
}
