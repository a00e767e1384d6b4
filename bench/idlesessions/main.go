// Command idlesessions measures what an idle MCP session costs a toolgate
// process (issue 25): it opens sessions against a running toolgate over
// streamable HTTP, each an initialize, its notifications/initialized and
// one tools/call of calc, leaves them open, and prints the process's RSS
// (VmRSS of -pid) before the first and after each step of -steps.
// bench/idlesessions.sh starts the binary and calls it.
//
//	idlesessions -url http://127.0.0.1:19460/mcp -pid 1234 -steps 1000,5000
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:19460/mcp", "toolgate's MCP endpoint")
	pid := flag.Int("pid", 0, "toolgate's process ID, whose RSS is read")
	steps := flag.String("steps", "1000,5000", "comma-separated, ascending numbers of open sessions after which RSS is read")
	workers := flag.Int("c", 8, "sessions opened at once")
	flag.Parse()
	if *pid == 0 {
		fail(fmt.Errorf("-pid is required"))
	}
	before, err := rssKB(*pid)
	if err != nil {
		fail(err)
	}
	fmt.Printf("| sessions | RSS MB | KB per session since 0 | KB per session since the step before |\n|---|---|---|---|\n| 0 | %.1f | | |\n", float64(before)/1024)
	open, prev := 0, before
	for _, s := range strings.Split(*steps, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n <= open {
			fail(fmt.Errorf("-steps: %q is not an ascending count", s))
		}
		if err := openSessions(*url, n-open, *workers); err != nil {
			fail(err)
		}
		runtime.GC()
		now, err := rssKB(*pid)
		if err != nil {
			fail(err)
		}
		fmt.Printf("| %d | %.1f | %.1f | %.1f |\n", n, float64(now)/1024, float64(now-before)/float64(n), float64(now-prev)/float64(n-open))
		open, prev = n, now
	}
}

// openSessions opens n sessions, workers at a time.
func openSessions(url string, n, workers int) error {
	var left atomic.Int64
	left.Store(int64(n))
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range workers {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if err := session(url); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// session opens one session and makes one call in it.
func session(url string) error {
	h, err := post(url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"idlesessions","version":"1"}}}`)
	if err != nil {
		return err
	}
	sid := h.Get("Mcp-Session-Id")
	if sid == "" {
		return fmt.Errorf("initialize: no Mcp-Session-Id")
	}
	if _, err := post(url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		return err
	}
	_, err = post(url, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"calc","arguments":{"expression":"1+1"}}}`)
	return err
}

func post(url, sid, body string) (http.Header, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(body)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	}
	return resp.Header, nil
}

// rssKB is the process's resident set, from /proc.
func rssKB(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "idlesessions:", err)
	os.Exit(1)
}
