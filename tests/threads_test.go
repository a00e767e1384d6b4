package tests

import (
	"fmt"
	"strings"
	"testing"
)

func TestScratchpadThreads(t *testing.T) {
	srv := startServe(t, baseConfig)
	a := connect(t, streamableHTTP, srv)
	b := connect(t, streamableHTTP, srv)
	sse := connect(t, legacySSE, srv)
	put := func(key, value string) map[string]any {
		return map[string]any{"op": "put", "key": key, "value": value}
	}
	get := func(key string) map[string]any { return map[string]any{"op": "get", "key": key} }

	// Each session has a thread, and so a scratchpad, of its own.
	if res := mustCall(t, a, "scratchpad", put("note", "from a"), ""); res.IsError {
		t.Fatalf("session a: put: %q", resultText(res))
	}
	if res := mustCall(t, b, "scratchpad", put("note", "from b"), ""); res.IsError {
		t.Fatalf("session b: put: %q", resultText(res))
	}
	wantOK(t, mustCall(t, a, "scratchpad", get("note"), ""), "from a")
	wantOK(t, mustCall(t, b, "scratchpad", get("note"), ""), "from b")
	wantError(t, mustCall(t, sse, "scratchpad", get("note"), ""), "not_found")

	if res := mustCall(t, a, "scratchpad", put("only-a", "x"), ""); res.IsError {
		t.Fatalf("session a: put: %q", resultText(res))
	}
	wantError(t, mustCall(t, b, "scratchpad", get("only-a"), ""), "not_found")

	// A named thread is shared across sessions and transports, and is
	// separate from every session's own thread.
	const shared = "e2e-shared-thread"
	if res := mustCall(t, a, "scratchpad", put("plan", "shared"), shared); res.IsError {
		t.Fatalf("session a, thread %s: put: %q", shared, resultText(res))
	}
	wantOK(t, mustCall(t, b, "scratchpad", get("plan"), shared), "shared")
	wantOK(t, mustCall(t, sse, "scratchpad", get("plan"), shared), "shared")
	wantError(t, mustCall(t, a, "scratchpad", get("plan"), ""), "not_found")
	wantError(t, mustCall(t, a, "scratchpad", get("note"), shared), "not_found")
	wantError(t, mustCall(t, b, "scratchpad", get("plan"), "another-thread"), "not_found")

	// The session's own notes are untouched by all of that.
	wantOK(t, mustCall(t, a, "scratchpad", get("note"), ""), "from a")
}

func TestSessionCloseReleasesInstances(t *testing.T) {
	for _, tr := range []string{streamableHTTP, legacySSE} {
		t.Run(tr, func(t *testing.T) {
			srv := startServe(t, baseConfig)
			instances := map[string]string{"tool": "scratchpad"}
			text := scrape(t, srv.URL)
			if v, ok := metricValue(text, "toolgate_thread_instances", instances); !ok || v != 0 {
				t.Fatalf("before any session: toolgate_thread_instances{tool=\"scratchpad\"} = %v (present %v), want 0 and present", v, ok)
			}
			if v := metricOrZero(text, "toolgate_sessions", nil); v != 0 {
				t.Fatalf("before any session: toolgate_sessions = %v, want 0", v)
			}

			c := connect(t, tr, srv)
			if res := mustCall(t, c, "scratchpad", map[string]any{"op": "put", "key": "k", "value": "v"}, ""); res.IsError {
				t.Fatalf("put: %q", resultText(res))
			}
			text = scrape(t, srv.URL)
			if v := metricOrZero(text, "toolgate_thread_instances", instances); v != 1 {
				t.Errorf("with one session: toolgate_thread_instances{tool=\"scratchpad\"} = %v, want 1", v)
			}
			if v := metricOrZero(text, "toolgate_sessions", nil); v != 1 {
				t.Errorf("with one session: toolgate_sessions = %v, want 1", v)
			}

			if err := c.Close(); err != nil {
				t.Fatalf("closing the client: %v", err)
			}
			waitMetric(t, srv.URL, "toolgate_thread_instances", instances, 0)
			waitMetric(t, srv.URL, "toolgate_sessions", nil, 0)
		})
	}
}

// TestScratchpadBytesPerPrincipal (issue 31, item 10): the scratchpad
// declares its most (1 MiB of notes and their keys' overhead), and an
// unauthenticated loopback client, one principal for
// threads.max_bytes_per_principal (64 MiB by default), keeps at most 60
// scratchpads alive however many named threads it opens: the 61st evicts
// the least recently used, whose next call says why. Before, 1,000 named
// threads pinned 0.78 GB.
func TestScratchpadBytesPerPrincipal(t *testing.T) {
	srv := startServe(t, baseConfig)
	c := connect(t, streamableHTTP, srv)
	const fit = (64 << 20) / (1<<20 + 1000*64) // scratchpads in 64 MiB: 60
	for i := range fit + 1 {
		put := map[string]any{"op": "put", "key": "k", "value": fmt.Sprint("note ", i)}
		if res := mustCall(t, c, "scratchpad", put, fmt.Sprint("bytes-", i)); res.IsError {
			t.Fatalf("thread %d: put: %q", i, resultText(res))
		}
	}
	if v := metricOrZero(scrape(t, srv.URL), "toolgate_thread_instances", map[string]string{"tool": "scratchpad"}); v != fit {
		t.Errorf("toolgate_thread_instances{tool=\"scratchpad\"} = %v after %d named threads, want %d", v, fit+1, fit)
	}
	res := mustCall(t, c, "scratchpad", map[string]any{"op": "get", "key": "k"}, "bytes-0")
	wantError(t, res, "not_found")
	if text := resultText(res); !strings.Contains(text, "threads.max_bytes_per_principal") {
		t.Errorf("the evicted thread's get = %q, want it to say threads.max_bytes_per_principal evicted its scratchpad", text)
	}
	wantOK(t, mustCall(t, c, "scratchpad", map[string]any{"op": "get", "key": "k"}, fmt.Sprint("bytes-", fit)), fmt.Sprint("note ", fit))
}
