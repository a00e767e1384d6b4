package auth

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: every test
// closes its issuer (httptest server and its client's idle connections),
// and go-oidc's key fetches finish with the request that started them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
