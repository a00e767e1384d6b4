package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/builtin"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/reload"
)

// Check reads the configuration file at path (as --config names it: empty
// finds ./toolgate.yaml or the embedded default) and checks it whole, as
// serving it would, without starting anything: its keys and values, its
// REST tools and OpenAPI documents, its upstreams' settings, hooks and
// builtins. It returns every problem, each at file:line:col. `toolgate
// validate`, `toolgate reload` and a running server's reload run this
// same check.
func Check(path string) (*config.Config, int, error) {
	cfg, err := config.Resolve(path, &config.Options{Builtins: builtin.Names()})
	if err != nil {
		return nil, 0, err
	}
	g, err := gateway.New(cfg)
	if err != nil {
		return nil, 0, err
	}
	defer g.Close()
	if err := builtin.Register(g, cfg.Builtin, nil); err != nil {
		return nil, 0, fmt.Errorf("registering builtin tools: %w", err)
	}
	// serve starts without an OpenAPI source it cannot read (when it is
	// not the only source); the check reports it.
	if probs := g.SourceProblems(); len(probs) > 0 {
		return nil, 0, errors.Join(probs...)
	}
	return cfg, len(g.Tools()), nil
}

// Timing of a reload after a watched file changes: once the file has
// been quiet for reloadQuiet (an editor saves in several steps), or
// reloadMost after the first change when it keeps changing.
const (
	reloadQuiet = 200 * time.Millisecond
	reloadMost  = 2 * time.Second
)

// reloader applies the configuration file, changed, to a running gateway.
type reloader struct {
	path   string // as --config gave it, or the file found at start
	g      *gateway.Gateway
	logger *slog.Logger
	cfg    *config.Config  // the configuration applied last; the reload goroutine's only
	watch  *reload.Watcher // nil when not watching
}

// StartReload makes a running `serve` or `stdio` reload its configuration
// on SIGHUP and, when server.watch is on and the configuration is a file,
// when that file or an OpenAPI document it names by path changes. One
// reload runs at a time, with at most one more queued. stop stops
// reloading and waits for a reload in progress.
func StartReload(ctx context.Context, c *Common, cfg *config.Config, logger *slog.Logger, g *gateway.Gateway) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	r := &reloader{path: c.Config, g: g, logger: logger, cfg: cfg}
	fromFile := cfg.Source != config.EmbeddedSource
	if r.path == "" && fromFile {
		r.path = cfg.Source
	}
	q := reload.NewQueue()
	var wg sync.WaitGroup
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				logger.Info("SIGHUP: reloading the configuration")
				q.Request()
			}
		}
	})
	wg.Go(func() { q.Run(ctx, r.reload) })
	if cfg.Server.Watch && fromFile {
		r.startWatch(ctx, &wg, q)
	}
	return func() {
		signal.Stop(hup)
		cancel()
		if r.watch != nil {
			_ = r.watch.Close()
		}
		wg.Wait()
	}
}

// startWatch watches the configuration's files, requesting a reload on q
// when they change.
func (r *reloader) startWatch(ctx context.Context, wg *sync.WaitGroup, q *reload.Queue) {
	w, err := reload.NewWatcher(r.logger)
	if err != nil {
		r.logger.Warn("not watching the configuration; reload it with SIGHUP", "error", err.Error())
		return
	}
	r.watch = w
	files := watchedFiles(r.cfg)
	if err := w.Set(files); err != nil {
		r.logger.Warn("not watching every file of the configuration; reload it with SIGHUP", "error", err.Error())
	}
	changes := make(chan struct{}, 1)
	wg.Go(func() { w.Run(ctx, changes) })
	wg.Go(func() { reload.Debounce(ctx, changes, reloadQuiet, reloadMost, q.Request) })
	r.logger.Info("watching the configuration for changes", "files", len(files))
}

