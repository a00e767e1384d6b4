package oauthclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// MaxMetadataBytes caps a metadata, registration or token response: an
// authorization server that sends more is refused rather than read.
const MaxMetadataBytes = 1 << 20

// errNotFound is a metadata location that answered 404 (or another 4xx):
// discovery tries the next one.
var errNotFound = errors.New("not found")

// safeClient returns a client on base that follows no redirect to another
// host: metadata and token endpoints are where the server said they are,
// and a redirect elsewhere is an attack or a misconfiguration.
func safeClient(base http.RoundTripper) *http.Client {
	return &http.Client{
		Transport: base,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("too many redirects")
			}
			if req.URL.Host != via[0].URL.Host {
				return fmt.Errorf("redirected from %s to another host, %s; refusing", via[0].URL.Host, req.URL.Host)
			}
			return nil
		},
	}
}

// getJSON fetches u and decodes its JSON body into v. A 4xx answer is
// errNotFound (wrapped); a body over MaxMetadataBytes is an error.
func getJSON(ctx context.Context, hc *http.Client, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 && resp.StatusCode < 500 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxMetadataBytes))
		return fmt.Errorf("%s: %w (HTTP %d)", redactURL(u), errNotFound, resp.StatusCode)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered HTTP %d", redactURL(u), resp.StatusCode)
	}
	return decodeLimited(resp.Body, u, v)
}

// decodeLimited decodes at most MaxMetadataBytes of JSON from r into v.
func decodeLimited(r io.Reader, u string, v any) error {
	b, err := io.ReadAll(io.LimitReader(r, MaxMetadataBytes+1))
	if err != nil {
		return fmt.Errorf("reading %s: %w", redactURL(u), err)
	}
	if len(b) > MaxMetadataBytes {
		return fmt.Errorf("%s sent more than %d bytes; refusing it", redactURL(u), MaxMetadataBytes)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s is not valid JSON: %w", redactURL(u), err)
	}
	return nil
}

// redactURL is u without its query, fragment and user information, for
// messages: a query may carry a code or a token.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(an invalid URL)"
	}
	p.RawQuery, p.Fragment, p.User = "", "", nil
	return p.String()
}

// origin is the scheme and host of u, with no path.
func origin(u *url.URL) string { return u.Scheme + "://" + u.Host }

// trimSlash drops the trailing slashes of an issuer or resource URL, so
// that "https://as.example/" and "https://as.example" compare equal.
func trimSlash(s string) string { return strings.TrimRight(s, "/") }
