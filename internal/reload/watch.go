package reload

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"

	"github.com/fsnotify/fsnotify"
)

// Watcher reports changes to a set of files. It watches their
// directories, not the files: editors save by writing a new file and
// renaming it over the old one, which a watch on the old file's inode
// would miss from then on. Create it with [NewWatcher]; the creator calls
// [Watcher.Close].
type Watcher struct {
	w      *fsnotify.Watcher
	logger *slog.Logger

	// mu guards files and dirs.
	mu    sync.Mutex
	files map[string]bool // cleaned absolute paths of the files watched
	dirs  map[string]bool // their directories, watched
}

// NewWatcher returns a watcher of no files yet; logger may be nil.
func NewWatcher(logger *slog.Logger) (*Watcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watching the configuration: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Watcher{w: w, logger: logger, files: map[string]bool{}, dirs: map[string]bool{}}, nil
}

// Set makes files the set watched, replacing the one before (a reload
// may name other OpenAPI documents). A directory that cannot be watched
// is an error; the files of the others are watched still.
func (w *Watcher) Set(files []string) error {
	want, dirs := map[string]bool{}, map[string]bool{}
	for _, f := range files {
		abs, err := filepath.Abs(f)
		if err != nil {
			return fmt.Errorf("watching %s: %w", f, err)
		}
		want[abs] = true
		dirs[filepath.Dir(abs)] = true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var firstErr error
	for d := range dirs {
		if w.dirs[d] {
			continue
		}
		if err := w.w.Add(d); err != nil {
			delete(dirs, d)
			if firstErr == nil {
				firstErr = fmt.Errorf("watching %s: %w", d, err)
			}
		}
	}
	for d := range w.dirs {
		if !dirs[d] {
			_ = w.w.Remove(d)
		}
	}
	w.files, w.dirs = want, dirs
	return firstErr
}

// Run sends on changes (without blocking: a change already pending
// stands for this one) whenever a watched file is written, created,
// renamed or removed, until ctx is done or the watcher is closed.
func (w *Watcher) Run(ctx context.Context, changes chan<- struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.w.Events:
			if !ok {
				return
			}
			if ev.Op == fsnotify.Chmod || !w.watched(ev.Name) {
				continue
			}
			select {
			case changes <- struct{}{}:
			default:
			}
		case err, ok := <-w.w.Errors:
			if !ok {
				return
			}
			// An overflowed queue loses events: reload to be sure.
			w.logger.Warn("watching the configuration", "error", err.Error())
			select {
			case changes <- struct{}{}:
			default:
			}
		}
	}
}

// watched reports whether name is one of the files watched.
func (w *Watcher) watched(name string) bool {
	abs, err := filepath.Abs(name)
	if err != nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.files[abs]
}

// Close stops watching; Run returns.
func (w *Watcher) Close() error { return w.w.Close() }
