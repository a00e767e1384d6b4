package restsource

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/config/configtest"
)

// TestReadSpecCap checks max_spec_bytes: a document of exactly the cap
// is read, one byte more is refused with advice.
func TestReadSpecCap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.yaml")
	if err := os.WriteFile(path, []byte(configtest.TinyOpenAPI), 0o600); err != nil {
		t.Fatal(err)
	}
	n := int64(len(configtest.TinyOpenAPI))
	if b, err := ReadSpec(t.Context(), nil, path, n); err != nil || string(b) != configtest.TinyOpenAPI {
		t.Errorf("ReadSpec at the cap = %d bytes, %v; want the document", len(b), err)
	}
	_, err := ReadSpec(t.Context(), nil, path, n-1)
	want := fmt.Sprintf("the spec is larger than max_spec_bytes (%d bytes); raise max_spec_bytes", n-1)
	if err == nil || err.Error() != want {
		t.Errorf("ReadSpec over the cap = %v, want %q", err, want)
	}
}

// TestReadSpecURL checks fetching a document: its body on 200, the
// status otherwise, and an error that names the host but never the
// URL's credentials.
func TestReadSpecURL(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/spec.yaml" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(configtest.TinyOpenAPI))
	}))
	defer srv.Close()
	if b, err := ReadSpec(t.Context(), srv.Client(), srv.URL+"/spec.yaml", 0); err != nil || string(b) != configtest.TinyOpenAPI {
		t.Errorf("ReadSpec = %d bytes, %v; want the document", len(b), err)
	}
	if _, err := ReadSpec(t.Context(), srv.Client(), srv.URL+"/other", 0); err == nil || err.Error() != "fetching the spec: HTTP 404" {
		t.Errorf("ReadSpec of a missing document = %v, want HTTP 404", err)
	}

	closed := httptest.NewServer(http.NotFoundHandler())
	host := strings.TrimPrefix(closed.URL, "http://")
	closed.Close()
	_, err := ReadSpec(t.Context(), nil, "http://user:pa55word@"+host+"/spec.yaml?token=t0ken", 0)
	if err == nil || !strings.HasPrefix(err.Error(), "fetching the spec from "+host+": ") ||
		strings.Contains(err.Error(), "pa55word") || strings.Contains(err.Error(), "t0ken") {
		t.Errorf("ReadSpec of a closed server = %v, want the host and no credentials", err)
	}
}
