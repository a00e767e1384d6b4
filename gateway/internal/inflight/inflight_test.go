package inflight

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDrainWaitsForCalls(t *testing.T) {
	var tr Tracker
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	id, ok := tr.Enter(cancel)
	if !ok || tr.Count() != 1 || tr.IsDraining() {
		t.Fatalf("Enter = %v; count %d, draining %v", ok, tr.Count(), tr.IsDraining())
	}
	done := make(chan error, 1)
	go func() { done <- tr.Drain(context.Background()) }()
	<-tr.Draining()
	if _, ok := tr.Enter(func(error) {}); ok {
		t.Error("Enter while draining = ok; want the call refused")
	}
	select {
	case err := <-done:
		t.Fatalf("Drain returned %v with a call in flight", err)
	default:
	}
	tr.Leave(id)
	if err := <-done; err != nil {
		t.Errorf("Drain = %v once the call left, want nil", err)
	}
	if ctx.Err() != nil {
		t.Error("Drain cancelled the call; only CancelAll may")
	}
}

func TestDrainGivesUpWithItsContext(t *testing.T) {
	var tr Tracker
	stop := errors.New("shutting down")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	id, _ := tr.Enter(cancel)
	expired, cancelWait := context.WithCancel(context.Background())
	cancelWait()
	if err := tr.Drain(expired); !errors.Is(err, context.Canceled) {
		t.Errorf("Drain(done ctx) = %v, want its error", err)
	}
	tr.CancelAll(stop)
	if !errors.Is(context.Cause(ctx), stop) {
		t.Errorf("call's cause = %v, want %v", context.Cause(ctx), stop)
	}
	tr.Leave(id)
	if err := tr.Drain(context.Background()); err != nil || tr.Count() != 0 {
		t.Errorf("Drain with no call = %v, count %d", err, tr.Count())
	}
}

func TestStartDrainingTwice(t *testing.T) {
	var tr Tracker
	tr.StartDraining()
	tr.StartDraining() // closes its channel once
	if !tr.IsDraining() {
		t.Error("IsDraining = false after StartDraining")
	}
}
