package mcpup

import "sync"

// maxClientRequests caps the requests of an upstream (sampling,
// elicitation, roots) relayed to the client of one call at once; one past
// it is refused at once with an error, and the upstream may ask again
// once an answer came (issue 31, item 9: 200 sampling requests of one
// call were all relayed at once).
const maxClientRequests = 8

// askCounts counts, per call, the upstream's requests relayed to its
// client and not yet answered.
type askCounts struct {
	mu sync.Mutex       // guards n
	n  map[*peerRef]int // the call's requests in flight to its client
}

// admit takes one of ref's maxClientRequests slots; release gives it
// back. ok is false, and nothing taken, when ref has them all.
func (a *askCounts) admit(ref *peerRef) (release func(), ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n[ref] >= maxClientRequests {
		return nil, false
	}
	if a.n == nil {
		a.n = map[*peerRef]int{}
	}
	a.n[ref]++
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.n[ref]--; a.n[ref] == 0 {
			delete(a.n, ref)
		}
	}, true
}
