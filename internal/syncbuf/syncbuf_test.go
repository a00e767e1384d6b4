package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// Writes from many goroutines all arrive, whole (run with -race).
func TestBufferConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("line\n"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := b.String(); strings.Count(got, "line\n") != 800 || len(got) != 800*len("line\n") {
		t.Errorf("got %d bytes, %d lines; want 800 whole lines", len(got), strings.Count(got, "line\n"))
	}
}
