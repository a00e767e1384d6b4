package agent

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/retry"
)

// TestIdleWatch: every byte read restarts the idle timer, so a stream that
// keeps sending (more slowly than the timeout in total, faster than it
// between reads) is never abandoned; once it stops, the request's context
// is cancelled one idle period after the last byte. Fake time
// (synctest): the sleeps below advance the bubble's clock, they do not
// synchronise anything.
func TestIdleWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const d = time.Second
		w := newIdleWatch(d)
		pr, pw := io.Pipe()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://127.0.0.1/v1/messages", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := w.middleware(req, func(r *http.Request) (*http.Response, error) {
			go func() {
				// The transport aborts a body read when its request's
				// context ends.
				<-r.Context().Done()
				pw.CloseWithError(context.Cause(r.Context()))
			}()
			return &http.Response{StatusCode: http.StatusOK, Body: pr}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		go func() {
			for range 5 {
				time.Sleep(d * 9 / 10)
				if _, err := pw.Write([]byte("x")); err != nil {
					return
				}
			}
			// Then the server stalls.
		}()
		start := time.Now()
		b, err := io.ReadAll(resp.Body)
		if string(b) != "xxxxx" {
			t.Errorf("read %q before the stall, want %q", b, "xxxxx")
		}
		if !errors.Is(err, errIdle) {
			t.Errorf("reading the stalled body: error = %v, want the idle cause", err)
		}
		if got, want := time.Since(start), 5*(d*9/10)+d; got != want {
			t.Errorf("abandoned after %v, want %v (one idle period after the last byte)", got, want)
		}
		if e := w.err("test"); retry.Classify(e) != retry.Timeout {
			t.Errorf("w.err() = %v, want an error of class timeout", e)
		}
	})
}

// TestIdleWatchOff: a negative timeout never fires.
func TestIdleWatchOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newIdleWatch(-1)
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://127.0.0.1/", nil)
		var ctx context.Context
		_, _ = w.middleware(req, func(r *http.Request) (*http.Response, error) {
			ctx = r.Context()
			return &http.Response{Body: http.NoBody}, nil
		})
		time.Sleep(24 * time.Hour)
		if ctx.Err() != nil || w.err("test") != nil {
			t.Errorf("a watch with a negative timeout fired: %v", ctx.Err())
		}
	})
}
