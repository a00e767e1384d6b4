package restsource

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors/rest"
	"github.com/toolgate/toolgate/executors/rest/openapi"
)

const specFetchTimeout = 30 * time.Second

// ReadSpec reads an OpenAPI document of at most limit bytes (zero or less:
// [openapi.DefaultMaxSpecBytes]) from a file or an http(s) URL, told apart
// as config told them apart when it checked the location: a URL holds
// "://" (and config has checked its scheme, in any case). A URL is fetched
// with client (nil: http.DefaultClient) within ctx and a 30 s timeout.
func ReadSpec(ctx context.Context, client *http.Client, location string, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = openapi.DefaultMaxSpecBytes
	}
	if !strings.Contains(location, "://") {
		f, err := os.Open(location)
		if err != nil {
			return nil, fmt.Errorf("reading the spec: %w", err)
		}
		defer f.Close()
		return readCapped(f, limit)
	}
	if client == nil {
		client = http.DefaultClient
	}
	ctx, cancel := context.WithTimeout(ctx, specFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, location, nil)
	if err != nil {
		return nil, fmt.Errorf("fetching the spec: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		// *url.Error repeats the URL, which may carry a token.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return nil, fmt.Errorf("fetching the spec from %s: %w", req.URL.Host, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching the spec: HTTP %s", strconv.Itoa(resp.StatusCode))
	}
	return readCapped(resp.Body, limit)
}

// readCapped reads a spec of at most limit bytes from r: one byte more
// is an error.
func readCapped(r io.Reader, limit int64) ([]byte, error) {
	b, err := rest.ReadCapped(r, limit+1, -1)
	if err != nil {
		return nil, fmt.Errorf("reading the spec: %w", err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("the spec is larger than max_spec_bytes (%d bytes); raise max_spec_bytes", limit)
	}
	return b, nil
}

// DocChanged reports whether o's document differs from the one its tools
// were made from; a document that cannot be read now counts as changed,
// so that a reload reports it.
func (l *Loader) DocChanged(ctx context.Context, o config.OpenAPISource) bool {
	old, ok := l.State.sum(o.Name)
	if !ok {
		return true // not loaded before: try again
	}
	doc, err := ReadSpec(ctx, l.Client, o.Spec, o.MaxSpecBytes)
	return err != nil || sha256.Sum256(doc) != old
}
