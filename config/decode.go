package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"

	"github.com/toolgate/toolgate/internal/keypath"
)

// maxDepth bounds how deeply the decoder descends, whatever the input.
const maxDepth = 64

// decoder turns goccy's AST into typed values, strictly: unknown keys, wrong
// types and bad ${...} references each become a *PosError, and decoding goes
// on, so that one pass reports every problem.
//
// We walk the AST ourselves instead of calling yaml.NodeToValue with
// yaml.Strict(): goccy's decoder stops at the first error, its messages
// name Go types rather than the shape to write, and a type error on a value
// that came from ${ENV} must not show the value.
type decoder struct {
	file   string
	lookup func(string) (string, bool)
	errs   []*PosError
	// anchors holds each &name seen so far, for *name.
	anchors map[string]ast.Node
	// at maps a path to the position of its value ("server.listen") or, for
	// a section, of its key ("server"). [validate] positions errors with it.
	at map[string]pos
	// fromEnv maps the path of every scalar that held ${...} to the scalar as
	// written in the file, e.g. "${MAX:-1000}".
	fromEnv map[string]string
	// keyAt maps the path of every map entry to the position of its key.
	keyAt map[string]pos
	// broken holds the path of every section that was not a mapping.
	broken map[string]bool
	// failed holds the path of every value that could not be decoded.
	failed map[string]bool
	// jsonBytes counts the JSON written for json.RawMessage fields so far,
	// against maxJSONBytes; jsonTooBig says the cap was reported.
	jsonBytes  int
	jsonTooBig bool
	// secrets lists, once each and in the order first used, the non-empty
	// values lookup supplied to ${...}; see [Config.Secrets].
	secrets []string
}

func newDecoder(file string, lookup func(string) (string, bool)) *decoder {
	d := &decoder{
		file:    file,
		anchors: map[string]ast.Node{},
		at:      map[string]pos{"": {1, 1}},
		fromEnv: map[string]string{},
		keyAt:   map[string]pos{},
		broken:  map[string]bool{},
		failed:  map[string]bool{},
	}
	// Every ${...} is resolved through here, so recording what the
	// environment returns catches each value at the moment it is used. A
	// default written after :- is used only when this returns "", so it is
	// never recorded.
	d.lookup = func(name string) (string, bool) {
		v, ok := lookup(name)
		if ok && v != "" && !slices.Contains(d.secrets, v) {
			d.secrets = append(d.secrets, v)
		}
		return v, ok
	}
	return d
}

func (d *decoder) errorf(p pos, path, format string, args ...any) {
	d.failed[path] = true
	d.errs = append(d.errs, &PosError{File: d.file, Line: p.line, Col: p.col, Path: path, Msg: oneLine(fmt.Sprintf(format, args...))})
}

// locate returns the position for path: its own, else its nearest ancestor's.
func (d *decoder) locate(path string) pos {
	for {
		if p, ok := d.at[path]; ok {
			return p
		}
		path = parentPath(path)
	}
}

// parentPath returns the path one level up: "server" for "server.listen",
// "builtin" for "builtin[2]", "" for a top-level key.
func parentPath(path string) string {
	if strings.HasSuffix(path, "]") {
		if i := strings.LastIndexByte(path, '['); i >= 0 {
			return path[:i]
		}
	}
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[:i]
	}
	return ""
}

// childPath appends key to path in the one key-path syntax.
func childPath(path, key string) string { return keypath.Child(path, key) }

// syntaxError turns a parser error into a positioned error.
func (d *decoder) syntaxError(err error) error {
	p, msg := pos{1, 1}, err.Error()
	if ye, ok := errors.AsType[yaml.Error](err); ok {
		msg = ye.GetMessage()
		if tk := ye.GetToken(); tk != nil && tk.Position != nil && tk.Position.Line > 0 {
			p = pos{tk.Position.Line, max(tk.Position.Column, 1)}
		}
	}
	d.errorf(p, "", "invalid YAML: %s", msg)
	return joinSorted(d.errs)
}

