package gateway

import (
	"embed"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
)

// uiFiles are the live calls page: plain HTML and a small script, no
// build step.
//
//go:embed ui/index.html ui/app.js
var uiFiles embed.FS

// serveUI serves the live calls page at /ui, its script at /ui/app.js and
// the tools' state at /ui/state. The page shows the tools by source with
// their state and follows /events.
func (g *Gateway) serveUI(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/ui", "/ui/":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		serveUIFile(w, "ui/index.html")
	case "/ui/app.js":
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		serveUIFile(w, "ui/app.js")
	case "/ui/state":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(g.uiState())
	default:
		http.NotFound(w, r)
	}
}

func serveUIFile(w http.ResponseWriter, name string) {
	b, err := uiFiles.ReadFile(name)
	if err != nil {
		http.Error(w, "missing embedded file "+name, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}

// uiSource is one source of tools on the page.
type uiSource struct {
	Source string `json:"source"`
	// Up is whether an upstream MCP server is up; absent for other sources.
	Up    *bool    `json:"up,omitempty"`
	Tools []uiTool `json:"tools"`
}

type uiTool struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Backend and Circuit name the backend the tool's calls go to and its
	// breaker's state (closed, open, half_open); absent without one.
	Backend string `json:"backend,omitempty"`
	Circuit string `json:"circuit,omitempty"`
}

// uiStateBody is /ui/state: the tools by source, and the latest calls
// (their final events, oldest first), so an opened page is not empty.
type uiStateBody struct {
	Status  string      `json:"status"`
	Sources []uiSource  `json:"sources"`
	Recent  []callEvent `json:"recent"`
}

func (g *Gateway) uiState() uiStateBody {
	ups := g.upstreamStatus()
	var sources []uiSource
	index := map[string]int{}
	for _, t := range g.reg.List() {
		i, ok := index[t.Source]
		if !ok {
			i = len(sources)
			index[t.Source] = i
			s := uiSource{Source: t.Source}
			if name, isUp := strings.CutPrefix(t.Source, "upstream:"); isUp {
				up := ups[name]
				s.Up = &up
			}
			sources = append(sources, s)
		}
		ut := uiTool{Name: t.Name, Kind: string(t.Kind)}
		if b := g.res.plan(t).Backend; b != nil {
			ut.Backend, ut.Circuit = b.Name(), b.State().String()
		}
		sources[i].Tools = append(sources[i].Tools, ut)
	}
	slices.SortFunc(sources, func(a, b uiSource) int { return strings.Compare(a.Source, b.Source) })
	status := "ready"
	if g.calls.isDraining() {
		status = "shutting_down"
	}
	return uiStateBody{Status: status, Sources: sources, Recent: g.events.recentCalls()}
}
