package reloadplan

import (
	"reflect"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/config"
)

// liveSections are the configuration's sections a reload applies whole;
// liveKeys the keys of those it applies in part. Every other setting
// takes effect on restart.
var liveSections = map[string]bool{"builtin": true, "rest": true, "openapi": true, "upstreams": true, "hooks": true,
	"guards": true, "threads": true, "batch_tool": true}

// liveKeys are the keys of sections a reload applies in part; the other
// keys of those sections need a restart. defaults.catalog does: it
// decides which OpenAPI sources are served through a catalog, fixed while
// serving. The auth keys are live only while the rest of the auth section
// stays as it is ([AuthLive]), so they are not here: [WithoutLiveAuth]
// takes them off.
var liveKeys = map[string]bool{
	"defaults.timeout": true, "defaults.retry": true, "defaults.retry_budget": true, "defaults.circuit_breaker": true,
	"defaults.max_parallel": true, "defaults.max_parallel_per_session": true, "defaults.max_parallel_per_principal": true,
	"defaults.max_queue": true,
}

// Restart lists the settings that differ between old and cfg and that
// only a restart applies: each top-level section, or for a section that
// is a mapping, each of its keys ("server.listen") but those a reload
// applies.
func Restart(old, cfg *config.Config) []string {
	var out []string
	a, b := reflect.ValueOf(*old), reflect.ValueOf(*cfg)
	t := a.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || key == "" || key == "-" || liveSections[key] {
			continue
		}
		va, vb := a.Field(i), b.Field(i)
		if reflect.DeepEqual(va.Interface(), vb.Interface()) {
			continue
		}
		if f.Type.Kind() != reflect.Struct {
			out = append(out, key)
			continue
		}
		for j := range f.Type.NumField() {
			sub, _, _ := strings.Cut(f.Type.Field(j).Tag.Get("yaml"), ",")
			if sub != "" && !liveKeys[key+"."+sub] && !reflect.DeepEqual(va.Field(j).Interface(), vb.Field(j).Interface()) {
				out = append(out, key+"."+sub)
			}
		}
	}
	return out
}

// liveAuth are the keys of the auth section a reload applies: the static
// tokens, with their permissions and rates, who is an admin, and the caps
// of one principal's sessions and instances. The rest (OAuth, rate_scope,
// switching authentication on or off) needs a restart.
var liveAuth = []string{"auth.tokens", "auth.admins", "auth.max_sessions", "auth.max_instances"}

// AuthLive reports whether a reload from old to next may apply the auth
// section's live keys (tokens, admins, the session and instance caps):
// authentication is on in both and the rest of the section is unchanged.
func AuthLive(old, next *config.Auth) bool {
	if !old.Enabled() || !next.Enabled() {
		return false // switching authentication on or off needs a restart
	}
	rest := func(a config.Auth) config.Auth {
		a.Tokens, a.Admins, a.MaxSessions, a.MaxInstances = nil, nil, 0, 0
		return a
	}
	return Same(rest(*old), rest(*next))
}

// TokensChanged reports whether next's static tokens or admins differ
// from old's.
func TokensChanged(old, next *config.Auth) bool {
	return !Same(old.Tokens, next.Tokens) || !Same(old.Admins, next.Admins)
}

// WithoutLiveAuth returns restart, as [Restart] listed it, without the
// auth section's live keys, for when [AuthLive] says they are; nil when
// none is left.
func WithoutLiveAuth(restart []string) []string {
	if restart = slices.DeleteFunc(restart, func(k string) bool { return slices.Contains(liveAuth, k) }); len(restart) == 0 {
		return nil
	}
	return restart
}