// nodePos returns where n starts, as an editor counts.
func nodePos(n ast.Node) pos {
	switch x := n.(type) {
	case *ast.MappingNode:
		// A block mapping's own token is the first ":"; point at the first key.
		if !x.IsFlowStyle && len(x.Values) > 0 && x.Values[0].Key != nil {
			return nodePos(x.Values[0].Key)
		}
	case *ast.AnchorNode:
		if x.Value != nil {
			return nodePos(x.Value)
		}
	}
	if n == nil {
		return pos{1, 1}
	}
	tk := n.GetToken()
	if tk == nil || tk.Position == nil || tk.Position.Line < 1 {
		return pos{1, 1}
	}
	return pos{tk.Position.Line, max(tk.Position.Column, 1)}
}

// valuePos returns the position of mv's value, or kp, the key's, when the
// key has no value.
func valuePos(mv *ast.MappingValueNode, kp pos) pos {
	if n, ok := mv.Value.(*ast.NullNode); mv.Value == nil || ok && (n.Token == nil || n.Token.Type == token.ImplicitNullType) {
		return kp
	}
	return nodePos(mv.Value)
}

// written reports whether the file gave path a value that decoded; the
// decoder reported any that did not, so [complete] fills in the default
// instead of leaving a zero for validation to complain about again.
func (d *decoder) written(path string) bool {
	_, ok := d.at[path]
	return ok && !d.failed[path]
}

// setAt records p for path unless an outer node already did.
func (d *decoder) setAt(path string, p pos) {
	if _, ok := d.at[path]; !ok {
		d.at[path] = p
	}
}

// scalar is a YAML scalar ready to be converted to a Go value.
type scalar struct {
	// kind is "string", "integer", "number", "boolean" or "null".
	kind string
	// text is the value: for a string, after ${...} expansion; otherwise the
	// token as written.
	text string
	// env, when not empty, is the scalar as written in the file, and says
	// the value came from the environment: text must never be shown.
	env string
	// node is the AST node, for integers and booleans.
	node ast.Node
}

// describe says what s is, for "expected X, got Y". It never shows a value
// from the environment.
func (s scalar) describe() string {
	switch {
	case s.env != "":
		return "a value from the environment"
	case s.kind == "null":
		return "no value"
	case s.kind == "string":
		return "string " + quoteShort(s.text)
	}
	return s.kind + " " + s.text
}

// mismatch formats "expected X, got Y", or for a value from the
// environment "expected X (value came from ${NAME})".
func (s scalar) mismatch(expected string) string {
	if s.env != "" {
		return fmt.Sprintf("expected %s (value came from %s)", expected, s.env)
	}
	return fmt.Sprintf("expected %s, got %s", expected, s.describe())
}

// quoteShort quotes s, shortened to keep error lines readable.
func quoteShort(s string) string {
	const limit = 60
	if r := []rune(s); len(r) > limit {
		return strconv.Quote(string(r[:limit])) + "…"
	}
	return strconv.Quote(s)
}

// toScalar converts a scalar node, expanding ${...} in strings. ok is false
// for collections, and also when expansion failed (the error is recorded).
func (d *decoder) toScalar(path string, n ast.Node) (s scalar, isScalar, ok bool) {
	switch x := n.(type) {
	case *ast.NullNode:
		return scalar{kind: "null", node: n}, true, true
	case *ast.BoolNode:
		return scalar{kind: "boolean", text: x.Token.Value, node: n}, true, true
	case *ast.IntegerNode:
		return scalar{kind: "integer", text: x.Token.Value, node: n}, true, true
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return scalar{kind: "number", text: n.GetToken().Value, node: n}, true, true
	case *ast.StringNode:
		return d.expandScalar(path, n, x.Value)
	case *ast.LiteralNode:
		text := ""
		if x.Value != nil {
			text = x.Value.Value
		}
		return d.expandScalar(path, n, text)
	case *ast.TagNode:
		if x.Start != nil && x.Start.Value == "!!str" {
			if v, isSc := x.Value.(ast.ScalarNode); isSc {
				text := v.GetToken().Value
				if sn, isStr := v.(*ast.StringNode); isStr {
					text = sn.Value
				}
				return d.expandScalar(path, n, text)
			}
		}
	}
	return scalar{}, false, false
}

