package config

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// PosError is one problem in a configuration file, at a position an editor
// can jump to. [Parse], [Load], [Default], [Resolve] and [Config.Validate]
// return every problem they find as an [errors.Join] of *PosError values, so
// a caller can print one per line:
//
//	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() { ... }
//
// or simply print err, whose text has one problem per line. Use
// errors.AsType[*PosError] to reach the first one.
//
// Msg never contains a value that came from the environment.
type PosError struct {
	// File is the name given to [Parse] (for [Load], the path;
	// for [Default], [EmbeddedSource]).
	File string
	// Line and Col are 1-based, counting characters as an editor does.
	// Both are 0 when the problem has no position (a [Config] built in Go
	// and checked with [Config.Validate]).
	Line, Col int
	// Path is the dotted key path, e.g. "server.listen" or "builtin[2]";
	// empty for a syntax error.
	Path string
	// Msg says what is wrong and what to write instead.
	Msg string
}

// Error formats e as "file:line:col: path: msg", leaving out the parts that
// are empty.
func (e *PosError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(":")
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, "%d:%d:", e.Line, e.Col)
	}
	if b.Len() > 0 {
		b.WriteString(" ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// pos is a 1-based line and column.
type pos struct{ line, col int }

// joinSorted sorts errs (all *PosError) by position and joins them. It
// returns nil for no errors.
func joinSorted(errs []*PosError) error {
	if len(errs) == 0 {
		return nil
	}
	slices.SortStableFunc(errs, func(a, b *PosError) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
	})
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
	}
	return errors.Join(out...)
}

// oneLine keeps a message on one line, so that each problem in a joined
// error is exactly one line of text.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}

// Problem is something wrong with one value (or map key) of a
// configuration, found by the package that owns the rule (the REST
// executor for a URL template, registry for a tool name, the upstream
// executor for an upstream's settings). [Config.Locate] places it in the
// file.
type Problem struct {
	// Path is the key path, as in [PosError.Path]: "rest[0].url",
	// `upstreams[1].headers."Bad Header"`.
	Path string
	// Key reports that the problem is with the map key Path ends in (a
	// header name): the error then points at the key, and Got is the key.
	Key bool
	// Got is the offending value, shown quoted (and shortened) after Msg
	// unless it came from the environment; empty shows nothing.
	Got string
	// Msg says what is wrong and what to write instead. It must not
	// contain the value.
	Msg string
}

// Locate turns p into a *PosError at the position of p.Path in the file
// c was parsed from, formatted as every problem [Parse] reports: when the
// value came from ${...}, Got is not shown and the message says where the
// value came from instead. A Config built in Go has no positions: the
// error carries File (c.Source) and Path only.
func (c *Config) Locate(p Problem) *PosError {
	msg := p.Msg
	switch raw, env := c.where.fromEnv[p.Path]; {
	case p.Key:
		if p.Got != "" {
			msg += "; got " + quoteShort(p.Got)
		}
	case env:
		msg += " (value came from " + raw + ")"
	case p.Got != "":
		msg += "; got " + quoteShort(p.Got)
	}
	e := &PosError{File: c.Source, Path: p.Path, Msg: oneLine(msg)}
	if c.where.at != nil {
		at := c.where.at(p.Path)
		if kp, ok := c.where.keyAt[p.Path]; ok && p.Key {
			at = kp
		}
		e.Line, e.Col = at.line, at.col
	}
	return e
}

// positions is what the decoder learnt about where each value is written,
// kept on a parsed [Config] for [Config.Locate]. The zero value knows
// nothing (a Config built in Go).
type positions struct {
	// at positions a path (its own value, or its nearest ancestor's).
	at func(path string) pos
	// keyAt holds the positions of map keys.
	keyAt map[string]pos
	// fromEnv maps paths whose value came from ${...} to the text written
	// in the file.
	fromEnv map[string]string
}
