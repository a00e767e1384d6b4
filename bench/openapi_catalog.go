package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/gateway"
)

// modeOpenAPICatalog measures what tools/list costs a client for one
// OpenAPI document served both ways: one tool per operation (catalog:
// tools) and three meta-tools (catalog: search).
const modeOpenAPICatalog = "openapi-catalog"

// runOpenAPICatalog serves p.spec both ways and reports, for each, the
// tools listed and the size of the whole tools/list result (every page)
// as JSON.
func runOpenAPICatalog(ctx context.Context, p params, stdout, _ io.Writer) error {
	if p.spec == "" {
		return fmt.Errorf("-mode %s needs -spec, an OpenAPI document (a file)", modeOpenAPICatalog)
	}
	fmt.Fprintf(stdout, "| catalog | tools listed | tools/list bytes | ≈ tokens (bytes/4) | pages | start | peak RSS |\n|---|---|---|---|---|---|---|\n")
	for _, mode := range []config.Catalog{config.CatalogTools, config.CatalogSearch} {
		n, size, pages, start, err := catalogListSize(ctx, p.spec, mode)
		if errors.Is(err, errRefused) {
			// A document too large to serve as one tool per operation
			// is refused (gateway's per-source bound): a result, not a
			// failure of the bench.
			fmt.Fprintf(stdout, "| %s | refused | | | | %s | %s |\n", mode, start.Round(10*time.Millisecond), peakRSS())
			fmt.Fprintf(stdout, "\n%v\n\n", err)
			continue
		}
		if err != nil {
			return fmt.Errorf("catalog %s: %w", mode, err)
		}
		fmt.Fprintf(stdout, "| %s | %d | %d | %d | %d | %s | %s |\n", mode, n, size, size/4, pages, start.Round(10*time.Millisecond), peakRSS())
	}
	return nil
}

// errRefused marks a document the gateway refused to build.
var errRefused = errors.New("refused")

// peakRSS is the process's peak resident set so far (VmHWM), or "?"
// where /proc does not say: the modes run in one process, so the second
// row's includes the first's.
func peakRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "?"
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err == nil {
				return fmt.Sprintf("%d MB", kb>>10)
			}
		}
	}
	return "?"
}

// catalogListSize starts a gateway serving spec with catalog mode and
// lists its tools over streamable HTTP: how many, the bytes of the tools
// as JSON (the tools arrays of every page), the pages, and how long the
// gateway took to build.
func catalogListSize(ctx context.Context, spec string, mode config.Catalog) (tools, size, pages int, start time.Duration, err error) {
	cfg, err := config.Default(nil)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	cfg.Builtin = nil
	cfg.OpenAPI = []config.OpenAPISource{{Name: "api", Spec: spec, BaseURL: "http://127.0.0.1:9",
		MaxSpecBytes: 1 << 30, MaxResponseBytes: 1 << 20, Catalog: mode}}
	t0 := time.Now()
	g, err := gateway.New(cfg)
	if err != nil {
		if strings.Contains(err.Error(), "serve it with catalog: search") {
			return 0, 0, 0, time.Since(t0), fmt.Errorf("%w: %w", errRefused, err)
		}
		return 0, 0, 0, 0, err
	}
	defer g.Close()
	start = time.Since(t0)
	srv := httptest.NewServer(g.Handler())
	defer srv.Close()
	c, err := connect(ctx, &target{url: srv.URL + "/mcp", client: http.DefaultClient})
	if err != nil {
		return 0, 0, 0, 0, err
	}
	defer c.Close()
	var req mcp.ListToolsRequest
	for {
		res, err := c.ListTools(ctx, req)
		if err != nil {
			return 0, 0, 0, 0, fmt.Errorf("tools/list: %w", err)
		}
		pages++
		tools += len(res.Tools)
		b, err := json.Marshal(res.Tools)
		if err != nil {
			return 0, 0, 0, 0, err
		}
		size += len(b)
		if res.NextCursor == "" {
			return tools, size, pages, start, nil
		}
		req.Params.Cursor = res.NextCursor
	}
}