func (d *decoder) expandScalar(path string, n ast.Node, text string) (scalar, bool, bool) {
	lookup := d.lookup
	if runtimePath.MatchString(path) {
		if strings.ContainsRune(text, 0) {
			// Refused here, before it could pass for InstanceDirRef.
			d.errorf(nodePos(n), path, "must not contain NUL")
			return scalar{}, true, false
		}
		// Set per process by the upstream executor, not by the environment
		// toolgate runs in: kept as written for it to replace.
		lookup = func(name string) (string, bool) {
			if name == InstanceDirVar {
				return InstanceDirRef, true
			}
			return d.lookup(name)
		}
	}
	out, fromEnv, err := expand(text, lookup)
	if err != nil {
		d.errorf(nodePos(n), path, "%v", err)
		return scalar{}, true, false
	}
	s := scalar{kind: "string", text: out, node: n}
	if fromEnv {
		s.env = text
		d.fromEnv[path] = text
	}
	return s, true, true
}

// collectionName names a non-scalar node for "got ...".
func collectionName(n ast.Node) string {
	switch n.(type) {
	case *ast.MappingNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.TagNode:
		return "a tagged value"
	}
	return "a " + strings.ToLower(n.Type().String())
}

// anchor registers the value of an anchor (&name) for later aliases.
func (d *decoder) anchor(x *ast.AnchorNode) {
	if x.Name != nil && x.Name.GetToken() != nil {
		d.anchors[x.Name.GetToken().Value] = x.Value
	}
}

// alias returns the value an alias (*name) refers to; false, after an
// error, when no anchor defined it before.
func (d *decoder) alias(x *ast.AliasNode, p pos, path string) (ast.Node, bool) {
	name := ""
	if x.Value != nil && x.Value.GetToken() != nil {
		name = x.Value.GetToken().Value
	}
	target, ok := d.anchors[name]
	if !ok {
		d.errorf(p, path, "unknown alias *%s; define it earlier with &%s", name, name)
	}
	return target, ok
}

// strTag reports whether a tag is !!str, the one tag toolgate reads (its
// value is read as it would be untagged); else it reports an error.
func (d *decoder) strTag(x *ast.TagNode, p pos, path string) bool {
	if x.Start != nil && x.Start.Value == "!!str" {
		return true
	}
	tag := ""
	if x.Start != nil {
		tag = x.Start.Value
	}
	d.errorf(p, path, "unsupported tag %s; remove it", tag)
	return false
}

// decode stores node n, found at path, into v. p is where the value is
// written: usually nodePos(n), but the key's position for a key with no
// value, whose implicit null token sits somewhere after the colon.
func (d *decoder) decode(path string, n ast.Node, p pos, v reflect.Value, depth int) {
	if n == nil {
		n = ast.Null(nil)
	}
	d.setAt(path, p)
	if depth > maxDepth {
		d.errorf(p, path, "nested too deeply")
		return
	}
	switch x := n.(type) {
	case *ast.AnchorNode:
		d.decode(path, x.Value, nodePos(x.Value), v, depth+1)
		d.anchor(x) // after its value, so an anchor cannot refer to itself
		return
	case *ast.AliasNode:
		if target, ok := d.alias(x, p, path); ok {
			d.decode(path, target, nodePos(target), v, depth+1)
		}
		return
	case *ast.TagNode:
		if !d.strTag(x, p, path) {
			return
		}
	case *ast.CommentGroupNode:
		n = ast.Null(nil)
	}

	switch {
	case isDuration(v.Type()):
		d.decodeDuration(path, n, v, p)
		return
	case v.Type() == reflect.TypeFor[json.RawMessage]():
		d.decodeJSON(path, n, v, depth)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		d.decodePointer(path, n, v, p, depth)
	case reflect.Struct:
		d.decodeStruct(path, n, v, p, depth)
	case reflect.Slice:
		d.decodeSlice(path, n, v, p, depth)
	case reflect.Map:
		d.decodeMap(path, n, v, p, depth)
	default:
		d.decodeScalar(path, n, v, p)
	}
}

