package callcache

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var minute = &config.Cache{TTL: config.Duration(time.Minute), MaxBytes: 1 << 20}

// readOnly is a cacheable tool of kind k from source.
func readOnly(name, source string, k registry.Kind) *registry.Tool {
	t := &registry.Tool{Name: name, Source: source, Kind: k, Idempotent: true}
	t.Annotations.ReadOnlyHint = new(true)
	return t
}

func TestOf(t *testing.T) {
	var s Set
	s.Set("rest:weather", minute)
	s.SetUpstream(config.Upstream{Name: "fs", Cache: minute})
	s.SetUpstream(config.Upstream{Name: "threads", Cache: minute, Isolation: "thread"})
	writes := readOnly("post", "rest:weather", registry.REST)
	writes.Annotations.ReadOnlyHint = new(false)
	notIdem := readOnly("get", "rest:weather", registry.REST)
	notIdem.Idempotent = false
	for _, tc := range []struct {
		tool   *registry.Tool
		cached bool
	}{
		{readOnly("get", "rest:weather", registry.REST), true},
		{readOnly("read", "upstream:fs", registry.MCP), true},
		{readOnly("read", "upstream:threads", registry.MCP), false}, // a thread's server's result
		{readOnly("get", "rest:other", registry.REST), false},       // no cache section
		{readOnly("echo", "rest:weather", registry.Stateless), false},
		{writes, false},
		{notIdem, false},
	} {
		if got := s.Of(tc.tool) != nil; got != tc.cached {
			t.Errorf("Of(%s of %s, %s) cached = %v, want %v", tc.tool.Name, tc.tool.Source, tc.tool.Kind, got, tc.cached)
		}
	}
	s.Set("rest:weather", nil)
	if s.Of(readOnly("get", "rest:weather", registry.REST)) != nil {
		t.Error("a source whose cache section went away still has a cache")
	}
}

func TestKey(t *testing.T) {
	var s Set
	s.Set("rest:private", minute)
	s.Set("rest:public", &config.Cache{TTL: config.Duration(time.Minute), MaxBytes: 1 << 20, Public: true})
	private, public := s.Of(readOnly("a", "rest:private", registry.REST)), s.Of(readOnly("b", "rest:public", registry.REST))
	key := func(c *Cache, principal, raw string, args map[string]any) string {
		t.Helper()
		var r json.RawMessage
		if raw != "" {
			r = json.RawMessage(raw)
		}
		k, err := c.Key("t", principal, r, args)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	if key(private, "alice", `{"a":1,"b":2}`, nil) != key(private, "alice", `{ "b":2.0, "a":1 }`, nil) {
		t.Error("the same arguments spelt differently make two keys")
	}
	if key(private, "alice", "", map[string]any{"a": 1.0}) != key(private, "alice", `{"a":1}`, nil) {
		t.Error("decoded and raw arguments of one value make two keys")
	}
	if key(private, "alice", `{"a":1}`, nil) == key(private, "alice", `{"a":2}`, nil) {
		t.Error("different arguments share a key")
	}
	if key(private, "alice", `{}`, nil) == key(private, "bob", `{}`, nil) {
		t.Error("a private cache shares a key across principals")
	}
	if key(public, "alice", `{}`, nil) != key(public, "bob", `{}`, nil) {
		t.Error("a public cache keys principals apart")
	}
	if _, err := private.Key("t", "", json.RawMessage(`{"a":`), nil); err == nil {
		t.Error("arguments that are not JSON made a key")
	}
}

func TestDo(t *testing.T) {
	var s Set
	s.Set("rest:w", minute)
	c := s.Of(readOnly("get", "rest:w", registry.REST))
	key, _ := c.Key("get", "alice", json.RawMessage(`{}`), nil)
	runs := 0
	run := func(res *executors.Result) func() *executors.Result {
		return func() *executors.Result { runs++; return res }
	}
	failed := &executors.Result{IsError: true, Content: []executors.Content{{Type: executors.TextContent, Text: "no"}}}
	if hit, err := c.Do(t.Context(), key, run(failed)); hit != nil || err != nil {
		t.Fatalf("a miss = %v, %v; want nil, nil", hit, err)
	}
	ok := &executors.Result{Content: []executors.Content{{Type: executors.TextContent, Text: "sunny"}},
		Meta: map[string]any{executors.AttemptsMetaKey: 2, "other": "x"}}
	// The failure was not kept: this call runs, and its success is kept.
	if hit, err := c.Do(t.Context(), key, run(ok)); hit != nil || err != nil || runs != 2 {
		t.Fatalf("the call after a failure = %v, %v (%d runs); want a miss", hit, err, runs)
	}
	s.Forget([]string{"other"}) // another tool's entries: this one stays
	if hit, _ := c.Do(t.Context(), key, run(ok)); hit == nil || runs != 2 {
		t.Fatalf("Forget of another tool dropped this one's entry (%d runs)", runs)
	}
	s.Forget([]string{"get"}) // removed or replaced: the next call runs
	if hit, err := c.Do(t.Context(), key, run(ok)); hit != nil || err != nil || runs != 3 {
		t.Fatalf("the call after Forget = %v, %v (%d runs); want a miss", hit, err, runs)
	}
	ok.Content[0].Text = "changed after the call" // a later step edits its own result
	hit, err := c.Do(t.Context(), key, run(ok))
	if err != nil || hit == nil || runs != 3 {
		t.Fatalf("the call after a success = %v, %v (%d runs); want a hit", hit, err, runs)
	}
	if hit.Content[0].Text != "sunny" || hit.Meta[MetaKey] != "hit" || hit.Meta["other"] != "x" || hit.Meta[executors.AttemptsMetaKey] != nil {
		t.Errorf("hit = %+v; want the kept copy marked as a hit, without attempts", hit)
	}
	hit.Content[0].Text, hit.Meta["other"] = "edited", "y"
	if again, _ := c.Do(t.Context(), key, run(ok)); again.Content[0].Text != "sunny" || again.Meta["other"] != "x" {
		t.Errorf("editing a hit changed the kept result: %+v", again)
	}
	if s.Bytes() <= 0 {
		t.Errorf("Bytes = %v with an entry kept", s.Bytes())
	}
}

func TestDoWaitEnds(t *testing.T) {
	var s Set
	s.Set("rest:w", minute)
	c := s.Of(readOnly("get", "rest:w", registry.REST))
	key, _ := c.Key("get", "", nil, map[string]any{})
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = c.Do(context.Background(), key, func() *executors.Result {
			close(started)
			<-release
			return &executors.Result{}
		})
	}()
	<-started
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := c.Do(ctx, key, func() *executors.Result { t.Error("ran while an identical call ran"); return nil })
	if re, ok := errors.AsType[*retry.Error](err); !ok || re.Class != retry.Cancelled {
		t.Errorf("a cancelled wait = %v, want a cancelled error", err)
	}
	close(release)
	<-done
}
