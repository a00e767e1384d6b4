package builtin

import (
	"context"
	"encoding/json"
	"time"
	_ "time/tzdata" // so IANA zones resolve on machines without a zoneinfo database

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// clockMaxZoneLen is the longest time zone name clock_now passes to
// time.LoadLocation; the longest IANA name is about 30 bytes.
const clockMaxZoneLen = 64

func clockTool() registry.Tool {
	return registry.Tool{
		Name:  "clock_now",
		Title: "Current time",
		Description: "Returns the current date and time in an IANA time zone (default UTC) as an RFC 3339 " +
			"timestamp with the zone's UTC offset, together with the zone name and the Unix time in " +
			"seconds. Use it whenever you need today's date or the time of day instead of guessing.",
		Kind:   registry.Stateless,
		Source: source,
		InputSchema: json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "timezone": {
      "type": "string",
      "minLength": 1,
      "maxLength": 64,
      "default": "UTC",
      "description": "An IANA time zone name such as \"UTC\", \"Europe/Paris\" or \"America/New_York\". Defaults to UTC."
    }
  },
  "additionalProperties": false
}`),
		OutputSchema: json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "time": {"type": "string", "format": "date-time", "description": "The current time in RFC 3339 form, with the zone's offset."},
    "timezone": {"type": "string", "description": "The IANA name of the zone used."},
    "unix": {"type": "integer", "description": "The current Unix time in seconds."}
  },
  "required": ["time", "timezone", "unix"],
  "additionalProperties": false
}`),
		Annotations: registry.Annotations{
			Title:           "Current time",
			ReadOnlyHint:    ptr(true),
			DestructiveHint: ptr(false),
			IdempotentHint:  ptr(true),
			OpenWorldHint:   ptr(false),
		},
		Idempotent: true,
	}
}

// clockArgs are clock_now's arguments.
type clockArgs struct {
	// Timezone is an IANA zone name; "" (absent or null) means UTC, the
	// schema's default.
	Timezone string `json:"timezone"`
}

// clockNow returns the clock_now tool's StatelessFunc, reading the time
// from now.
func clockNow(now func() time.Time) executors.StatelessFunc {
	return func(_ context.Context, args map[string]any) (executors.Result, error) {
		a, err := decode[clockArgs]("clock_now", args)
		if err != nil {
			return executors.Result{}, err
		}
		name := a.Timezone
		if name == "" {
			name = "UTC"
		}
		loc, err := loadZone(name)
		if err != nil {
			return executors.Result{}, err
		}
		t := now().In(loc)
		stamp := t.Format(time.RFC3339)
		return executors.Structured(map[string]any{
			"time":     stamp,
			"timezone": name,
			"unix":     t.Unix(),
		}, stamp), nil
	}
}

// loadZone resolves an IANA zone name. It rejects over-long names without
// looking them up, and "Local", which is not an IANA name and would reveal
// the server's zone.
func loadZone(name string) (*time.Location, error) {
	if len(name) > clockMaxZoneLen {
		return nil, fail(retry.Validation, "clock_now", "time zone name is %d bytes long, more than %d; use an IANA name like Europe/Paris", len(name), clockMaxZoneLen)
	}
	if name != "Local" {
		if loc, err := time.LoadLocation(name); err == nil {
			return loc, nil
		}
	}
	return nil, fail(retry.Validation, "clock_now", "unknown time zone %q; use an IANA name like Europe/Paris", name)
}
