package gateway

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/gateway/internal/events"
	"github.com/toolgate/toolgate/internal/cluster/eventrelay"
	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// Call lifecycle events (package gateway/internal/events): the record
// step publishes each call's transitions (pending, running per attempt,
// completed or error) on g.events, which /events streams and /ui shows.

// newEventBus returns the bus of call events, its dropped subscribers and
// open subscriptions counted in reg. In a cluster its call IDs name the
// replica, and with relay (cluster.redis) its events reach the other
// replicas' watchers and theirs its own.
func newEventBus(reg *prometheus.Registry, cfg *config.Config, relay *eventrelay.Relay) *events.Bus {
	dropped := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "toolgate_events_dropped_total",
		Help: "Lifecycle event subscribers (/events, /ui) dropped for falling behind by more than the buffer.",
	})
	o := &events.Options{OnDrop: dropped.Inc}
	if cfg.Cluster != nil {
		o.Replica = cfg.Cluster.ReplicaID
	}
	if relay != nil {
		o.Remote = events.JSONRemote(relay)
	}
	b := events.NewBus(o)
	reg.MustRegister(dropped, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "toolgate_event_subscribers",
		Help: "Open lifecycle event subscriptions (/events streams, /ui pages).",
	}, func() float64 { return float64(b.Subscribers()) }))
	return b
}

// deliverEvent hands an event another replica relayed to g's watchers.
// It arrives only once g serves (the relay starts as g joins its
// cluster), when g.events is set.
func (g *Gateway) deliverEvent(raw json.RawMessage) { g.events.DeliverJSON(raw) }

// eventServer serves g's events at /events and the live calls page at
// /ui; with authentication on, each principal sees its own calls.
func (g *Gateway) eventServer() *events.Server {
	return &events.Server{Bus: g.events, Scoped: g.auth != nil, Sources: g.uiSources, Status: g.status}
}

// callEvent returns c's event in state with the fields every state has.
func callEvent(c *Call, state string) events.Event {
	return events.New(state, c.ID, c.Tool, c.Thread, c.Principal, c.Session)
}

// callPending gives c its ID and announces it, in an event and a debug
// line. The record step calls it once c is resolved.
func (g *Gateway) callPending(ctx context.Context, c *Call) {
	if c.ID == "" {
		c.ID = g.events.NextID()
	}
	if g.events.Active() {
		g.events.Publish(callEvent(c, events.StatePending))
	}
	if g.logger.Enabled(ctx, slog.LevelDebug) {
		g.logger.LogAttrs(ctx, slog.LevelDebug, "tool call pending",
			slog.String("call_id", c.ID), slog.String("tool", c.Tool.Name), slog.String("kind", string(c.Tool.Kind)),
			slog.String("thread", threadLabel(c.Thread)), slog.String("session", threadLabel(c.Session)),
			slog.String("principal", c.Principal))
	}
}

// onAttempt returns the [executors.Call.OnAttempt] of c: it counts c's
// attempts and announces each.
func (g *Gateway) onAttempt(ctx context.Context, c *Call) func(n int) {
	return func(n int) {
		c.attempts = n
		if g.events.Active() {
			e := callEvent(c, events.StateRunning)
			e.Attempt = n
			g.events.Publish(e)
		}
		if g.logger.Enabled(ctx, slog.LevelDebug) {
			g.logger.LogAttrs(ctx, slog.LevelDebug, "tool call running",
				slog.String("call_id", c.ID), slog.String("tool", c.Tool.Name), slog.Int("attempt", n))
		}
	}
}

// callEnded keeps c's outcome among the recent calls and announces it: res, or err when the chain returned
// one; class is "" for a success.
func (g *Gateway) callEnded(ctx context.Context, c *Call, res *Result, err error, class string, d time.Duration) {
	debug := g.logger.Enabled(ctx, slog.LevelDebug)
	e := callEvent(c, events.StateCompleted)
	e.Attempts, e.DurationMS, e.Cache = c.attempts, durationMS(d), c.cache
	if class != "" {
		e.State, e.Class = events.StateError, class
		e.Message = events.Message(errorMessage(res, err))
	}
	g.events.Remember(e)
	if g.events.Active() {
		g.events.Publish(e)
	}
	g.auditCall(ctx, c, class, d)
	if debug {
		msg := "tool call completed"
		if class != "" {
			msg = "tool call failed"
		}
		g.logger.LogAttrs(ctx, slog.LevelDebug, msg,
			slog.String("call_id", c.ID), slog.String("tool", c.Tool.Name), slog.Int("attempts", c.attempts),
			slog.String("class", class), slog.Float64("duration_ms", durationMS(d)))
	}
}

// durationMS is d in milliseconds, to the microsecond, as log lines,
// events and the audit trail give a call's duration: a key that says its
// unit, and a number every log pipeline reads (slog writes a bare
// time.Duration as nanoseconds in JSON).
func durationMS(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// errorMessage is the text the model saw of a failed call.
func errorMessage(res *Result, err error) string {
	if err != nil {
		return string(retry.Classify(err)) + ": " + err.Error()
	}
	return res.decoded().Text()
}

// uiSources are the tools by source, for /ui/state, that id (nil without
// authentication) may see (events.Listing.Sources).
func (g *Gateway) uiSources(id *principal.Identity) []events.Source {
	l := &events.Listing{Up: g.upstreamStatus(), Tools: g.reg.List(), NeedsAuth: g.upstreamNeedsAuth(),
		Backend: func(t *registry.Tool) (name, circuit string) {
			if b := g.res.Plan(t).Backend; b != nil {
				return b.Name(), b.State().String()
			}
			return "", ""
		}}
	return l.Sources(id)
}

// status is the gateway's status for /ui/state: ready, or shutting_down
// once it drains.
func (g *Gateway) status() string {
	if g.calls.IsDraining() {
		return "shutting_down"
	}
	return "ready"
}
