package auth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// refetchEvery bounds how often toolgate fetches the issuer's JWKS, and
// how long a failed fetch is remembered.
const refetchEvery = 5 * time.Second

// maxFetchBytes caps every document fetched from the issuer (discovery and
// JWKS): a larger one is refused, before reading when its Content-Length
// says so (issue 31, item 8).
const maxFetchBytes = 1 << 20

// maxRedirects bounds the redirects of one fetch from the issuer.
const maxRedirects = 5

// fetchClient returns a copy of c for fetches from the issuer: every
// response body capped at maxFetchBytes, and redirects followed only
// within the origin first asked.
func fetchClient(c *http.Client) *http.Client {
	fc := *c
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	fc.Transport = cappedTransport{base: base}
	fc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		return redirectRefused(via[0].URL, req.URL, len(via))
	}
	return &fc
}

// redirectRefused is why a fetch of from may not follow its redirect
// number hops to to: another origin (a JWKS elsewhere would escape the
// cache and be a way to make toolgate fetch anything), or too many hops;
// nil when it may.
func redirectRefused(from, to *url.URL, hops int) error {
	switch {
	case to.Scheme != from.Scheme || to.Host != from.Host:
		return fmt.Errorf("the issuer's %s redirected to another origin (%s://%s); toolgate follows redirects only within one origin", from.Redacted(), to.Scheme, to.Host)
	case hops >= maxRedirects:
		return fmt.Errorf("the issuer's %s redirected more than %d times", from.Redacted(), maxRedirects)
	}
	return nil
}

// cappedTransport caps the bodies of its responses at maxFetchBytes.
type cappedTransport struct{ base http.RoundTripper }

func (t cappedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength > maxFetchBytes {
		resp.Body.Close()
		return nil, fmt.Errorf("the issuer's %s is %d bytes; toolgate reads at most %d", req.URL.Redacted(), resp.ContentLength, maxFetchBytes)
	}
	resp.Body = http.MaxBytesReader(nil, resp.Body, maxFetchBytes)
	return resp, nil
}

// jwksCache is the transport go-oidc's remote key set fetches the JWKS
// through. go-oidc refetches the JWKS for every token whose key it does
// not hold, so a client sending tokens with made-up key IDs would have
// toolgate hammer the identity provider; through jwksCache a fetch within
// refetchEvery of the last one gets that one's outcome again (a document,
// or a failure), one fetch runs at a time and its waiters share it, and
// the provider is asked no more than once per interval. It follows the
// JWKS's redirects itself, within its origin, so that a redirect cannot
// escape the cache. After a real key rotation, tokens signed with the new
// key may be refused for up to refetchEvery.
type jwksCache struct {
	base http.RoundTripper // capped (fetchClient)
	url  string
	now  func() time.Time

	flight singleflight.Group // one fetch at a time

	mu   sync.Mutex // guards last
	last *jwksFetch // the last fetch's outcome; nil before one
}

// jwksFetch is the outcome of one fetch of the JWKS: a response's status,
// header and body, or err.
type jwksFetch struct {
	status int
	header http.Header
	body   []byte
	err    error
	at     time.Time
}

func (c *jwksCache) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || req.URL.String() != c.url {
		return c.base.RoundTrip(req)
	}
	f := c.recent()
	if f == nil {
		v, _, _ := c.flight.Do("jwks", func() (any, error) {
			if f := c.recent(); f != nil {
				return f, nil // the fetch just before this one
			}
			f := c.fetch(req.Context())
			c.mu.Lock()
			c.last = f
			c.mu.Unlock()
			return f, nil
		})
		f = v.(*jwksFetch)
	}
	if f.err != nil {
		return nil, f.err
	}
	return &http.Response{StatusCode: f.status, Status: fmt.Sprintf("%d %s", f.status, http.StatusText(f.status)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: f.header.Clone(),
		Body: io.NopCloser(bytes.NewReader(f.body)), ContentLength: int64(len(f.body)), Request: req}, nil
}

// recent returns the last fetch's outcome when it is younger than
// refetchEvery, else nil.
func (c *jwksCache) recent() *jwksFetch {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last != nil && c.now().Sub(c.last.at) < refetchEvery {
		return c.last
	}
	return nil
}

// fetch gets the JWKS, following redirects within its origin.
func (c *jwksCache) fetch(ctx context.Context) *jwksFetch {
	f := &jwksFetch{at: c.now()}
	u, err := url.Parse(c.url)
	if err != nil {
		f.err = err
		return f
	}
	for hops := 0; ; hops++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			f.err = err
			return f
		}
		resp, err := c.base.RoundTrip(req)
		if err != nil {
			f.err = err
			return f
		}
		loc, lerr := resp.Location()
		if resp.StatusCode >= 300 && resp.StatusCode < 400 && lerr == nil {
			resp.Body.Close()
			if f.err = redirectRefused(u, loc, hops+1); f.err != nil {
				return f
			}
			u = loc
			continue
		}
		f.body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			if _, big := errors.AsType[*http.MaxBytesError](err); big {
				err = fmt.Errorf("the issuer's %s is larger than %d bytes", u.Redacted(), maxFetchBytes)
			}
			f.body, f.err = nil, err
			return f
		}
		f.status, f.header = resp.StatusCode, resp.Header.Clone()
		return f
	}
}
