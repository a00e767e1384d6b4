package redact

import (
	"encoding/base64"
	"net/url"
	"testing"
)

func TestNewReplacer(t *testing.T) {
	const secret = "s3cr/t+pass word"
	b64 := base64.StdEncoding.EncodeToString([]byte(secret))
	raw := base64.RawStdEncoding.EncodeToString([]byte("s3cr/t+pass word!")) // unpadded
	basic := BasicAuth(url.UserPassword("bob", secret))
	tests := []struct {
		name    string
		secrets []string
		extra   []string
		in      string
		want    string
	}{
		{"raw", []string{secret}, nil, "x " + secret + " y", "x [redacted] y"},
		{"query-escaped", []string{secret}, nil, "q=" + url.QueryEscape(secret), "q=[redacted]"},
		{"path-escaped", []string{secret}, nil, "/p/" + url.PathEscape(secret), "/p/[redacted]"},
		{"base64", []string{secret}, nil, "Basic " + b64, "Basic [redacted]"},
		{"base64 unpadded", []string{"s3cr/t+pass word!"}, nil, "tok " + raw + ".", "tok [redacted]."},
		{"basic auth", []string{secret}, basic, "Authorization: Basic " + basic[0], "Authorization: Basic [redacted]"},
		{"longer first", []string{"abcdef", "abcdefgh"}, nil, "abcdefgh abcdef", "[redacted] [redacted]"},
		{"short secret not encoded", []string{"abc"}, nil, base64.StdEncoding.EncodeToString([]byte("abc")) + " abc", "YWJj [redacted]"},
		{"empty skipped", []string{"", "abcdef"}, []string{""}, "abcdef", "[redacted]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReplacer(tc.secrets, tc.extra...)
			if got := r.Replace(tc.in); got != tc.want {
				t.Errorf("NewReplacer(%q, %q).Replace(%q) = %q, want %q", tc.secrets, tc.extra, tc.in, got, tc.want)
			}
		})
	}
}

func TestNewReplacerNone(t *testing.T) {
	if r := NewReplacer([]string{""}, ""); r != nil {
		t.Errorf("NewReplacer(empty) = %v, want nil", r)
	}
	if got := BasicAuth(nil); got != nil {
		t.Errorf("BasicAuth(nil) = %q, want nil", got)
	}
}

func TestBasicAuth(t *testing.T) {
	tests := []struct {
		name string
		u    *url.Userinfo
		want string
	}{
		{"user and password", url.UserPassword("bob", "pa:ss"), base64.StdEncoding.EncodeToString([]byte("bob:pa:ss"))},
		{"user only", url.User("token1"), base64.StdEncoding.EncodeToString([]byte("token1:"))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := BasicAuth(tc.u); len(got) != 2 || got[0] != tc.want {
				t.Errorf("BasicAuth(%v) = %q, want [%q ...]", tc.u, got, tc.want)
			}
		})
	}
}
