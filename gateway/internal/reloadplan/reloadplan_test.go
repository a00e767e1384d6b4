package reloadplan

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/toolgate/toolgate/config"
)

type src struct{ Name, URL string }

func TestDiffAddedChangedRemoved(t *testing.T) {
	cur := map[string]src{"a": {"a", "u1"}, "b": {"b", "u2"}, "z": {"z", "u9"}, "c": {"c", "u3"}}
	next := []src{{"b", "u2-new"}, {"new", "u4"}, {"a", "u1"}}
	changes, removed := Diff(cur, next, func(s src) string { return s.Name }, Same)
	if len(changes) != 2 {
		t.Fatalf("changes = %+v, want b changed and new added", changes)
	}
	if c := changes[0]; c.Index != 0 || c.New.URL != "u2-new" || c.Old.URL != "u2" || !c.Existed {
		t.Errorf("changes[0] = %+v, want b changed from u2 at index 0", c)
	}
	if c := changes[1]; c.Index != 1 || c.New.Name != "new" || c.Existed {
		t.Errorf("changes[1] = %+v, want new added at index 1", c)
	}
	if want := []string{"c", "z"}; !slices.Equal(removed, want) {
		t.Errorf("removed = %v, want %v (sorted)", removed, want)
	}
}

func TestDiffUsesSame(t *testing.T) {
	cur := map[string]src{"a": {"a", "u1"}}
	// A source configured alike is changed when same says so (an OpenAPI
	// document read again and found changed).
	changes, removed := Diff(cur, []src{{"a", "u1"}}, func(s src) string { return s.Name }, func(_, _ src) bool { return false })
	if len(changes) != 1 || !changes[0].Existed || removed != nil {
		t.Fatalf("changes = %+v removed = %v, want a changed", changes, removed)
	}
}

func TestRestart(t *testing.T) {
	old := &config.Config{}
	cfg := &config.Config{}
	cfg.Server.Listen = "127.0.0.1:9999"
	cfg.Defaults.Timeout = config.Duration(time.Minute) // live
	cfg.Defaults.Catalog = config.CatalogSearch         // fixed while serving
	cfg.Rest = []config.RESTTool{{Name: "weather"}}     // live section
	cfg.Hooks = []config.Hook{{}}                       // live section
	if got, want := Restart(old, cfg), []string{"server.listen", "defaults.catalog"}; !slices.Equal(got, want) {
		t.Errorf("Restart = %v, want %v", got, want)
	}
	if got := Restart(old, &config.Config{}); got != nil {
		t.Errorf("Restart of equal configurations = %v, want none", got)
	}
}

func TestAuthLive(t *testing.T) {
	tok := func(name string) config.AuthToken {
		return config.AuthToken{Name: name, Token: "0123456789abcdef-" + name}
	}
	old := &config.Auth{Tokens: []config.AuthToken{tok("a")}}
	next := &config.Auth{Tokens: []config.AuthToken{tok("b")}, Admins: []string{"b"}, MaxSessions: 3, MaxInstances: 2}
	if !AuthLive(old, next) {
		t.Error("tokens, admins and caps changed: want them live")
	}
	if !TokensChanged(old, next) || TokensChanged(old, old) {
		t.Error("TokensChanged wrong")
	}
	if AuthLive(old, &config.Auth{}) || AuthLive(&config.Auth{}, next) {
		t.Error("switching authentication on or off: want a restart")
	}
	scoped := *next
	scoped.RateScope = "cluster"
	if AuthLive(old, &scoped) {
		t.Error("rate_scope changed: want a restart")
	}
	if got := WithoutLiveAuth([]string{"auth.tokens", "server.listen", "auth.max_sessions"}); !slices.Equal(got, []string{"server.listen"}) {
		t.Errorf("WithoutLiveAuth = %v", got)
	}
	if got := WithoutLiveAuth([]string{"auth.admins"}); got != nil {
		t.Errorf("WithoutLiveAuth of live keys only = %v, want nil", got)
	}
}

func TestNewStatus(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	st := NewStatus(now, []string{"server.listen"}, nil)
	if st.Result != "ok" || st.Problems != 0 || !st.At.Equal(now) || st.At.Location() != time.UTC || st.Restart[0] != "server.listen" {
		t.Errorf("ok status = %+v", st)
	}
	st = NewStatus(now, nil, errors.Join(errors.New("x"), errors.New("y"), errors.New("z")))
	if st.Result != "error" || st.Problems != 3 {
		t.Errorf("joined error status = %+v, want 3 problems", st)
	}
	if st = NewStatus(now, nil, errors.New("x")); st.Problems != 1 {
		t.Errorf("one error status = %+v, want 1 problem", st)
	}
}
