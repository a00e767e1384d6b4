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

// The limits of one thread's scratchpad, on top of the input schema's
// per-note ones (a key of 256 characters, a value of 65536): at most
// scratchpadMaxKeys notes and scratchpadMaxBytes of keys and values in all,
// counted in UTF-8 bytes.
const (
	scratchpadMaxKeys  = 1000
	scratchpadMaxBytes = 1 << 20
	// scratchpadNoteOverhead is what a note costs beyond its key and
	// value: two string headers and its share of the map.
	scratchpadNoteOverhead = 64
	// scratchpadMaxHeld is the most one scratchpad holds, its size hint
	// (executors.Factory.MaxBytes): threads.max_bytes_per_principal
	// charges it to the principal for every live scratchpad, so that
	// one principal (or every unauthenticated client together) holds at
	// most that many scratchpads' worth (issue 31: 1,000 named threads
	// pinned 0.78 GB).
	scratchpadMaxHeld = scratchpadMaxBytes + scratchpadMaxKeys*scratchpadNoteOverhead
)

func scratchpadTool() registry.Tool {
	return registry.Tool{
		Name:  "scratchpad",
		Title: "Scratchpad",
		Description: "A key-value notepad private to the current conversation thread; notes persist between " +
			"calls in the same thread and are lost when the thread ends. Operations: " +
			"op=put stores value under key (overwriting any previous note; at most 1000 keys and 1 MiB of keys and values in all); " +
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
		MaxBytes:   scratchpadMaxHeld,
	}
}

// scratchpad is one thread's notes. The executor serializes its calls, but
// it guards its state anyway so that Close may race with a call.
type scratchpad struct {
	mu     sync.Mutex
	notes  map[string]string // guarded by mu
	size   int               // bytes of notes' keys and values; guarded by mu
	closed bool              // guarded by mu
}

var (
	_ executors.Instance = (*scratchpad)(nil)
	_ io.Closer          = (*scratchpad)(nil)
)

// scratchpadArgs are scratchpad's arguments. Key and Value are nil when
// absent: which of them an operation needs is more than the input schema
// says.
type scratchpadArgs struct {
	Op    string  `json:"op"`
	Key   *string `json:"key"`
	Value *string `json:"value"`
}

// Call runs one scratchpad operation.
func (s *scratchpad) Call(_ context.Context, args map[string]any) (executors.Result, error) {
	a, err := decode[scratchpadArgs]("scratchpad", args)
	if err != nil {
		return executors.Result{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return executors.Result{}, fail(retry.Unavailable, "scratchpad", "this thread's scratchpad is closed")
	}
	switch a.Op {
	case "put":
		return s.put(a)
	case "get":
		return s.get(a)
	case "list":
		keys := slices.Sorted(maps.Keys(s.notes))
		if keys == nil {
			keys = []string{}
		}
		return executors.Structured(map[string]any{"keys": keys}, ""), nil
	case "clear":
		n := len(s.notes)
		clear(s.notes)
		s.size = 0
		text := fmt.Sprintf("cleared %d notes", n)
		if n == 1 {
			text = "cleared 1 note"
		}
		return executors.Structured(map[string]any{"removed": n}, text), nil
	}
	return executors.Result{}, fail(retry.Validation, "scratchpad", "unknown op %q; use one of put, get, list, clear", a.Op)
}

// put stores a note; s.mu is held.
func (s *scratchpad) put(a scratchpadArgs) (executors.Result, error) {
	if a.Key == nil {
		return executors.Result{}, needs("put", "key")
	}
	if a.Value == nil {
		return executors.Result{}, needs("put", "value")
	}
	key, value := *a.Key, *a.Value
	old, exists := s.notes[key]
	if !exists && len(s.notes) >= scratchpadMaxKeys {
		return executors.Result{}, fail(retry.Validation, "scratchpad",
			"this thread's scratchpad is full: it holds at most %d notes; overwrite an existing key or call op=clear", scratchpadMaxKeys)
	}
	size := s.size + len(key) + len(value)
	if exists {
		size -= len(key) + len(old)
	}
	if size > scratchpadMaxBytes {
		return executors.Result{}, fail(retry.Validation, "scratchpad",
			"this thread's scratchpad is full: its keys and values may take at most %d bytes (1 MiB) in all, and this put would make %d; "+
				"store less, overwrite a note with a shorter value or call op=clear", scratchpadMaxBytes, size)
	}
	s.notes[key] = value
	s.size = size
	return executors.Structured(map[string]any{"key": key}, "stored "+key), nil
}

// get reads a note; s.mu is held.
func (s *scratchpad) get(a scratchpadArgs) (executors.Result, error) {
	if a.Key == nil {
		return executors.Result{}, needs("get", "key")
	}
	key := *a.Key
	value, ok := s.notes[key]
	if !ok {
		return executors.Result{}, fail(retry.NotFound, "scratchpad", "no note %q in this thread's scratchpad; call op=list to see the keys", key)
	}
	return executors.Structured(map[string]any{"key": key, "value": value}, value), nil
}

// needs returns the validation error for a scratchpad operation op called
// without the argument arg it needs.
func needs(op, arg string) error {
	return fail(retry.Validation, "scratchpad", "op=%s needs the argument %q", op, arg)
}

// Close drops the notes. Later calls fail with class unavailable. Close is
// safe to call more than once and always returns nil.
func (s *scratchpad) Close() error {
	s.mu.Lock()
	s.notes = nil
	s.size = 0
	s.closed = true
	s.mu.Unlock()
	return nil
}
