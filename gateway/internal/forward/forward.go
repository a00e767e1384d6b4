// Package forward sends a request to the replica that owns the state it
// names (a session, a call waiting for its client's answers), one hop,
// for balancers that do not pin a client to its replica (cluster.peers).
// A forwarded request is marked and never forwarded again, so two
// replicas that disagree about an owner cannot pass a request back and
// forth.
package forward

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

// Header marks a request one replica forwarded to another; its value is
// the forwarding replica's ID.
const Header = "Toolgate-Forwarded-By"

// dialTimeout bounds connecting to a peer: a replica that is gone is
// answered for at once, not after the client's patience.
const dialTimeout = 2 * time.Second

// Peers are the other replicas of a cluster, by ID.
type Peers struct {
	self    string
	proxies map[string]*httputil.ReverseProxy
	// Forwarded, when set, is told of each request forwarded to owner
	// (a metric: forwards show a balancer that does not pin).
	Forwarded func(owner string)
}

// New returns the peers of replica self: addrs maps each replica's ID to
// the host:port of its MCP endpoint (self's own entry is ignored).
func New(self string, addrs map[string]string) *Peers {
	p := &Peers{self: self, proxies: make(map[string]*httputil.ReverseProxy, len(addrs))}
	transport := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: dialTimeout}).DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
	for id, addr := range addrs {
		if id == self {
			continue
		}
		target := &url.URL{Scheme: "http", Host: addr}
		p.proxies[id] = &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(target)
				pr.Out.Host = pr.In.Host // the owner applies the same Host rule
				pr.Out.Header.Set(Header, self)
			},
			Transport:     transport,
			FlushInterval: -1, // streams (SSE answers, GET streams) go through as written
			ErrorHandler:  ownerDown,
		}
	}
	return p
}

// downKey carries, in a forwarded request's context, what answers it when
// its owner cannot be reached.
type downKey struct{}

// ownerDown answers a request whose owner did not answer, as its caller
// said to.
func ownerDown(w http.ResponseWriter, r *http.Request, _ error) {
	if down, ok := r.Context().Value(downKey{}).(http.HandlerFunc); ok {
		down(w, r)
		return
	}
	http.Error(w, "the replica that owns this request's state did not answer", http.StatusBadGateway)
}

// Forward sends r to replica owner and reports whether it did: false when
// owner is this replica or not a peer, or when r was forwarded to this
// replica already (one hop). body, when not nil, is r's body, read
// already. When owner cannot be reached, down answers instead (as if
// owner's state were gone: the client starts over).
func (p *Peers) Forward(w http.ResponseWriter, r *http.Request, body []byte, owner string, down http.HandlerFunc) bool {
	if p == nil || Hopped(r) {
		return false
	}
	proxy, ok := p.proxies[owner]
	if !ok {
		return false
	}
	if p.Forwarded != nil {
		p.Forwarded(owner)
	}
	r = r.WithContext(context.WithValue(r.Context(), downKey{}, down))
	if body != nil {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
	}
	proxy.ServeHTTP(w, r)
	return true
}

// Hopped reports whether r was forwarded by another replica.
func Hopped(r *http.Request) bool { return r.Header.Get(Header) != "" }
