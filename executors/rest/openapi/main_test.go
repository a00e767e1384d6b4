package openapi

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: every wire
// test closes its executor and its httptest server.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
