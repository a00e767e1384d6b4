package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// ExitError ends the program with Code, printing Msg if it is not empty.
type ExitError struct {
	Code int
	Msg  string
}

func (e ExitError) Error() string { return e.Msg }

// Exit ends the program as err says: nil is exit 0; an [ExitError] exits
// with its code, after printing its message, if any, on stderr; any other
// error is printed and exits 1. Every message is prefixed with "toolgate: ".
func Exit(err error) {
	if err == nil {
		os.Exit(0)
	}
	code := 1
	if ec, ok := errors.AsType[ExitError](err); ok {
		code = ec.Code
		if ec.Msg == "" {
			os.Exit(code)
		}
	}
	fmt.Fprintln(os.Stderr, "toolgate:", err)
	os.Exit(code)
}

// SignalExit is the error of a program a second signal ended before its
// shutdown was done, saying what was left undone: the exit code is 128
// plus the signal's number, as a shell reports a process the signal
// killed.
func SignalExit(sig os.Signal, undone string) ExitError {
	code := 1
	if s, ok := sig.(syscall.Signal); ok {
		code = 128 + int(s)
	}
	return ExitError{Code: code, Msg: fmt.Sprintf("second signal (%v) during shutdown: %s", sig, undone)}
}

// NotifySignals returns a context that the first SIGINT or SIGTERM
// cancels, which starts a graceful shutdown, and a channel that receives
// the signals after it, each of which asks to stop at once. stop restores
// the default handling of both signals.
func NotifySignals() (ctx context.Context, again <-chan os.Signal, stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.Background())
	later := make(chan os.Signal, 1)
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-done:
			return
		}
		for {
			select {
			case s := <-sigs:
				select {
				case later <- s:
				default: // one pending is enough
				}
			case <-done:
				return
			}
		}
	}()
	return ctx, later, func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
}