// decodePointer decodes into a new value for v to point at, starting from
// what v points at already. An empty section (a key with no value) leaves a
// pointer to a struct nil, which means "not set"; an optional scalar
// (*bool) with no value is an error like any scalar.
func (d *decoder) decodePointer(path string, n ast.Node, v reflect.Value, p pos, depth int) {
	elem := v.Type().Elem()
	if _, null := n.(*ast.NullNode); null && elem.Kind() == reflect.Struct {
		v.SetZero()
		return
	}
	nv := reflect.New(elem)
	if !v.IsNil() {
		nv.Elem().Set(v.Elem())
	}
	d.decode(path, n, p, nv.Elem(), depth+1)
	v.Set(nv)
}

func (d *decoder) decodeDuration(path string, n ast.Node, v reflect.Value, p pos) {
	const want = "a duration"
	s, isScalar, ok := d.toScalar(path, n)
	switch {
	case !isScalar:
		d.errorf(p, path, "expected %s like 30s, got %s", want, collectionName(n))
	case !ok:
	case s.kind == "string":
		dur, err := parseDuration(s.text)
		if err != nil {
			d.errorf(p, path, "%s; %v", s.mismatch(want), err)
			return
		}
		v.SetInt(int64(dur))
	case s.kind == "null":
		d.errorf(p, path, "expected %s like 30s, got no value; write one or delete the key", want)
	default:
		// A bare number: 30 could mean seconds or nanoseconds.
		d.errorf(p, path, "%s; %v", s.mismatch(want), errDurationUnit)
	}
}

