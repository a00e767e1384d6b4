package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// A cancelled or timed-out call stays one after its key is redacted, even
// when the key is a substring of the context error's own text: the CLI
// tells an interrupt (exit 130) from a failure with errors.Is.
func TestRedactKeyKeepsContextErrors(t *testing.T) {
	for _, cause := range []error{context.Canceled, context.DeadlineExceeded} {
		for _, key := range []string{"x", "e", "sk-0123456789"} {
			err := redactKey(fmt.Errorf("POST https://api.test/v1?key=%s: %w", key, cause), key)
			if strings.Contains(strings.ReplaceAll(err.Error(), "[redacted]", ""), key) {
				t.Errorf("key %q: error %q holds it", key, err)
			}
			if !errors.Is(err, cause) {
				t.Errorf("key %q: redacted error %q is no longer %v", key, err, cause)
			}
		}
	}
}
