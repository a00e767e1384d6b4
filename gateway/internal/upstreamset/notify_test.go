package upstreamset

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/internal/mcppeer"
)

// front records what reaches it.
type front struct{ got []string }

func (f *front) Log(source, namespace string, params map[string]any) {
	f.got = append(f.got, "log "+source+" "+namespace+" "+params["data"].(string))
}

func (f *front) ResourceUpdated(uri string) { f.got = append(f.got, "updated "+uri) }

// peer is the client of one call; only its notifications are used.
type peer struct {
	mcppeer.Peer
	got []string
}

func (p *peer) Notify(method string, params map[string]any) {
	p.got = append(p.got, method+" "+params["data"].(string))
}

// TestNotify: a log message goes to the client of the call that caused it
// when there is one, else to every front under the upstream's namespace;
// a resource update to every front; anything else nowhere.
func TestNotify(t *testing.T) {
	var s Set
	defer s.Close()
	prefix := "p_"
	s.Put(upstream(t, config.Upstream{Name: "u", Prefix: &prefix}))
	f1, f2 := &front{}, &front{}
	fronts := []*front{f1, f2}
	caller := &peer{}
	msg := func(data string) map[string]any { return map[string]any{"level": "info", "data": data} }

	Notify(&s, fronts, "u", "notifications/message", msg("to the caller"), caller)
	Notify(&s, fronts, "u", "notifications/message", msg("to all"), nil)
	Notify(&s, fronts, "u", "notifications/resources/updated", map[string]any{"uri": "file:///a"}, nil)
	Notify(&s, fronts, "u", "notifications/resources/updated", map[string]any{}, nil)
	Notify(&s, fronts, "u", "notifications/progress", msg("dropped"), caller)

	if diff := cmp.Diff([]string{"notifications/message to the caller"}, caller.got); diff != "" {
		t.Errorf("the caller got (-want +got):\n%s", diff)
	}
	want := []string{"log upstream:u p_ to all", "updated file:///a"}
	for i, f := range fronts {
		if diff := cmp.Diff(want, f.got); diff != "" {
			t.Errorf("front %d got (-want +got):\n%s", i, diff)
		}
	}
}
