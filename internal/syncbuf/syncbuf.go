// Package syncbuf is a text buffer that several goroutines may write at
// once: what tests give a logger, or a child process as its stderr, to
// read back while it may still be writing.
package syncbuf

import (
	"strings"
	"sync"
)

// Buffer collects what is written to it. The zero value is empty and
// ready to use; a Buffer must not be copied after its first use.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder // guarded by mu
}

// Write appends p; it never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
