package mcpup

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
)

// BenchmarkStdioCall is one tools/call of the fake upstream's echo over
// stdio through mcpup, one at a time; BenchmarkStdioPipe is the same
// JSON-RPC exchange written straight to the same server's pipes. The
// difference of their ns/op is what mcpup adds to a stdio call's latency
// at one session (issue 16).
func BenchmarkStdioCall(b *testing.B) {
	m, _, _ := startUp(b, stdioUpstream(), nil)
	e := m.exec(b, "fs__echo")
	c := executors.Call{Tool: &registry.Tool{Name: "fs__echo", Kind: registry.MCP}, Raw: json.RawMessage(`{"text":"hello"}`)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Execute(b.Context(), c); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStdioPipe(b *testing.B) {
	cmd := exec.CommandContext(b.Context(), fakeBin)
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = in.Close(); _ = cmd.Wait() })
	r := bufio.NewReader(out)
	exchange := func(msg string, answer bool) string {
		if _, err := fmt.Fprintln(in, msg); err != nil {
			b.Fatal(err)
		}
		if !answer {
			return ""
		}
		line, err := r.ReadString('\n')
		if err != nil {
			b.Fatal(err)
		}
		return line
	}
	exchange(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`, true)
	exchange(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, false)
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`
	if got := exchange(call, true); !strings.Contains(got, "hello") {
		b.Fatalf("tools/call echo = %s", got)
	}
	b.ReportAllocs()
	for b.Loop() {
		exchange(call, true)
	}
}

// BenchmarkStdioCallParallel is BenchmarkStdioCall from 16 goroutines at
// once, as 16 clients' calls share an upstream's pipe.
func BenchmarkStdioCallParallel(b *testing.B) {
	m, _, _ := startUp(b, stdioUpstream(), nil)
	e := m.exec(b, "fs__echo")
	c := executors.Call{Tool: &registry.Tool{Name: "fs__echo", Kind: registry.MCP}, Raw: json.RawMessage(`{"text":"hello"}`)}
	b.ReportAllocs()
	b.SetParallelism(8) // 8×GOMAXPROCS goroutines: 16 on 2 CPUs
	start := cpuTime()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := e.Execute(b.Context(), c); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the CPU time this process has used (the upstream's is its
// own).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
