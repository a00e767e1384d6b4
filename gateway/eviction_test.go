package gateway

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
)

// A thread whose stateful instance was evicted to make room for another
// thread's learns so from the result of its next call, which runs on a new
// instance; its calls after that carry no notice.
func TestEvictedInstanceNoticeReachesResult(t *testing.T) {
	g, _ := newGateway(t, func(c *config.Config) {
		c.Threads.MaxInstances = 1
		c.Guards.Loop.Action = config.LoopOff // the calls repeat on purpose
	})
	call := func(thread string) *Result {
		t.Helper()
		res, err := g.Call(t.Context(), "counter", nil, map[string]any{ThreadMetaKey: thread})
		if err != nil || res.IsError {
			t.Fatalf("Call(counter) in thread %s = %v, %v", thread, res, err)
		}
		return res
	}
	call("victim")
	call("victim")
	call("other") // evicts victim's instance
	res := call("victim")
	text := resultText(t, res)
	const notice = `Note: the previous instance of "counter" in this thread was evicted (threads.max_instances of 1 reached) and a new one was created; its state from before is gone.`
	if !strings.HasPrefix(text, `{"n":1}`) || !strings.HasSuffix(text, notice) {
		t.Errorf("call after eviction = %q, want a new count of 1 and the notice %q", text, notice)
	}
	if got := res.Meta[executors.EvictedMetaKey]; got != "max_instances" {
		t.Errorf("_meta[%q] = %v, want max_instances", executors.EvictedMetaKey, got)
	}
	if res := call("victim"); strings.Contains(resultText(t, res), "evicted") || res.Meta[executors.EvictedMetaKey] != nil {
		t.Errorf("second call after eviction = %q, %v; want no notice", resultText(t, res), res.Meta)
	}
}
