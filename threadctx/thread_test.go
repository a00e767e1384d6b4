package threadctx

import (
	"context"
	"testing"
)

// fakeKey is another package's context key.
type fakeKey struct{}

func TestThreadFrom(t *testing.T) {
	bg := context.Background()
	tests := []struct {
		name   string
		ctx    context.Context
		want   string
		wantOK bool
	}{
		{name: "absent", ctx: bg, want: "", wantOK: false},
		{name: "set", ctx: WithThread(bg, "t1"), want: "t1", wantOK: true},
		{name: "empty id is present", ctx: WithThread(bg, ""), want: "", wantOK: true},
		{name: "innermost wins", ctx: WithThread(WithThread(bg, "outer"), "inner"), want: "inner", wantOK: true},
		{name: "other key", ctx: context.WithValue(bg, fakeKey{}, "x"), want: "", wantOK: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ThreadFrom(tc.ctx)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("ThreadFrom() = %q, %v, want %q, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
