package keypath

import "testing"

func TestChild(t *testing.T) {
	for _, tc := range []struct{ path, key, want string }{
		{"", "server", "server"},
		{"server", "listen", "server.listen"},
		{"rest[0].headers", "X-Key", "rest[0].headers.X-Key"},
		{"headers", "Bad Header", `headers."Bad Header"`},
		{"headers", "", `headers.""`},
		{"env", "a.b", `env."a.b"`},
		{"q", "é", `q."é"`},
	} {
		if got := Child(tc.path, tc.key); got != tc.want {
			t.Errorf("Child(%q, %q) = %s, want %s", tc.path, tc.key, got, tc.want)
		}
	}
}
