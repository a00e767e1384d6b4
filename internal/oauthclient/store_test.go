package oauthclient

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/oauth2"
)

func key(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}

// TestStoreEncryptedPrivateRotated checks that the store is mode 0600,
// holds no token in clear, refuses another key with advice, and during a
// rotation reads with the previous key and writes with the new one.
func TestStoreEncryptedPrivateRotated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "tokens.json")
	oldKey, newKey := key(t), key(t)
	s, err := OpenStore(path, oldKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &Record{Upstream: "up", Server: "https://up/mcp", ClientSecret: "client-secret-value",
		Token: &oauth2.Token{AccessToken: "access-token-value", RefreshToken: "refresh-token-value", TokenType: "Bearer"}}
	if err := s.Put(rec); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	raw, _ := os.ReadFile(path)
	for _, secret := range []string{"access-token-value", "refresh-token-value", "client-secret-value"} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("the file holds %s in clear", secret)
		}
	}

	wrong, _ := OpenStore(path, newKey, nil)
	if _, err := wrong.Get("up", ""); err == nil || !strings.Contains(err.Error(), PreviousKeyEnv) {
		t.Errorf("reading with another key: %v, want an error naming %s", err, PreviousKeyEnv)
	}

	rotating, _ := OpenStore(path, newKey, oldKey)
	got, err := rotating.Get("up", "")
	if err != nil || got == nil || got.Token.AccessToken != "access-token-value" {
		t.Fatalf("reading during rotation: %+v, %v", got, err)
	}
	if err := rotating.Put(got); err != nil { // rewritten with the new key
		t.Fatal(err)
	}
	rotated, _ := OpenStore(path, newKey, nil)
	if got, err := rotated.Get("up", ""); err != nil || got == nil {
		t.Errorf("reading with the new key alone after a write: %+v, %v", got, err)
	}
}

func TestLoadKey(t *testing.T) {
	k := base64.StdEncoding.EncodeToString(key(t))
	env := func(m map[string]string) func(string) string { return func(n string) string { return m[n] } }
	if _, _, err := LoadKey(env(nil), ""); err == nil || !strings.Contains(err.Error(), KeyEnv) {
		t.Errorf("no key: %v, want an error naming %s", err, KeyEnv)
	}
	if _, _, err := LoadKey(env(map[string]string{KeyEnv: "c2hvcnQ="}), ""); err == nil || !strings.Contains(err.Error(), "32 bytes") {
		t.Errorf("short key: %v", err)
	}
	file := filepath.Join(t.TempDir(), "key")
	_ = os.WriteFile(file, []byte(k+"\n"), 0o600)
	if got, prev, err := LoadKey(env(nil), file); err != nil || len(got) != 32 || prev != nil {
		t.Errorf("key file: %d bytes, %v, %v", len(got), prev, err)
	}
}
