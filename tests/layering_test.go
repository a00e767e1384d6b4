package tests

import (
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/toolgate/toolgate"

// allowed lists, for each package, the toolgate packages it may import
// (docs/architecture.md). Third-party imports are checked separately:
// mcp-go's server only in the MCP front (gateway/internal/mcpfront), its
// client only in executors/mcpup; gateway itself imports no mcp-go.
var allowed = map[string][]string{
	"cmd/toolgate":                   {"config", "gateway", "internal/buildinfo", "internal/cli", "internal/gcfloor", "internal/oauthclient", "internal/upstreamoauth", "registry"},
	"cmd/toolgate-agent":             {"agent", "internal/cli"},
	"internal/cli":                   {"builtin", "config", "gateway", "internal/buildinfo", "internal/reload", "internal/textcut"},
	"agent":                          {"executors", "gateway", "internal/canonjson", "internal/loopguard", "registry", "retry", "schemas"},
	"builtin":                        {"registry", "executors", "retry"},
	"gateway":                        {"config", "internal/audit", "internal/buildinfo", "registry", "executors", "executors/rest", "executors/rest/openapi", "executors/mcpup", "gateway/internal/mcpfront", "gateway/internal/handles", "gateway/internal/hooks", "gateway/internal/mcpwire", "gateway/internal/resultedit", "gateway/internal/origin", "internal/auth", "internal/callslot", "internal/canonjson", "internal/httpheader", "internal/loopguard", "internal/mcppeer", "internal/oauthclient", "internal/principal", "internal/textcut", "threadctx", "retry", "schemas", "gateway/internal/forward", "gateway/internal/replica", "internal/cluster", "internal/cluster/eventrelay", "gateway/internal/catalogtool", "gateway/internal/events", "gateway/internal/gzipjson", "internal/telemetry", "internal/telemetry/otlp", "internal/resultcache", "internal/rpcrefusal", "gateway/internal/callshare", "gateway/internal/resilience", "gateway/internal/configerr", "gateway/internal/restsource", "gateway/internal/gatewaymetrics", "gateway/internal/loopstep", "gateway/internal/upstreamset", "gateway/internal/batchtool", "gateway/internal/callcache", "gateway/internal/reloadplan", "internal/upstreamoauth", "gateway/internal/threadname", "gateway/internal/inflight"},
	"gateway/internal/mcpfront":      {"executors", "gateway/internal/reqmeta", "gateway/internal/continuation", "gateway/internal/idle", "gateway/internal/mcpwire", "gateway/internal/origin", "gateway/internal/reqbody", "gateway/internal/sessionlimit", "gateway/internal/subscriptions", "internal/canonjson", "internal/mcppeer", "internal/principal", "registry", "gateway/internal/replica", "gateway/internal/forward", "threadctx", "internal/telemetry", "gateway/internal/surface", "gateway/internal/eventstream"},
	"gateway/internal/origin":        {"config", "internal/rpcrefusal"},
	"gateway/internal/reqbody":       {},
	"gateway/internal/mcpwire":       {"executors", "registry"},
	"gateway/internal/idle":          {},
	"gateway/internal/subscriptions": {},
	"gateway/internal/surface":       {"internal/mcppeer", "internal/principal"},
	"gateway/internal/eventstream":   {},
	"gateway/internal/sessionlimit":  {},
	"gateway/internal/continuation":  {"internal/canonjson", "internal/mcppeer", "gateway/internal/replica"},
	"gateway/internal/resultedit":    {"executors"},
	"gateway/internal/handles":       {"executors", "gateway/internal/replica", "gateway/internal/resultedit", "registry", "retry"},
	"gateway/internal/catalogtool":   {"executors", "executors/rest", "executors/rest/openapi", "internal/principal", "registry", "retry"},
	"gateway/internal/restsource":    {"config", "executors", "executors/rest", "executors/rest/openapi", "gateway/internal/catalogtool", "gateway/internal/configerr", "registry"},
	"gateway/internal/configerr":     {"config", "internal/httpheader", "registry"},
	"gateway/internal/events":        {"internal/principal", "internal/textcut", "registry", "threadctx"},
	"gateway/internal/gzipjson":      {},
	"gateway/internal/batchtool":     {"executors", "gateway/internal/mcpwire", "registry", "retry"},
	"gateway/internal/callcache":     {"config", "executors", "gateway/internal/mcpwire", "internal/canonjson", "internal/resultcache", "registry", "retry"},
	"gateway/internal/hooks":         {"config", "executors", "executors/rest", "gateway/internal/mcpwire", "gateway/internal/resultedit", "internal/textcut", "registry", "retry", "threadctx"},
	"gateway/internal/replica":       {},
	"gateway/internal/forward":       {},
	"gateway/internal/callshare":     {"retry"},
	"gateway/internal/reloadplan":    {"config"},
	"gateway/internal/resilience":    {"config", "registry", "retry"},
	"gateway/internal/upstreamset":   {"config", "executors", "executors/mcpup", "gateway/internal/configerr", "internal/mcppeer", "registry", "schemas"},
	"executors/mcpup":                {"executors", "internal/callslot", "internal/httpheader", "internal/mcppeer", "internal/jsonscan", "internal/oauthclient", "internal/principal", "internal/redact", "registry", "threadctx", "retry", "internal/telemetry"},
	"internal/oauthclient":           {},
	"internal/upstreamoauth":         {"config", "internal/oauthclient"},
	"gateway/internal/threadname":    {"retry", "threadctx"},
	"gateway/internal/inflight":      {},
	"executors":                      {"registry", "threadctx", "retry", "internal/telemetry"},
	"executors/rest":                 {"executors", "internal/httpheader", "internal/redact", "registry", "retry", "internal/telemetry"},
	"executors/rest/openapi":         {"executors/rest", "internal/textcut", "registry"},
	"executors/rest/openapi/corpus":  {"executors/rest", "executors/rest/openapi"},
	"registry":                       {"schemas", "internal/keypath", "internal/textcut"},
	"schemas":                        {"internal/textcut"},
	"threadctx":                      {"internal/principal"},
	"internal/principal":             {},
	"internal/reload":                {},
	"internal/canonjson":             {},
	"internal/resultcache":           {},
	"internal/rpcrefusal":            {},
	"internal/mcppeer":               {},
	"internal/callslot":              {},
	"internal/loopguard":             {"internal/canonjson"},
	"internal/jsonscan":              {},
	"gateway/internal/reqmeta":       {"internal/jsonscan", "threadctx"},
	"internal/gcfloor":               {},
	"internal/buildinfo":             {},
	"internal/audit":                 {},
	"internal/syncbuf":               {},
	"internal/textcut":               {},
	"internal/auth":                  {"config", "internal/httpheader", "internal/principal", "internal/rpcrefusal"},
	"retry":                          {},
	"retry/retrytest":                {},
	"config/configtest":              {"config"},
	"internal/httpheader":            {},
	"internal/redact":                {},
	"config":                         {"internal/httpheader", "internal/keypath"},
	"internal/keypath":               {},
	"internal/telemetry":             {},
	"internal/telemetry/otlp":        {"config", "internal/telemetry"},
	"internal/cluster":               {"config", "internal/auth", "internal/cluster/eventrelay", "internal/cluster/members", "internal/cluster/ratelimit", "internal/cluster/store"},
	"internal/cluster/store":         {},
	"internal/cluster/ratelimit":     {},
	"internal/cluster/members":       {},
	"internal/cluster/eventrelay":    {},
	"bench/cluster":                  {},
	"bench/callpath":                 {},
	"bench/idlesessions":             {},
	"bench/toexecutor":               {"config", "gateway"},
	"bench":                          {"config", "gateway", "registry", "executors", "executors/rest", "executors/rest/openapi", "executors/rest/openapi/corpus", "builtin"},
	"tests":                          {"internal/prereq"},
	"examples/petstore-api":          {},

	// The Prometheus collectors, split out of gateway (issue 25).
	"gateway/internal/gatewaymetrics": {"internal/buildinfo", "registry", "retry"},
	"gateway/internal/loopstep":       {"config", "executors", "internal/canonjson", "internal/loopguard", "retry"},

	// Test helpers, imported by tests only.
	"internal/loopguard/loopguardtest": {},
	"internal/redistest":               {"internal/prereq", "internal/syncbuf"},
	"internal/prereq":                  {},
}

// thirdParty lists, for third-party module prefixes confined to some
// packages, the packages allowed to import them.
var thirdParty = map[string][]string{
	"github.com/mark3labs/mcp-go/server":    {"gateway/internal/mcpfront", "bench", "bench/toexecutor"},
	"github.com/mark3labs/mcp-go/client":    {"agent", "bench", "executors/mcpup"},
	"github.com/mark3labs/mcp-go":           {"gateway/internal/mcpfront", "gateway/internal/continuation", "gateway/internal/surface", "gateway/internal/mcpwire", "gateway/internal/reqmeta", "gateway/internal/origin", "bench", "executors/mcpup", "agent", "bench/toexecutor"},
	"github.com/go-chi/chi":                 {"gateway"},
	"github.com/prometheus/client_golang":   {"gateway", "gateway/internal/gatewaymetrics"},
	"github.com/santhosh-tekuri/jsonschema": {"schemas"},
	"github.com/goccy/go-yaml":              {"config", "tests"},
	"github.com/hashicorp/go-retryablehttp": {"executors/rest"},
	"github.com/klauspost/compress":         {"gateway/internal/gzipjson"},
	"github.com/getkin/kin-openapi":         {"executors/rest/openapi"},
	"github.com/oasdiff/yaml":               {"executors/rest/openapi"},
	"github.com/anthropics":                 {"agent"},
	"github.com/openai/openai-go":           {"agent"},
	"github.com/coreos/go-oidc":             {"internal/auth"},
	"golang.org/x/time/rate":                {"internal/auth"},
	"golang.org/x/sync/singleflight":        {"internal/auth"},
	"github.com/fsnotify/fsnotify":          {"internal/reload"},
	"golang.org/x/oauth2":                   {"internal/oauthclient"},
	"github.com/go-jose/go-jose":            {"internal/oauthclient", "internal/auth"},
	"gopkg.in/natefinch/lumberjack":         {"internal/audit"},
	"go.opentelemetry.io/otel":              {"internal/telemetry", "internal/telemetry/otlp"},
	"go.opentelemetry.io/otel/sdk":          {"internal/telemetry/otlp"},
	"go.opentelemetry.io/otel/exporters":    {"internal/telemetry/otlp"},
	"github.com/redis/go-redis":             {"internal/cluster/store", "internal/cluster/ratelimit", "internal/cluster/members", "internal/cluster/eventrelay"},
}

func TestLayering(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
			return filepath.SkipDir
		}
		pkg, err := build.ImportDir(path, 0)
		if err != nil {
			return nil // no Go files here
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		seen++
		allow, ok := allowed[rel]
		if !ok {
			t.Errorf("package %s is not in the layering allow-list; add it to tests/layering_test.go and docs/architecture.md", rel)
			return nil
		}
		for _, imp := range pkg.Imports {
			if dep, ok := strings.CutPrefix(imp, module+"/"); ok {
				if !slices.Contains(allow, dep) {
					t.Errorf("%s imports %s; allowed toolgate imports: %v", rel, dep, allow)
				}
				continue
			}
			for prefix, who := range thirdParty {
				if strings.HasPrefix(imp, prefix) && !slices.Contains(who, rel) && !longerPrefixAllows(imp, prefix, rel) {
					t.Errorf("%s imports %s, which only %v may import", rel, imp, who)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 8 {
		t.Fatalf("checked only %d packages; is the walk rooted at the module?", seen)
	}
}

// longerPrefixAllows reports whether a more specific prefix than prefix
// matches imp and allows rel (so "mcp-go/client" rules override "mcp-go").
func longerPrefixAllows(imp, prefix, rel string) bool {
	for p, who := range thirdParty {
		if len(p) > len(prefix) && strings.HasPrefix(imp, p) {
			return slices.Contains(who, rel)
		}
	}
	return false
}

// TestToolgateLinksNoModelSDK checks that the toolgate binary links neither
// package agent nor the model providers' SDKs, whose package init and code
// cost about 9 MiB of RSS in every process, serve included (Go runs every
// linked package's init whatever the subcommand): the agent loop is the
// separate toolgate-agent binary, which `toolgate agent` runs.
func TestToolgateLinksNoModelSDK(t *testing.T) {
	// The SDKs, by import path prefix.
	sdks := []string{"github.com/anthropics/anthropic-sdk-go", "github.com/openai/openai-go", "google.golang.org/genai"}
	isSDK := func(dep string) string {
		for _, p := range sdks {
			if dep == p || strings.HasPrefix(dep, p+"/") {
				return p
			}
		}
		return ""
	}
	deps := goListDeps(t, "./cmd/toolgate")
	if !slices.Contains(deps, module+"/gateway") {
		t.Fatalf("go list -deps ./cmd/toolgate does not list %s/gateway; is it listing the right package?\n%s", module, deps)
	}
	for _, dep := range deps {
		if dep == module+"/agent" || strings.HasPrefix(dep, module+"/agent/") || isSDK(dep) != "" {
			t.Errorf("cmd/toolgate depends on %s: the agent loop and the model SDKs belong in cmd/toolgate-agent only", dep)
		}
	}
	// The prefixes name what toolgate-agent does link: each one is seen.
	seen := map[string]bool{}
	for _, dep := range goListDeps(t, "./cmd/toolgate-agent") {
		seen[isSDK(dep)] = true
	}
	for _, p := range sdks {
		if !seen[p] {
			t.Errorf("cmd/toolgate-agent links no package of %s: the check above would miss it under another path", p)
		}
	}
}

// goListDeps returns the packages pkg (relative to the module root)
// depends on.
func goListDeps(t *testing.T, pkg string) []string {
	t.Helper()
	list := exec.Command("go", "list", "-deps", pkg)
	list.Dir = ".." // the module root
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
	}
	return strings.Fields(string(out))
}
