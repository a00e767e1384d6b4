package main

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that the gateway, the upstream and the client leave no
// goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRun runs the probe without snapshots in both eras: every call comes
// back as the upstream's echo, and at the upstream's entry the gateway's
// handler is found inside the executor, under the front and the pipeline.
func TestRun(t *testing.T) {
	for _, era := range []string{"2025", "2026"} {
		t.Run(era, func(t *testing.T) {
			stack, err := run(era, 2, "")
			if err != nil {
				t.Fatal(err)
			}
			all, tg, exec := depth(stack)
			if exec == 0 || tg-exec == 0 || all <= tg {
				t.Errorf("depth = %d frames, %d toolgate's, %d the executor's; want some of each in:\n%s", all, tg, exec, stack)
			}
			for _, fn := range []string{module + "gateway/internal/mcpfront.", module + "gateway.", module + "executors.(*Dispatcher).Dispatch"} {
				if !strings.Contains(stack, fn) {
					t.Errorf("no %s frame in the handler's goroutine:\n%s", fn, stack)
				}
			}
		})
	}
}

func TestDepth(t *testing.T) {
	stack := `goroutine 9 [select]:
net/http.(*Client).Do(...)
	/go/src/net/http/client.go:590
github.com/toolgate/toolgate/executors/mcpup.(*conn).call(_, {_, _})
	/src/executors/mcpup/conn.go:10 +0x1
github.com/toolgate/toolgate/executors.(*Dispatcher).Dispatch(0x1, {0x2, 0x3})
	/src/executors/dispatch.go:20 +0x2
github.com/toolgate/toolgate/gateway.(*Gateway).dispatch(0x1)
	/src/gateway/pipeline.go:30 +0x3
github.com/toolgate/toolgate/bench/toexecutor.proxy.func1({0x1, 0x2}, 0x3)
	/src/bench/toexecutor/main.go:40 +0x4
net/http.serverHandler.ServeHTTP({0x1}, {0x2, 0x3}, 0x4)
	/go/src/net/http/server.go:3340 +0x5
created by net/http.(*Server).Serve in goroutine 55
	/go/src/net/http/server.go:3454 +0x6`
	all, tg, exec := depth(stack)
	if all != 6 || tg != 3 || exec != 1 {
		t.Errorf("depth = %d, %d, %d; want 6 frames, 3 toolgate's (bench's left out), 1 the executor's", all, tg, exec)
	}
}
