// Package threadname names the threads of the gateway's calls. A thread
// is a string the thread pool keys stateful instances by; its prefix says
// whose it is, so that no name a client sends can reach another's
// instances:
//
//   - "s:" + session ID: an MCP session's thread ([Session]);
//   - "t:" + [principal NUL] name: a thread a call names in _meta
//     ([Named]), per principal;
//   - "c:" + number: a one-call thread, closed when its call ends
//     ([OneCall]);
//   - "h:": a thread handle's (gateway/internal/handles mints those).
//
// It knows neither the pool nor the pipeline.
package threadname

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/toolgate/toolgate/retry"
	"github.com/toolgate/toolgate/threadctx"
)

// MaxNameLen is the longest thread name a call may send, in bytes.
const MaxNameLen = 256

// Session is the thread of MCP session id, "" for none.
func Session(id string) string {
	if id == "" {
		return ""
	}
	return "s:" + id
}

// Named is the thread a call of principal names with meta, the call's
// _meta: "" when it names none (no [threadctx.MetaKey], null or ""). A
// value that is not a string or is longer than [MaxNameLen] is a
// validation error that says what to send.
func Named(meta map[string]any, principal string) (string, error) {
	v, ok := meta[threadctx.MetaKey]
	if !ok || v == nil {
		return "", nil
	}
	s, isStr := v.(string)
	switch {
	case !isStr:
		return "", retry.Errorf(retry.Validation, "_meta %q must be a string naming the thread", threadctx.MetaKey)
	case s == "":
		return "", nil
	case len(s) > MaxNameLen:
		return "", retry.Errorf(retry.Validation, "_meta %q is %d bytes long; use at most %d", threadctx.MetaKey, len(s), MaxNameLen)
	case principal != "":
		// Each principal names its own threads: another's of the same
		// name is out of reach.
		return "t:" + principal + "\x00" + s, nil
	default:
		return "t:" + s, nil
	}
}

// OneCall numbers one-call threads. The zero value is ready.
type OneCall struct{ n atomic.Uint64 }

// Next is a one-call thread no other call has.
func (o *OneCall) Next() string { return "c:" + strconv.FormatUint(o.n.Add(1), 10) }

// Sessions is the set of live MCP sessions, each counted once however
// often its start and end are reported. The zero value is ready.
type Sessions struct{ m sync.Map }

// Start records session id and reports whether it was new.
func (s *Sessions) Start(id string) bool {
	_, loaded := s.m.LoadOrStore(id, struct{}{})
	return !loaded
}

// End forgets session id and reports whether it was live.
func (s *Sessions) End(id string) bool {
	_, ok := s.m.LoadAndDelete(id)
	return ok
}