// decodeScalar decodes the scalar n into v. One case per Go kind a scalar
// may land in, each with its own message: a table, kept whole on purpose.
func (d *decoder) decodeScalar(path string, n ast.Node, v reflect.Value, p pos) {
	want := expectedName(v.Type())
	s, isScalar, ok := d.toScalar(path, n)
	if !isScalar {
		d.errorf(p, path, "expected %s, got %s", want, collectionName(n))
		return
	}
	if !ok {
		return
	}
	if s.kind == "null" {
		d.errorf(p, path, "expected %s, got no value; write one or delete the key", want)
		return
	}
	switch v.Kind() {
	case reflect.String:
		// Any scalar reads as its text: listen: 8080 is "8080".
		v.SetString(s.text)
	case reflect.Bool:
		switch {
		case s.kind == "boolean":
			v.SetBool(s.node.(*ast.BoolNode).Value)
		case s.env != "" && isBoolText(s.text):
			v.SetBool(strings.EqualFold(s.text, "true"))
		default:
			d.errorf(p, path, "%s", s.mismatch(want))
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		var i int64
		var err error
		switch {
		case s.kind == "integer":
			switch iv := s.node.(*ast.IntegerNode).Value.(type) {
			case int64:
				i = iv
			case uint64:
				if iv > math.MaxInt64 {
					err = strconv.ErrRange
				}
				i = int64(iv)
			}
		case s.kind == "string" && (s.env != "" || isPlain(s.node) && isDigits(s.text)):
			// A value from the environment converts by the target type;
			// goccy reads a plain integer too large for int64 as a string.
			i, err = strconv.ParseInt(s.text, 10, 64)
		default:
			err = strconv.ErrSyntax
		}
		switch {
		case errors.Is(err, strconv.ErrRange) && s.env == "":
			d.errorf(p, path, "integer %s is out of range", s.text)
		case err != nil:
			d.errorf(p, path, "%s", s.mismatch(want))
		case v.OverflowInt(i) && s.env == "":
			d.errorf(p, path, "integer %s is out of range", s.text)
		case v.OverflowInt(i):
			d.errorf(p, path, "integer out of range (value came from %s)", s.env)
		default:
			v.SetInt(i)
		}
	case reflect.Float64:
		var f float64
		var err error
		switch {
		case s.kind == "integer" || s.kind == "number" || s.kind == "string" && s.env != "":
			f, err = strconv.ParseFloat(strings.ReplaceAll(s.text, "_", ""), 64)
		default:
			err = strconv.ErrSyntax
		}
		switch {
		case err != nil && s.env == "" && errors.Is(err, strconv.ErrRange):
			d.errorf(p, path, "number %s is out of range", s.text)
		case err != nil || math.IsNaN(f) || math.IsInf(f, 0):
			d.errorf(p, path, "%s", s.mismatch(want))
		default:
			v.SetFloat(f)
		}
	default:
		d.errorf(p, path, "internal error: config cannot decode a field of type %s", v.Type())
	}
}

func (d *decoder) decodeStruct(path string, n ast.Node, v reflect.Value, p pos, depth int) {
	fields := structFields(v.Type())
	if _, null := n.(*ast.NullNode); null {
		return // an empty section keeps its defaults
	}
	m, ok := n.(*ast.MappingNode)
	if !ok {
		d.broken[path] = true
		got := collectionName(n)
		if s, isScalar, ok := d.toScalar(path, n); isScalar {
			if !ok {
				return
			}
			got = s.describe()
			if s.env != "" {
				d.errorf(p, path, "expected a mapping with keys %s (value came from %s)", fields.names(), s.env)
				return
			}
		}
		d.errorf(p, path, "expected a mapping with keys %s, got %s", fields.names(), got)
		return
	}
	for k, mv := range d.keys(path, m) {
		key, kp, cp := k.key, k.pos, k.path
		idx, ok := fields.index(key)
		if !ok {
			d.errorf(kp, cp, "unknown key; valid keys: %s", fields.names())
			continue
		}
		fv := v.Field(idx)
		if isSection(fv.Type()) {
			// A section's errors, when no key inside it is to blame, point at
			// its key.
			d.setAt(cp, kp)
		}
		d.decode(cp, mv.Value, valuePos(mv, kp), fv, depth+1)
	}
}

// mapKey is a key of a mapping: its text, its position and its path.
type mapKey struct {
	key, path string
	pos       pos
}

// keys yields the keys of m at path with their entries, each key once: a
// key that is not a scalar, or one set again, is reported and skipped.
func (d *decoder) keys(path string, m *ast.MappingNode) iter.Seq2[mapKey, *ast.MappingValueNode] {
	return func(yield func(mapKey, *ast.MappingValueNode) bool) {
		seen := map[string]pos{}
		for _, mv := range m.Values {
			key, keyNode, ok := d.key(path, mv)
			if !ok {
				continue
			}
			k := mapKey{key: key, path: childPath(path, key), pos: nodePos(keyNode)}
			if first, dup := seen[key]; dup {
				d.errorf(k.pos, k.path, "duplicate key; it is already set at line %d", first.line)
				continue
			}
			seen[key] = k.pos
			if !yield(k, mv) {
				return
			}
		}
	}
}

// key returns the text of mv's key, recording an error for keys that are
// not scalars.
func (d *decoder) key(path string, mv *ast.MappingValueNode) (string, ast.Node, bool) {
	var k ast.Node = mv.Key
	for range maxDepth {
		switch x := k.(type) {
		case *ast.MappingKeyNode:
			k = x.Value
		case *ast.AnchorNode:
			k = x.Value
		case *ast.TagNode:
			k = x.Value
		case *ast.MergeKeyNode:
			d.errorf(nodePos(k), path, "merge keys (<<) are not supported; write the keys out")
			return "", nil, false
		case *ast.StringNode:
			return x.Value, k, true
		case ast.ScalarNode:
			if tk := x.GetToken(); tk != nil {
				return tk.Value, k, true
			}
			k = nil
		default:
			k = nil
		}
		if k == nil {
			break
		}
	}
	p := nodePos(mv)
	if mv.Key != nil {
		p = nodePos(mv.Key)
	}
	d.errorf(p, path, "keys must be plain strings")
	return "", nil, false
}

func (d *decoder) decodeSlice(path string, n ast.Node, v reflect.Value, p pos, depth int) {
	switch x := n.(type) {
	case *ast.NullNode:
		v.SetZero()
		return
	case *ast.SequenceNode:
		if len(x.Values) == 0 {
			v.SetZero()
			return
		}
		out := reflect.MakeSlice(v.Type(), len(x.Values), len(x.Values))
		for i, el := range x.Values {
			d.decode(fmt.Sprintf("%s[%d]", path, i), el, nodePos(el), out.Index(i), depth+1)
		}
		v.Set(out)
		return
	}
	d.notCollection(path, n, p, "a list")
}

func (d *decoder) decodeMap(path string, n ast.Node, v reflect.Value, p pos, depth int) {
	if v.Type().Key().Kind() != reflect.String {
		d.errorf(p, path, "internal error: config cannot decode a field of type %s", v.Type())
		return
	}
	switch x := n.(type) {
	case *ast.NullNode:
		v.SetZero()
		return
	case *ast.MappingNode:
		out := reflect.MakeMapWithSize(v.Type(), len(x.Values))
		for k, mv := range d.keys(path, x) {
			key, kp, cp := k.key, k.pos, k.path
			d.keyAt[cp] = kp
			el := reflect.New(v.Type().Elem()).Elem()
			d.decode(cp, mv.Value, valuePos(mv, kp), el, depth+1)
			out.SetMapIndex(reflect.ValueOf(key).Convert(v.Type().Key()), el)
		}
		v.Set(out)
		return
	}
	d.notCollection(path, n, p, "a mapping")
}

// notCollection reports a scalar (or the wrong collection) where a
// collection was expected.
func (d *decoder) notCollection(path string, n ast.Node, p pos, want string) {
	s, isScalar, ok := d.toScalar(path, n)
	switch {
	case !isScalar:
		d.errorf(p, path, "expected %s, got %s", want, collectionName(n))
	case ok:
		d.errorf(p, path, "%s", s.mismatch(want))
	}
}

// expectedName names the YAML shape that decodes into t.
func expectedName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Float64:
		return "a number"
	}
	return "a " + t.Kind().String()
}

