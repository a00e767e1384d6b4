package openapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oasdiff/yaml"
)

// DefaultMaxSpecBytes is [Source.MaxSpecBytes] when it is zero: 16 MiB,
// the document and the files its $refs read together.
const DefaultMaxSpecBytes int64 = 16 << 20

// ErrSpecTooLarge is the cause of an [*Error] when a document (with the
// files it references) is larger than [Source.MaxSpecBytes].
var ErrSpecTooLarge = errors.New("the document is larger than max_spec_bytes")

// maxSpecBytes returns src's cap on the bytes read.
func (src Source) maxSpecBytes() int64 {
	if src.MaxSpecBytes > 0 {
		return src.MaxSpecBytes
	}
	return DefaultMaxSpecBytes
}

// load parses src's document into an OpenAPI 3 document with every $ref
// resolved: OpenAPI 3.0 and 3.1 as they are, Swagger 2.0 converted, YAML
// or JSON. A $ref to another document is read only when src.Location is a
// local file, and only from the directory that holds it (or below).
func load(src Source) (*openapi3.T, []string, error) {
	limit := src.maxSpecBytes()
	if int64(len(src.Spec)) > limit {
		return nil, nil, fmt.Errorf("%w (%d bytes, over %d); raise max_spec_bytes", ErrSpecTooLarge, len(src.Spec), limit)
	}
	data := bytes.TrimPrefix(src.Spec, []byte("\xef\xbb\xbf"))
	var head struct {
		Swagger json.RawMessage `json:"swagger"`
		OpenAPI json.RawMessage `json:"openapi"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		j, yerr := yaml.YAMLToJSON(data)
		if yerr != nil {
			return nil, nil, fmt.Errorf("the document is neither JSON nor YAML: %v; check that spec points at an OpenAPI document", firstLine(yerr.Error()))
		}
		data = j
		if err := json.Unmarshal(data, &head); err != nil {
			return nil, nil, fmt.Errorf("the document is not a JSON or YAML mapping; check that spec points at an OpenAPI document")
		}
	}
	if head.Swagger == nil && head.OpenAPI == nil {
		return nil, nil, errors.New(`the document has neither "openapi" nor "swagger" at its top; check that spec points at an OpenAPI 3 or Swagger 2.0 document`)
	}

	var loc *url.URL
	dir := ""
	if src.Location != "" && !strings.Contains(src.Location, "://") {
		abs, err := filepath.Abs(src.Location)
		if err == nil {
			dir = filepath.Dir(abs)
			loc = &url.URL{Path: filepath.ToSlash(abs)}
		}
	}
	newLoader := func() *openapi3.Loader {
		r := &refReader{dir: dir, limit: limit - int64(len(src.Spec))}
		loader := openapi3.NewLoader()
		loader.Context = context.Background()
		loader.ReadFromURIFunc = r.read
		return loader
	}

	if head.OpenAPI == nil {
		var doc2 openapi2.T
		if err := json.Unmarshal(data, &doc2); err != nil {
			return nil, nil, fmt.Errorf("reading the Swagger 2.0 document: %v", firstLine(err.Error()))
		}
		doc, err := openapi2conv.ToV3WithLoader(&doc2, newLoader(), loc)
		if err != nil {
			return nil, nil, fmt.Errorf("converting the Swagger 2.0 document to OpenAPI 3: %v", firstLine(err.Error()))
		}
		return doc, nil, nil
	}
	var repairs []string
	for {
		loader := newLoader()
		var doc *openapi3.T
		var err error
		if loc != nil {
			doc, err = loader.LoadFromDataWithPath(data, loc)
		} else {
			doc, err = loader.LoadFromData(data)
		}
		if err == nil {
			return doc, repairs, nil
		}
		// A few shapes kin-openapi's decoder refuses are repaired, each
		// with a warning, so that the rest of the document is served.
		fixed, what, ok := repairDocument(data, err)
		if !ok || len(repairs) >= maxRepairs {
			return nil, nil, fmt.Errorf("loading the document: %v", firstLine(err.Error()))
		}
		data = fixed
		repairs = append(repairs, what)
	}
}

// maxRepairs bounds the repairs made to one document.
const maxRepairs = 20

// oapiBadData matches kin-openapi's error for a $ref to the wrong kind of
// object.
var oapiBadData = regexp.MustCompile(`bad data in "#([^"]*)"`)

