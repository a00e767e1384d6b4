package rest

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: every test
// closes its executor (idle connections) and its httptest servers.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