func isSection(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return (t.Kind() == reflect.Struct && !isDuration(t)) || t.Kind() == reflect.Map
}

func isDuration(t reflect.Type) bool { return t == reflect.TypeFor[Duration]() }

func isBoolText(s string) bool {
	switch s {
	case "true", "True", "TRUE", "false", "False", "FALSE":
		return true
	}
	return false
}

// isPlain reports whether n is an unquoted scalar.
func isPlain(n ast.Node) bool {
	tk := n.GetToken()
	return tk != nil && tk.Type == token.StringType
}

func isDigits(s string) bool {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// fieldList is the yaml keys of a struct, in declaration order.
type fieldList []struct {
	name  string
	index int
}

// structFields lists t's fields by yaml key. A field tagged `yaml:"-"` or
// unexported is skipped; an untagged field uses its lower-cased name, as
// goccy/go-yaml does.
func structFields(t reflect.Type) fieldList {
	var out fieldList
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out = append(out, struct {
			name  string
			index int
		}{name, i})
	}
	return out
}

func (fl fieldList) index(key string) (int, bool) {
	for _, f := range fl {
		if f.name == key {
			return f.index, true
		}
	}
	return 0, false
}

func (fl fieldList) names() string {
	names := make([]string, len(fl))
	for i, f := range fl {
		names[i] = f.name
	}
	return strings.Join(names, ", ")
}
