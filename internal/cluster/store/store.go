// Package store is the cluster's Redis as one replica sees it (issue
// 26): one client built from cluster.redis, and the watch on its health.
// A failed operation is counted each time and logged once per outage;
// while Redis is down, the packages that use it (rate limits,
// membership) run on what they know locally, and a probe pings Redis
// once a second until it answers again. Nothing of the URL but its
// host:port reaches a log line or an error: its password never does.
//
// It imports no toolgate package.
package store

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Defaults of [Options].
const (
	DefaultTimeout = 250 * time.Millisecond
	DefaultProbe   = time.Second
)

// Options configure a [Store]. The zero value works; a nil *Options is
// accepted.
type Options struct {
	// Logger receives the one warning of an outage and the line saying
	// Redis answers again. Default: discard.
	Logger *slog.Logger
	// OnError, when set, is told of every failed operation (a metric).
	OnError func()
	// Timeout bounds each operation, connecting included: Redis is on
	// the same network, and a call waiting for it waits this long at
	// most before its replica counts locally. Default 250ms.
	Timeout time.Duration
	// Probe is how often a Redis that is down is pinged. Default 1s.
	Probe time.Duration
}

// Store is a replica's connection to the cluster's Redis. Its methods are
// safe for concurrent use; Close releases it.
type Store struct {
	c      *redis.Client
	addr   string // host:port, what logs name
	secret string // the URL's password, kept out of messages
	o      Options
	down   atomic.Bool
	root   context.Context // ends at Close: the probe's lifetime
	cancel context.CancelFunc
	// mu guards closed and starting a probe, so that none starts once
	// Close waits for them.
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup // the probes
}

// Open returns the store of the Redis at rawURL (redis:// or rediss://)
// and pings it once: when it does not answer, Open says so once and the
// store starts down, probing until it answers. The error is only for a
// URL that is not a usable Redis URL; it never contains the URL.
func Open(ctx context.Context, rawURL string, o *Options) (*Store, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Probe <= 0 {
		opts.Probe = DefaultProbe
	}
	ro, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, errors.New("cluster.redis is not a usable Redis URL (" + reason(err) + "); write it like redis://[:password@]host:6379/0")
	}
	ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout = opts.Timeout, opts.Timeout, opts.Timeout
	ro.ContextTimeoutEnabled = true
	ro.MaxRetries = -1        // a failed operation falls back at once; the probe retries
	ro.DisableIdentity = true // no CLIENT SETINFO on each connection
	ro.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	// go-redis has no logger per client, only its own global one, which
	// prints a plain-text line to stderr for each failed dial: lines that
	// break toolgate's JSON logs and repeat for every call of an outage,
	// which is logged once here instead. Its errors all come back to Do.
	redis.SetLogger(quiet{})
	s := &Store{c: redis.NewClient(ro), addr: ro.Addr, secret: ro.Password, o: opts}
	s.root, s.cancel = context.WithCancel(context.Background())
	if err := s.ping(ctx); err != nil {
		s.fail(err, "cluster: redis did not answer at start; each replica counts rate limits locally (rate/N) and membership is the configured peers until it does")
	}
	return s, nil
}

// quiet is a go-redis logger that prints nothing.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// reason is err without the URL a *url.Error quotes (url.Parse's
// reasons name a character or the port, never the userinfo).
func reason(err error) string {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err.Error()
	}
	return err.Error()
}

// Addr is the Redis's host:port.
func (s *Store) Addr() string { return s.addr }

// Up reports whether Redis answered the last operation: false from a
// failure until the probe's ping, or another operation, succeeds.
func (s *Store) Up() bool { return !s.down.Load() }

// Do runs op against Redis, bounded by the store's timeout, and notes how
// it went: a failure is counted, and the first of an outage is logged and
// starts the probe; a success ends an outage. An error from a ctx that
// ended first is the caller's, and is not counted.
func (s *Store) Do(ctx context.Context, op func(ctx context.Context, c redis.Scripter) error) error {
	opCtx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	err := op(opCtx, s.c)
	switch {
	case err == nil:
		s.recovered()
	case ctx.Err() == nil:
		s.fail(err, "cluster: redis did not answer; each replica counts rate limits locally (rate/N) and keeps the last membership it read until it does")
	}
	return err
}

// Publish sends msg on channel, as [Store.Do] runs an operation, and
// returns how many subscribers received it.
func (s *Store) Publish(ctx context.Context, channel string, msg []byte) (int64, error) {
	var n int64
	err := s.Do(ctx, func(ctx context.Context, _ redis.Scripter) error {
		var err error
		n, err = s.c.Publish(ctx, channel, msg).Result()
		return err
	})
	return n, err
}

// Subscribe subscribes to channel on a connection of its own, which
// go-redis dials again whenever it breaks; the caller closes it.
func (s *Store) Subscribe(ctx context.Context, channel string) *redis.PubSub {
	return s.c.Subscribe(ctx, channel)
}

// fail counts a failure and, when Redis was up, logs msg once and starts
// the probe.
func (s *Store) fail(err error, msg string) {
	if s.o.OnError != nil {
		s.o.OnError()
	}
	if !s.down.CompareAndSwap(false, true) {
		return
	}
	s.o.Logger.Warn(msg, "redis", s.addr, "error", s.scrub(err))
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.wg.Go(s.probe)
	}
}

// recovered ends an outage, saying so.
func (s *Store) recovered() {
	if s.down.CompareAndSwap(true, false) {
		s.o.Logger.Info("cluster: redis answers again; rate limits are counted across replicas again", "redis", s.addr)
	}
}

// probe pings Redis every Probe until it answers or the store closes.
func (s *Store) probe() {
	t := time.NewTicker(s.o.Probe)
	defer t.Stop()
	for s.down.Load() {
		select {
		case <-s.root.Done():
			return
		case <-t.C:
		}
		if err := s.ping(s.root); err != nil {
			if s.o.OnError != nil && s.root.Err() == nil {
				s.o.OnError()
			}
			continue
		}
		s.recovered()
	}
}

func (s *Store) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	return s.c.Ping(ctx).Err()
}

// scrub is err's text without the password.
func (s *Store) scrub(err error) string {
	if s.secret == "" {
		return err.Error()
	}
	return strings.ReplaceAll(err.Error(), s.secret, "[redacted]")
}

// Close stops the probe and closes the client. Operations after Close
// fail.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return s.c.Close()
}