// repairDocument fixes what err says kin-openapi could not decode in the
// JSON document data: a schema's pattern that is not a string (dropped),
// a schema's examples that is not a list (dropped), or an element at a
// JSON pointer that refers to the wrong kind of object (removed from its
// list, or replaced with an empty schema or response). what describes
// the repair; ok is false when err is none of these.
func repairDocument(data []byte, err error) (fixed []byte, what string, ok bool) {
	msg := err.Error()
	var doc any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if dec.Decode(&doc) != nil {
		return nil, "", false
	}
	switch {
	case strings.Contains(msg, "into field Schema.pattern"):
		n := 0
		walkJSON(doc, func(m map[string]any) {
			if v, has := m["pattern"]; has {
				if _, isStr := v.(string); !isStr && (m["type"] != nil || m["properties"] != nil || m["format"] != nil) {
					delete(m, "pattern")
					n++
				}
			}
		})
		what = fmt.Sprintf("dropped %d schema patterns that are not strings", n)
		ok = n > 0
	case strings.Contains(msg, "into field Schema.examples"):
		n := 0
		walkJSON(doc, func(m map[string]any) {
			if v, has := m["examples"]; has {
				if _, isList := v.([]any); !isList && (m["type"] != nil || m["properties"] != nil || m["items"] != nil) {
					delete(m, "examples")
					n++
				}
			}
		})
		what = fmt.Sprintf("dropped %d schema examples that are not lists", n)
		ok = n > 0
	default:
		sm := oapiBadData.FindStringSubmatch(msg)
		if sm == nil {
			return nil, "", false
		}
		response := strings.Contains(msg[strings.Index(msg, sm[0]):], "expecting ref to response object")
		// kin-openapi names either the $ref that points at the wrong
		// kind of object, or its target: the references to the target
		// are dropped (an empty schema or response is left), else the
		// element itself.
		n := 0
		walkJSON(doc, func(m map[string]any) {
			if ref, _ := m["$ref"].(string); ref == "#"+sm[1] {
				delete(m, "$ref")
				if response {
					m["description"] = ""
				}
				n++
			}
		})
		switch {
		case n > 0:
			ok = true
			what = fmt.Sprintf("dropped %d references to #%s, which is the wrong kind of object there", n, sm[1])
		default:
			ok = removeAt(doc, sm[1], response)
			what = fmt.Sprintf("removed #%s: it refers to the wrong kind of object", sm[1])
		}
	}
	if !ok {
		return nil, "", false
	}
	out, merr := json.Marshal(doc)
	if merr != nil {
		return nil, "", false
	}
	return out, what, true
}

// walkJSON calls f on every object in v.
func walkJSON(v any, f func(map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		f(x)
		for _, e := range x {
			walkJSON(e, f)
		}
	case []any:
		for _, e := range x {
			walkJSON(e, f)
		}
	}
}

// removeAt removes the element at the JSON pointer ptr from doc: from its
// list, or replaced by an empty response ({"description": ""}) when
// response is set, or else by an empty schema ({}). It reports whether ptr
// was found.
func removeAt(doc any, ptr string, response bool) bool {
	toks := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	for i, t := range toks {
		if u, err := url.PathUnescape(t); err == nil {
			t = u
		}
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	if len(toks) == 0 || toks[0] == "" {
		return false
	}
	parent := doc
	setParent := func(any) {} // replaces parent where it is held
	for _, t := range toks[:len(toks)-1] {
		switch x := parent.(type) {
		case map[string]any:
			key := t
			parent, setParent = x[key], func(v any) { x[key] = v }
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(x) {
				return false
			}
			parent, setParent = x[i], func(v any) { x[i] = v }
		default:
			return false
		}
	}
	last := toks[len(toks)-1]
	switch x := parent.(type) {
	case map[string]any:
		if _, has := x[last]; !has {
			return false
		}
		if response {
			x[last] = map[string]any{"description": ""}
		} else {
			x[last] = map[string]any{}
		}
		return true
	case []any:
		i, err := strconv.Atoi(last)
		if err != nil || i < 0 || i >= len(x) {
			return false
		}
		setParent(slices.Delete(slices.Clone(x), i, i+1))
		return true
	}
	return false
}

// refReader reads the files a document's $refs name: only local files in
// dir or below, at most limit bytes in all.
type refReader struct {
	dir   string // "" when the document is not a local file
	limit int64
}

func (r *refReader) read(_ *openapi3.Loader, u *url.URL) ([]byte, error) {
	if u.Scheme != "" && u.Scheme != "file" || u.Host != "" {
		return nil, fmt.Errorf("reference to %s: only files next to the spec are read, never URLs; download it next to the spec", u.Redacted())
	}
	if r.dir == "" {
		return nil, fmt.Errorf("reference to %s: the spec is not a local file, so its references to other files cannot be read; download the spec and the files it references into one directory", u.Path)
	}
	p := filepath.Clean(filepath.FromSlash(u.Path))
	if !filepath.IsAbs(p) {
		p = filepath.Join(r.dir, p)
	}
	rel, err := filepath.Rel(r.dir, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("reference to %s: only files in the spec's directory (or below) are read", u.Path)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("reading the referenced file %s: %w", rel, errors.Unwrap(err))
	}
	defer f.Close()
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(f, r.limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading the referenced file %s: %v", rel, err)
	}
	if n > r.limit {
		return nil, fmt.Errorf("%w with the files it references; raise max_spec_bytes", ErrSpecTooLarge)
	}
	r.limit -= n
	return buf.Bytes(), nil
}

// firstLine returns the first line of s, at most 300 bytes: kin-openapi's
// errors may append whole schemas.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimRight(s[:i], ": ")
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
