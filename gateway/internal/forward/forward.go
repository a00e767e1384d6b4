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
	"crypto/sha256"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
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
	all     []string // every replica's ID, this one's too, sorted
	// Forwarded, when set, is told of each request forwarded to owner
	// (a metric: forwards show a balancer that does not pin).
	Forwarded func(owner string)
	// LiveFunc, when set, lists the replicas live (a membership kept in
	// Redis); without it every configured replica is taken to be.
	LiveFunc func() []string
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
		p.all = append(p.all, id)
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
	slices.Sort(p.all)
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

// Owner is the replica that owns key (a principal's named thread), by
// rendezvous hashing over the replicas live: each key goes to the live
// replica whose hash with it is highest, so a replica joining or leaving
// moves only the keys it takes or held. live lists the replicas' IDs,
// this one included.
func Owner(key string, live []string) string {
	var best string
	var bestSum uint64
	for _, id := range live {
		h := sha256.New() // the same on every replica; FNV's sums of such alike inputs rank alike
		h.Write([]byte(id))
		h.Write([]byte{0})
		h.Write([]byte(key))
		if sum := binary.BigEndian.Uint64(h.Sum(nil)); best == "" || sum > bestSum {
			best, bestSum = id, sum
		}
	}
	return best
}

// Live returns the IDs of the replicas taken to be live, this one
// included: the Live function when set (a membership), else every
// configured replica.
func (p *Peers) Live() []string {
	if p.LiveFunc != nil {
		return p.LiveFunc()
	}
	return p.all
}

// Hopped reports whether r was forwarded by another replica.
func Hopped(r *http.Request) bool { return r.Header.Get(Header) != "" }
