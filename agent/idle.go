package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/toolgate/toolgate/retry"
)

// DefaultIdleTimeout is [AnthropicOptions.IdleTimeout] and
// [OpenAIOptions.IdleTimeout] when zero: how long a model call may go
// without receiving a byte (its response headers, or any part of its
// stream, keep-alive pings included) before it is abandoned. It is long
// because a local server may take minutes to read a large prompt before
// its first byte. The time counts from the last byte read, so a stream
// callback ([GenerateOptions.OnPart], an [Events] handler) that blocks
// the stream's goroutine that long is counted as silence too.
const DefaultIdleTimeout = 5 * time.Minute

// errIdle is the cause a stalled call's context is cancelled with.
var errIdle = errors.New("idle")

// idleWatch abandons one model call that stops receiving: a timer, reset
// by every byte read, that cancels the request's context when it fires.
// Providers pass [idleWatch.middleware] to the SDK for each call, so the
// watch covers the wait for the response headers and every read of the
// streamed body.
type idleWatch struct {
	d time.Duration

	mu    sync.Mutex // guards timer and fired
	timer *time.Timer
	fired bool
}

// newIdleWatch returns a watch of d; zero means [DefaultIdleTimeout], and
// a negative d a watch that never fires.
func newIdleWatch(d time.Duration) *idleWatch {
	if d == 0 {
		d = DefaultIdleTimeout
	}
	return &idleWatch{d: d}
}

// middleware is an SDK middleware (anthropic's and openai's option.Middleware
// are both this type) that puts the request under the watch.
func (w *idleWatch) middleware(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	if w.d < 0 {
		return next(req)
	}
	ctx, cancel := context.WithCancelCause(req.Context())
	w.mu.Lock()
	if w.timer != nil {
		w.timer.Stop() // an earlier attempt's
	}
	w.timer = time.AfterFunc(w.d, func() {
		w.mu.Lock()
		w.fired = true
		w.mu.Unlock()
		cancel(errIdle)
	})
	w.mu.Unlock()
	resp, err := next(req.WithContext(ctx))
	if err != nil {
		w.stop()
		cancel(nil)
		return resp, err
	}
	w.poke()
	resp.Body = &idleBody{ReadCloser: resp.Body, w: w, cancel: cancel}
	return resp, nil
}

// poke restarts the timer: something arrived.
func (w *idleWatch) poke() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil && !w.fired {
		w.timer.Reset(w.d)
	}
}

func (w *idleWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
	}
}

// err returns the error of a call that failed with cause: a timeout
// naming the idle period when the watch fired, else nil.
func (w *idleWatch) err(provider string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.fired {
		return nil
	}
	return &retry.Error{Class: retry.Timeout, Op: provider,
		Msg: fmt.Sprintf("the model sent nothing for %v; the call was abandoned (raise the idle timeout for slow servers)", w.d)}
}

// idleBody is a response body whose reads feed the watch.
type idleBody struct {
	io.ReadCloser
	w      *idleWatch
	cancel context.CancelCauseFunc
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.w.poke()
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.w.stop()
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}
