package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"

	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

const (
	// scratchpadMaxKeys is the most notes one thread's scratchpad holds.
	scratchpadMaxKeys = 1000
	// scratchpadMaxKeyLen and scratchpadMaxValueLen bound a note, in
	// characters.
	scratchpadMaxKeyLen   = 256
	scratchpadMaxValueLen = 65536
)

func scratchpadTool() registry.Tool {
	return registry.Tool{
		Name:  "scratchpad",
		Title: "Scratchpad",
		Description: "A key-value notepad private to the current conversation thread; notes persist between " +
			"calls in the same thread and are lost when the thread ends. Operations: " +
			"op=put stores value under key (overwriting any previous note; at most 1000 keys); " +
			"op=get returns the note stored under key; op=list returns all keys, sorted; " +
			"op=clear deletes every note and reports how many were removed.",
		Kind:   registry.Stateful,
		Source: source,
		InputSchema: json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "op": {
      "type": "string",
      "enum": ["put", "get", "list", "clear"],
      "description": "The operation: put (needs key and value), get (needs key), list or clear."
    },
    "key": {
      "type": "string",
      "minLength": 1,
      "maxLength": 256,
      "description": "The note's key, for put and get."
    },
    "value": {
      "type": "string",
      "maxLength": 65536,
      "description": "The text to store, for put."
    }
  },
  "required": ["op"],
  "additionalProperties": false
}`),
		OutputSchema: json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "key": {"type": "string", "description": "The key written (put) or read (get)."},
    "value": {"type": "string", "description": "The note read (get)."},
    "keys": {"type": "array", "items": {"type": "string"}, "description": "Every key, sorted (list)."},
    "removed": {"type": "integer", "minimum": 0, "description": "How many notes were deleted (clear)."}
  },
  "additionalProperties": false
}`),
		Annotations: registry.Annotations{
			Title:           "Scratchpad",
			ReadOnlyHint:    ptr(false),
			DestructiveHint: ptr(true), // put overwrites, clear deletes
			IdempotentHint:  ptr(true), // repeating a call leaves the same notes
			OpenWorldHint:   ptr(false),
		},
		Idempotent: true,
	}
}

// scratchpadFactory returns the factory of scratchpad instances, one per
// thread.
func scratchpadFactory() executors.Factory {
	return executors.Factory{
		New: func(context.Context, string) (executors.Instance, error) {
			return &scratchpad{notes: map[string]string{}}, nil
		},
		Concurrent: false,
	}
}

// scratchpad is one thread's notes. The executor serializes its calls, but
// it guards its state anyway so that Close may race with a call.
type scratchpad struct {
	mu     sync.Mutex
	notes  map[string]string // guarded by mu
	closed bool              // guarded by mu
}

var (
	_ executors.Instance = (*scratchpad)(nil)
	_ io.Closer          = (*scratchpad)(nil)
)

// Call runs one scratchpad operation.
func (s *scratchpad) Call(_ context.Context, args map[string]any) (executors.Result, error) {
	if err := checkKnown("scratchpad", args, "op", "key", "value"); err != nil {
		return executors.Result{}, err
	}
	op, ok, err := stringArg("scratchpad", args, "op")
	if err != nil {
		return executors.Result{}, err
	}
	if !ok {
		return executors.Result{}, fail(retry.Validation, "scratchpad", `missing required argument "op"; use one of put, get, list, clear`)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return executors.Result{}, fail(retry.Unavailable, "scratchpad", "this thread's scratchpad is closed")
	}
	switch op {
	case "put":
		return s.put(args)
	case "get":
		return s.get(args)
	case "list":
		keys := slices.Sorted(maps.Keys(s.notes))
		if keys == nil {
			keys = []string{}
		}
		return executors.Structured(map[string]any{"keys": keys}, ""), nil
	case "clear":
		n := len(s.notes)
		clear(s.notes)
		text := fmt.Sprintf("cleared %d notes", n)
		if n == 1 {
			text = "cleared 1 note"
		}
		return executors.Structured(map[string]any{"removed": n}, text), nil
	}
	return executors.Result{}, fail(retry.Validation, "scratchpad", "unknown op %q; use one of put, get, list, clear", op)
}

// put stores a note; s.mu is held.
func (s *scratchpad) put(args map[string]any) (executors.Result, error) {
	key, err := s.key("put", args)
	if err != nil {
		return executors.Result{}, err
	}
	value, ok, err := stringArg("scratchpad", args, "value")
	if err != nil {
		return executors.Result{}, err
	}
	if !ok {
		return executors.Result{}, fail(retry.Validation, "scratchpad", `op=put needs the argument "value"`)
	}
	if err := checkLen("scratchpad", "value", value, 0, scratchpadMaxValueLen); err != nil {
		return executors.Result{}, err
	}
	if _, exists := s.notes[key]; !exists && len(s.notes) >= scratchpadMaxKeys {
		return executors.Result{}, fail(retry.Execution, "scratchpad",
			"scratchpad is full (%d keys); overwrite an existing key or call op=clear", scratchpadMaxKeys)
	}
	s.notes[key] = value
	return executors.Structured(map[string]any{"key": key}, "stored "+key), nil
}

// get reads a note; s.mu is held.
func (s *scratchpad) get(args map[string]any) (executors.Result, error) {
	key, err := s.key("get", args)
	if err != nil {
		return executors.Result{}, err
	}
	value, ok := s.notes[key]
	if !ok {
		return executors.Result{}, fail(retry.NotFound, "scratchpad", "no note %q in this thread's scratchpad; call op=list to see the keys", key)
	}
	return executors.Structured(map[string]any{"key": key, "value": value}, value), nil
}

// key returns the key argument, which op requires.
func (s *scratchpad) key(op string, args map[string]any) (string, error) {
	key, ok, err := stringArg("scratchpad", args, "key")
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fail(retry.Validation, "scratchpad", "op=%s needs the argument \"key\"", op)
	}
	if err := checkLen("scratchpad", "key", key, 1, scratchpadMaxKeyLen); err != nil {
		return "", err
	}
	return key, nil
}

// Close drops the notes. Later calls fail with class unavailable. Close is
// safe to call more than once and always returns nil.
func (s *scratchpad) Close() error {
	s.mu.Lock()
	s.notes = nil
	s.closed = true
	s.mu.Unlock()
	return nil
}
