package oauthclient

import (
	"errors"
	"fmt"

	"golang.org/x/oauth2"
)

// NeedsAuthError is the error of a request to an upstream that needs a
// person to authorize it: no token was ever obtained, or its refresh
// token was refused. Its message names the command to run.
type NeedsAuthError struct {
	Upstream string
	// Command is what the operator runs to authorize, such as
	// `toolgate auth login linear --config toolgate.yaml`.
	Command string
	// Reason says why, in a few words ("no token yet", "the refresh token
	// was refused").
	Reason string
	// URL, with per-principal authorization, is the link the principal
	// opens to authorize; "" otherwise.
	URL string
}

func (e *NeedsAuthError) Error() string {
	if e.URL != "" {
		return fmt.Sprintf("upstream %q needs your authorization (%s): open %s in a browser, then call again", e.Upstream, e.Reason, e.URL)
	}
	return fmt.Sprintf("upstream %q needs authorization (%s): run `%s`", e.Upstream, e.Reason, e.Command)
}

// StepError is a failure of one step of an OAuth flow: discovery,
// registration, authorization, token or refresh.
type StepError struct {
	Upstream string
	Step     string
	Err      error
}

func (e *StepError) Error() string {
	return fmt.Sprintf("upstream %q: OAuth %s: %s", e.Upstream, e.Step, e.Err)
}

func (e *StepError) Unwrap() error { return e.Err }

// tokenError rewrites an error of x/oauth2's token requests so that it
// says what the server answered (the error code and description) but
// never echoes the response body, which may hold a token.
func tokenError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		if re.ErrorCode != "" {
			if re.ErrorDescription != "" {
				return fmt.Errorf("the token endpoint answered %s: %s", re.ErrorCode, re.ErrorDescription)
			}
			return fmt.Errorf("the token endpoint answered %s", re.ErrorCode)
		}
		if re.Response != nil {
			return fmt.Errorf("the token endpoint answered HTTP %d", re.Response.StatusCode)
		}
	}
	return err
}

// isInvalidGrant reports whether err is the token endpoint refusing a
// grant (a revoked or expired refresh token).
func isInvalidGrant(err error) bool {
	var re *oauth2.RetrieveError
	return errors.As(err, &re) && (re.ErrorCode == "invalid_grant" || (re.ErrorCode == "" && re.Response != nil && re.Response.StatusCode == 400))
}
