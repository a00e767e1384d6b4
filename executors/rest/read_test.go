package rest

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReadCapped(t *testing.T) {
	errBroken := errors.New("broken")
	tests := []struct {
		name    string
		r       io.Reader
		limit   int64
		hint    int64
		want    string
		wantErr error
	}{
		{"shorter than the limit", strings.NewReader("hello"), 10, -1, "hello", nil},
		{"exactly the limit", strings.NewReader("hello"), 5, -1, "hello", nil},
		{"cut at the limit", strings.NewReader("hello, world"), 5, -1, "hello", nil},
		{"right hint", strings.NewReader("hello"), 10, 5, "hello", nil},
		{"hint too small", iotest.OneByteReader(strings.NewReader(strings.Repeat("x", 2000))), 5000, 3, strings.Repeat("x", 2000), nil},
		{"hint over the limit", strings.NewReader("hello, world"), 5, 100, "hello", nil},
		{"zero limit", strings.NewReader("hello"), 0, -1, "", nil},
		{"read error", io.MultiReader(strings.NewReader("hel"), iotest.ErrReader(errBroken)), 10, -1, "hel", errBroken},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadCapped(tc.r, tc.limit, tc.hint)
			if string(got) != tc.want || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Errorf("ReadCapped(limit %d, hint %d) = %q, %v; want %q, %v", tc.limit, tc.hint, got, err, tc.want, tc.wantErr)
			}
			if int64(cap(got)) > tc.limit {
				t.Errorf("ReadCapped(limit %d, hint %d) allocated %d bytes, over the limit", tc.limit, tc.hint, cap(got))
			}
		})
	}
}
