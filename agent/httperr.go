package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/toolgate/toolgate/retry"
)

// statusError classifies a provider's HTTP error response: its status
// (or, for an error sent inside a stream, the provider's error type) gives
// the class, Retry-After the wait. The message names the provider and what
// it said, never the request (whose URL or headers may hold a key).
func statusError(provider string, status int, h http.Header, errType, msg string) *retry.Error {
	c := retry.Internal
	switch {
	case status == http.StatusTooManyRequests || errType == "rate_limit_error":
		c = retry.RateLimited
	case status == 529 || errType == "overloaded_error" || errType == "api_error" || status >= 500:
		c = retry.Unavailable
	case status == http.StatusRequestTimeout:
		c = retry.Timeout
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		c = retry.Permission
	case status == http.StatusNotFound:
		c = retry.NotFound
	case status >= 400 && status < 500:
		c = retry.Validation
	}
	var wait time.Duration
	if h != nil {
		wait, _ = retry.ParseRetryAfter(h.Get("Retry-After"), time.Now())
	}
	text := msg
	if text == "" {
		text = http.StatusText(status)
	}
	if status != 0 && status != http.StatusOK {
		text = fmt.Sprintf("%d %s", status, text)
	}
	hint := ""
	switch c {
	case retry.Permission:
		hint = "; check the API key"
	case retry.NotFound:
		hint = "; check the model name and the base URL"
	}
	return &retry.Error{Class: c, Op: provider, Msg: text + hint, RetryAfter: wait, Status: status}
}

// transportError classifies an error that is not an HTTP response: ctx's
// own error stays as it is (cancelled or timeout); anything else from the
// connection is network.
func transportError(ctx context.Context, provider string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if c := retry.Classify(err); c != retry.Internal {
		return &retry.Error{Class: c, Op: provider, Err: err}
	}
	return &retry.Error{Class: retry.Network, Op: provider, Err: err}
}

// cutError is the error of a stream that ended without its end marker.
func cutError(provider, marker string) *retry.Error {
	return retry.Errorf(retry.Network, "%s: the stream ended before %s", provider, marker)
}

// redactKey returns err with every occurrence of the API key replaced: a
// compatible server may echo the key it refused in its error message, and
// a base URL may carry one in its query. The class, Retry-After and status
// are kept; the chain below is dropped, since its texts hold the key,
// except a context's error, which the caller tells cancellation by.
func redactKey(err error, key string) error {
	if err == nil || key == "" || !strings.Contains(err.Error(), key) {
		return err
	}
	re := &retry.Error{Class: retry.Classify(err), Msg: strings.ReplaceAll(err.Error(), key, "[redacted]")}
	if e, ok := errors.AsType[*retry.Error](err); ok {
		re.RetryAfter, re.Status = e.RetryAfter, e.Status
	}
	for _, cause := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, cause) {
			re.Err = cause
		}
	}
	return re
}
