package auth

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"time"
)

// refetchEvery bounds how often toolgate fetches the issuer's JWKS.
const refetchEvery = 5 * time.Second

// maxJWKSBytes bounds a JWKS document kept for reuse.
const maxJWKSBytes = 1 << 20

// jwksCache is the transport go-oidc's remote key set fetches the JWKS
// through. go-oidc refetches the JWKS for every token whose key it does
// not hold, so a client sending tokens with made-up key IDs would have
// toolgate hammer the identity provider; through jwksCache a fetch within
// refetchEvery of the last successful one gets that one's document again,
// and reaches the provider no more than once per interval. After a real
// key rotation, tokens signed with the new key may be refused for up to
// refetchEvery.
type jwksCache struct {
	base http.RoundTripper
	url  string
	now  func() time.Time

	mu     sync.Mutex
	body   []byte // the last successful document; nil before one
	header http.Header
	at     time.Time
}

func (c *jwksCache) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || req.URL.String() != c.url {
		return c.base.RoundTrip(req)
	}
	c.mu.Lock()
	if c.body != nil && c.now().Sub(c.at) < refetchEvery {
		resp := &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: c.header.Clone(), Body: io.NopCloser(bytes.NewReader(c.body)), ContentLength: int64(len(c.body)), Request: req}
		c.mu.Unlock()
		return resp, nil
	}
	c.mu.Unlock()
	resp, err := c.base.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if len(body) <= maxJWKSBytes {
		c.mu.Lock()
		c.body, c.header, c.at = body, resp.Header.Clone(), c.now()
		c.mu.Unlock()
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}
