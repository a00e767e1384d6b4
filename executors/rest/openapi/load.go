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
func load(src Source) (*openapi3.T, error) {
	limit := src.maxSpecBytes()
	if int64(len(src.Spec)) > limit {
		return nil, fmt.Errorf("%w (%d bytes, over %d); raise max_spec_bytes", ErrSpecTooLarge, len(src.Spec), limit)
	}
	data := bytes.TrimPrefix(src.Spec, []byte("\xef\xbb\xbf"))
	var head struct {
		Swagger json.RawMessage `json:"swagger"`
		OpenAPI json.RawMessage `json:"openapi"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		j, yerr := yaml.YAMLToJSON(data)
		if yerr != nil {
			return nil, fmt.Errorf("the document is neither JSON nor YAML: %v; check that spec points at an OpenAPI document", firstLine(yerr.Error()))
		}
		data = j
		if err := json.Unmarshal(data, &head); err != nil {
			return nil, fmt.Errorf("the document is not a JSON or YAML mapping; check that spec points at an OpenAPI document")
		}
	}
	if head.Swagger == nil && head.OpenAPI == nil {
		return nil, errors.New(`the document has neither "openapi" nor "swagger" at its top; check that spec points at an OpenAPI 3 or Swagger 2.0 document`)
	}

	r := &refReader{limit: limit - int64(len(src.Spec))}
	loader := openapi3.NewLoader()
	loader.Context = context.Background()
	loader.ReadFromURIFunc = r.read
	var loc *url.URL
	if src.Location != "" && !strings.Contains(src.Location, "://") {
		abs, err := filepath.Abs(src.Location)
		if err == nil {
			r.dir = filepath.Dir(abs)
			loc = &url.URL{Path: filepath.ToSlash(abs)}
		}
	}

	if head.OpenAPI == nil {
		var doc2 openapi2.T
		if err := json.Unmarshal(data, &doc2); err != nil {
			return nil, fmt.Errorf("reading the Swagger 2.0 document: %v", firstLine(err.Error()))
		}
		doc, err := openapi2conv.ToV3WithLoader(&doc2, loader, loc)
		if err != nil {
			return nil, fmt.Errorf("converting the Swagger 2.0 document to OpenAPI 3: %v", firstLine(err.Error()))
		}
		return doc, nil
	}
	var doc *openapi3.T
	var err error
	if loc != nil {
		doc, err = loader.LoadFromDataWithPath(data, loc)
	} else {
		doc, err = loader.LoadFromData(data)
	}
	if err != nil {
		return nil, fmt.Errorf("loading the document: %v", firstLine(err.Error()))
	}
	return doc, nil
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