// watchedFiles are the files of cfg a change to which reloads it: the
// file itself and each OpenAPI document given as a path.
func watchedFiles(cfg *config.Config) []string {
	files := []string{cfg.Source}
	for _, o := range cfg.OpenAPI {
		if !strings.Contains(o.Spec, "://") {
			files = append(files, o.Spec)
		}
	}
	return files
}

// reload checks the configuration file whole and, when it is valid,
// applies its difference; when it is not, logs every problem and leaves
// the running configuration serving.
func (r *reloader) reload(context.Context) {
	cfg, _, err := Check(r.path)
	if err == nil {
		var applied *gateway.Applied
		if applied, err = r.g.Apply(cfg); err == nil {
			r.applyBuiltins(cfg)
			r.g.RecordReload(applied, nil)
			r.applied(cfg, applied)
			return
		}
	}
	r.g.RecordReload(nil, err)
	problems := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		problems = j.Unwrap()
	}
	for _, p := range problems {
		r.logger.Error("configuration problem", "problem", p.Error())
	}
	r.logger.Error("configuration reload failed; the running configuration serves on", "problems", len(problems))
}

// applyBuiltins switches the builtin tools on and off as cfg lists them.
func (r *reloader) applyBuiltins(cfg *config.Config) {
	var gone, added []string
	for _, n := range r.cfg.Builtin {
		if !slices.Contains(cfg.Builtin, n) {
			gone = append(gone, n)
		}
	}
	for _, n := range cfg.Builtin {
		if !slices.Contains(r.cfg.Builtin, n) {
			added = append(added, n)
		}
	}
	r.g.Unregister(gone...)
	if err := builtin.Register(r.g, added, nil); err != nil {
		r.logger.Error("registering builtin tools", "error", err.Error())
	}
}

// applied logs what a reload changed and what waits for a restart, and
// watches the files of the configuration now applied.
func (r *reloader) applied(cfg *config.Config, a *gateway.Applied) {
	for _, key := range a.Restart {
		r.logger.Warn("setting changed; it takes effect when toolgate restarts", "setting", key)
	}
	r.logger.Info("configuration reloaded", "added", strings.Join(a.Added, ","), "changed", strings.Join(a.Changed, ","),
		"removed", strings.Join(a.Removed, ","), "restart_needed", len(a.Restart), "tools", len(r.g.Tools()))
	r.cfg = cfg
	if r.watch != nil {
		if err := r.watch.Set(watchedFiles(cfg)); err != nil {
			r.logger.Warn("not watching every file of the configuration; reload it with SIGHUP", "error", err.Error())
		}
	}
}

// Invalid is the exit of a command whose configuration has problems:
// exit 1, every problem on a line of its own.
func Invalid(err error) ExitError {
	return ExitError{Code: 1, Msg: "invalid configuration:\n" + indent(err.Error())}
}

// WritePID writes the process ID to path, for `toolgate reload
// --pid-file`; an empty path writes nothing.
func WritePID(path string) error {
	if path == "" {
		return nil
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return fmt.Errorf("writing the pid file: %w", err)
	}
	return nil
}

// RemovePID removes the file WritePID wrote, when it still holds this
// process's ID.
func RemovePID(path string) {
	if path == "" {
		return
	}
	if pid, err := ReadPID(path, 0); err == nil && pid == os.Getpid() {
		_ = os.Remove(path)
	}
}

// ReadPID returns pid, or the process ID in the file path: exactly one of
// the two must be given.
func ReadPID(path string, pid int) (int, error) {
	switch {
	case path != "" && pid != 0:
		return 0, errors.New("give --pid-file or --pid, not both")
	case pid > 0:
		return pid, nil
	case path == "":
		return 0, errors.New("say which toolgate to reload: --pid-file FILE (as serve --pid-file wrote it) or --pid PID; or send it SIGHUP yourself (kill -HUP PID)")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("reading the pid file: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("the pid file %s holds no process ID", path)
	}
	return n, nil
}
