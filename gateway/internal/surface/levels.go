package surface

import (
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// Levels are the logging levels sessions set (logging/setLevel), and the
// one passed on to the sources: the most verbose of them, so that each
// session's messages reach the front, which sends each session only what
// its own level lets through. The zero value has no sessions; its methods
// are safe for concurrent use.
type Levels struct {
	mu        sync.Mutex                  // guards levels and forwarded, and passing a level on
	levels    map[string]mcp.LoggingLevel // session → the level it set
	forwarded mcp.LoggingLevel            // the level last passed on
}

// Set records the level session set and, when that changes the most
// verbose level any session wants, calls pass with the new one. pass runs
// under the lock, so that the sources get the levels in the order they
// were set.
func (l *Levels) Set(session string, level mcp.LoggingLevel, pass func(mcp.LoggingLevel)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.levels == nil {
		l.levels = map[string]mcp.LoggingLevel{}
	}
	l.levels[session] = level
	want := level
	for _, v := range l.levels {
		if want.ShouldSendTo(v) {
			want = v // v is more verbose
		}
	}
	if want == l.forwarded {
		return
	}
	l.forwarded = want
	pass(want)
}

// Forget drops the level of a session that ended. The level passed on
// stays until a session sets one again.
func (l *Levels) Forget(session string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.levels, session)
}
