package executors

import (
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/threadctx"
)

// Each eviction's notice names the limit that ended the instance: a
// provisional one (a new thread whose handle has not come back) is not
// blamed on threads.idle_ttl or threads.max_instances.
func TestEvictionNotice(t *testing.T) {
	for _, tc := range []struct {
		ev   threadctx.Eviction
		want string
	}{
		{threadctx.Eviction{Reason: threadctx.EvictedForRoom, MaxInstances: 1000}, "threads.max_instances of 1000 reached"},
		{threadctx.Eviction{Reason: threadctx.EvictedForRoom, MaxInstances: 1000, OwnerCap: 10}, "cap of 10 instances reached: auth.max_instances"},
		{threadctx.Eviction{Reason: threadctx.EvictedForRoom, MaxInstances: 1000, MaxProvisional: 100}, "cap of 100 new threads whose handle never came back reached"},
		{threadctx.Eviction{Reason: threadctx.EvictedIdle, IdleTTL: 30 * time.Minute}, "idle for threads.idle_ttl (30m0s)"},
		{threadctx.Eviction{Reason: threadctx.EvictedIdle, IdleTTL: 2 * time.Minute, Provisional: true}, "idle for 2m0s (a new thread whose handle has not come back yet"},
	} {
		if got := evictionNotice("notes", tc.ev); !strings.Contains(got, tc.want) {
			t.Errorf("%+v: notice %q, want it to say %q", tc.ev, got, tc.want)
		}
	}
}
