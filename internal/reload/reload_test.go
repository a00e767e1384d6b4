package reload

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestQueueBoundsAStorm: requests arriving while a reload runs cost one
// more reload, however many there are; none is lost after the last.
func TestQueueBoundsAStorm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		q := NewQueue()
		var runs, running, most atomic.Int32
		release := make(chan struct{})
		go q.Run(ctx, func(context.Context) {
			n := running.Add(1)
			if n > most.Load() {
				most.Store(n)
			}
			runs.Add(1)
			<-release
			running.Add(-1)
		})
		q.Request()
		synctest.Wait() // the first reload is running
		for range 100 {
			q.Request()
		}
		close(release)
		synctest.Wait()
		if got := runs.Load(); got != 2 {
			t.Errorf("reloads for 1 request and 100 during it = %d, want 2 (one in flight, one queued)", got)
		}
		if got := most.Load(); got != 1 {
			t.Errorf("reloads running at once = %d, want 1", got)
		}
	})
}

// TestDebounce: changes close together fire once, after the last; a file
// touched without pause still fires every `most`.
func TestDebounce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		changes := make(chan struct{})
		var fired atomic.Int32
		go Debounce(ctx, changes, 100*time.Millisecond, time.Second, func() { fired.Add(1) })
		for range 5 { // an editor's steps
			changes <- struct{}{}
			time.Sleep(10 * time.Millisecond)
		}
		synctest.Wait()
		if got := fired.Load(); got != 0 {
			t.Fatalf("fired %d times while changes kept coming within the quiet period, want 0", got)
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if got := fired.Load(); got != 1 {
			t.Fatalf("fired %d times after the changes stopped, want 1", got)
		}
		// 100 changes a second for 3 s: fires about every second, not
		// 300 times and not never.
		for range 300 {
			changes <- struct{}{}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if got := fired.Load() - 1; got < 3 || got > 4 {
			t.Errorf("fired %d times for 3 s of changes 100 a second, want 3 or 4", got)
		}
	})
}

// TestWatcherSeesRenameReplace: a file saved as editors do (a new file
// renamed over it) and one written in place are both reported; another
// file of the directory is not one of those watched.
func TestWatcherSeesRenameReplace(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "toolgate.yaml")
	other := filepath.Join(dir, "other.txt")
	if err := os.WriteFile(cfg, []byte("a: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := NewWatcher(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Set([]string{cfg}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	changes := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx, changes) }()
	defer func() { cancel(); _ = w.Close(); <-done }()

	expect := func(what string) {
		t.Helper()
		timer := time.NewTimer(5 * time.Second)
		defer timer.Stop()
		select {
		case <-changes:
		case <-timer.C:
			t.Fatalf("no change reported after %s", what)
		}
	}
	drain := func() {
		for {
			select {
			case <-changes:
			default:
				return
			}
		}
	}
	tmp := filepath.Join(dir, ".toolgate.yaml.swp")
	if err := os.WriteFile(tmp, []byte("a: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, cfg); err != nil {
		t.Fatal(err)
	}
	expect("a rename over the file")
	drain()
	if err := os.WriteFile(cfg, []byte("a: 4\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	expect("a write in place")
	if w.watched(other) || !w.watched(cfg) {
		t.Errorf("watched(other) = %v, watched(cfg) = %v; want false, true", w.watched(other), w.watched(cfg))
	}
}
