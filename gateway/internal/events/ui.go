package events

import (
	"embed"
	"encoding/json"
	"net/http"

	"github.com/toolgate/toolgate/internal/principal"
)

// uiFiles are the live calls page: plain HTML and a small script, no
// build step.
//
//go:embed ui/index.html ui/app.js
var uiFiles embed.FS

// ServeUI serves the live calls page at /ui and its script at
// /ui/app.js: the same bytes to everyone, no data, so they need no token
// (a browser cannot send one when it navigates). The page reads
// /ui/state and follows /events itself, sending the bearer token it asks
// for when they answer 401; ServeUI serves neither.
func (s *Server) ServeUI(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/ui", "/ui/":
		// The page takes a token: no other page may frame it (a form
		// under someone else's clicks), and it loads and reaches nothing
		// but its own script and this gateway.
		w.Header().Set("Content-Security-Policy", uiPolicy)
		w.Header().Set("Referrer-Policy", "no-referrer")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		serveUIFile(w, "ui/index.html")
	case "/ui/app.js":
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		serveUIFile(w, "ui/app.js")
	default:
		http.NotFound(w, r)
	}
}

// uiPolicy is the page's Content-Security-Policy. Its only inline part is
// the stylesheet.
const uiPolicy = "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; " +
	"img-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'"

func serveUIFile(w http.ResponseWriter, name string) {
	b, err := uiFiles.ReadFile(name)
	if err != nil {
		http.Error(w, "missing embedded file "+name, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(b)
}

// ServeUIState serves /ui/state (stateBody) as r's principal may see it.
func (s *Server) ServeUIState(w http.ResponseWriter, r *http.Request) {
	var f Filter
	if err := s.scopeToViewer(r, &f); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	id := principal.From(r.Context())
	_ = json.NewEncoder(w).Encode(stateBody{Status: s.Status(), Principal: principal.NameOf(id), Sources: s.Sources(id), Recent: s.Bus.Recent(&f)})
}

// Source is one source of tools on the page.
type Source struct {
	Source string `json:"source"`
	// Up is whether an upstream MCP server is up; absent for other sources.
	Up *bool `json:"up,omitempty"`
	// NeedsAuth, for an upstream waiting for a person to authorize it, is
	// the command that does; absent otherwise.
	NeedsAuth string `json:"needs_auth,omitempty"`
	Tools     []Tool `json:"tools"`
}

// Tool is one tool on the page.
type Tool struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Backend and Circuit name the backend the tool's calls go to and its
	// breaker's state (closed, open, half_open); absent without one.
	Backend string `json:"backend,omitempty"`
	Circuit string `json:"circuit,omitempty"`
}

// stateBody is /ui/state: the tools by source, and the latest calls
// (their final events, oldest first), so an opened page is not empty.
// With authentication on, both are the principal's own: the tools it may
// see and the calls it made; Principal names it.
type stateBody struct {
	Status    string   `json:"status"`
	Principal string   `json:"principal,omitempty"`
	Sources   []Source `json:"sources"`
	Recent    []Event  `json:"recent"`
}
