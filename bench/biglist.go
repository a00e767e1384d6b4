package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// -mode biglist: one upstream with many tools (-tools, 5,000 by default),
// listed in full (every page of tools/list) directly from the upstream and
// through toolgate, both child processes, in interleaved rounds; then the
// resident memory of each.

// serveBigListFlag is the flag with which the bench runs itself as the
// many-tool upstream of -mode biglist.
const serveBigListFlag = "serve-biglist"

// bigListDescription pads each tool's description to about 200 characters.
const bigListDescription = "Looks up records in the %s collection by the given filters and returns " +
	"at most limit of them, newest first. Use the cursor of a previous result to page on; " +
	"fields not listed in fields are left out of each record."

// bigListTool is the i-th tool of the many-tool upstream: a few typed
// properties, two required, described as real tools are. The tools share
// one input schema, as a generated API's often do, unless distinct: then
// the query's description names the tool's collection.
func bigListTool(i int, distinct bool) mcp.Tool {
	coll := fmt.Sprintf("records_%04d", i)
	query := "Full-text query matched against every indexed field."
	if distinct {
		query = fmt.Sprintf("Full-text query matched against every indexed field of %s.", coll)
	}
	return mcp.NewTool(fmt.Sprintf("find_%04d", i),
		mcp.WithDescription(fmt.Sprintf(bigListDescription, coll)),
		mcp.WithString("query", mcp.Required(), mcp.Description(query)),
		mcp.WithNumber("limit", mcp.Description("Most records to return."), mcp.Min(1), mcp.Max(500), mcp.DefaultNumber(50)),
		mcp.WithString("order", mcp.Enum("newest", "oldest", "relevance"), mcp.Description("Sort order of the records.")),
		mcp.WithString("cursor", mcp.Description("The nextCursor of the page before; omit for the first.")),
		mcp.WithArray("fields", mcp.Required(), mcp.WithStringItems(), mcp.Description("Fields of each record to return.")),
		mcp.WithReadOnlyHintAnnotation(true),
	)
}

// serveBigList serves n tools (bigListTool) over stateful streamable HTTP
// on a free loopback port, pages of page tools, and writes its address as
// the first line of out. It serves until ctx ends or in closes.
func serveBigList(ctx context.Context, n, page int, distinct bool, in io.Reader, out io.Writer) error {
	s := server.NewMCPServer("biglist", "1.0.0", server.WithToolCapabilities(false), server.WithPaginationLimit(page))
	tools := make([]server.ServerTool, n)
	for i := range tools {
		tools[i] = server.ServerTool{Tool: bigListTool(i, distinct), Handler: func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("ok"), nil
		}}
	}
	s.AddTools(tools...)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	srv := &http.Server{Handler: server.NewStreamableHTTPServer(s), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	fmt.Fprintln(out, ln.Addr().String())
	ctx, cancel := context.WithCancel(ctx)
	go func() { _, _ = io.Copy(io.Discard, in); cancel() }() // the parent closes stdin, or dies
	<-ctx.Done()
	return nil
}

// child is a process the biglist bench started.
type child struct {
	cmd   *exec.Cmd
	stdin io.Closer
}

// stop closes the child's stdin, interrupts it and reaps it.
func (c *child) stop() {
	_ = c.stdin.Close()
	_ = c.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

// procStatus returns the kB values of the keys (VmRSS, VmHWM, RssAnon,
// RssFile) in /proc/pid/status, in bytes.
func procStatus(pid int, keys ...string) (map[string]uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, fmt.Errorf("reading the process status (Linux only): %w", err)
	}
	out := map[string]uint64{}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || !slices.Contains(keys, k) {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("reading %s of process %d: %w", k, pid, err)
		}
		out[k] = kb * 1024
	}
	return out, nil
}

// startBigListUpstream runs the bench as the many-tool upstream and
// returns it with its MCP URL.
func startBigListUpstream(ctx context.Context, p params) (*child, string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, "", fmt.Errorf("finding the bench's executable: %w", err)
	}
	cmd := exec.CommandContext(ctx, exe, "-"+serveBigListFlag, "-tools", strconv.Itoa(p.tools),
		"-page", strconv.Itoa(p.page), "-distinct-schemas="+strconv.FormatBool(p.distinct), "-timeout", p.timeout.String())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, "", err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("starting the upstream: %w", err)
	}
	c := &child{cmd: cmd, stdin: stdin}
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		c.stop()
		return nil, "", fmt.Errorf("reading the upstream's address: %w", err)
	}
	return c, "http://" + strings.TrimSpace(addr) + "/mcp", nil
}

// releaseTags are the Makefile's build tags, which every binary that ships
// is built with.
const releaseTags = "grpcnotrace"

// buildToolgate builds cmd/toolgate into dir (CGO off and with the
// release's tags, as a release is built), with net/http/pprof when
// profiling.
func buildToolgate(ctx context.Context, dir string, withPprof bool) (string, error) {
	bin := filepath.Join(dir, "toolgate")
	tags := releaseTags
	if withPprof {
		tags += ",pprof"
	}
	args := []string{"build", "-tags", tags, "-o", bin}
	cmd := exec.CommandContext(ctx, "go", append(args, "github.com/toolgate/toolgate/cmd/toolgate")...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building toolgate (run the bench from the repository): %w", err)
	}
	return bin, nil
}

// freePort returns a loopback address nothing listens on, for now.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startBigListToolgate runs toolgate serve with upstream as its one
// upstream and returns it with its MCP URL and, when profiling, its pprof
// address.
func startBigListToolgate(ctx context.Context, p params, dir, upstream string) (*child, string, string, error) {
	bin, err := buildToolgate(ctx, dir, p.profileDir != "")
	if err != nil {
		return nil, "", "", err
	}
	cfg := filepath.Join(dir, "toolgate.yaml")
	yaml := fmt.Sprintf(upstreamConfig, fmt.Sprintf("    transport: streamable-http\n    url: %s\n", strconv.Quote(upstream)))
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		return nil, "", "", err
	}
	addr, err := freePort()
	if err != nil {
		return nil, "", "", err
	}
	cmd := exec.CommandContext(ctx, bin, "serve", "--config", cfg, "--listen", addr)
	cmd.Env = append(os.Environ(), "TOOLGATE_LOG_LEVEL=warn")
	pprofAddr := ""
	if p.profileDir != "" {
		if pprofAddr, err = freePort(); err != nil {
			return nil, "", "", err
		}
		cmd.Env = append(cmd.Env, "TOOLGATE_PPROF="+pprofAddr)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, "", "", err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, "", "", fmt.Errorf("starting toolgate: %w", err)
	}
	return &child{cmd: cmd, stdin: stdin}, "http://" + addr + "/mcp", pprofAddr, nil
}

// walk lists every tool of c, page by page, and returns how many and in
// how many pages.
func walk(ctx context.Context, c *client.Client) (tools, pages int, err error) {
	var req mcp.ListToolsRequest
	for {
		res, err := c.ListToolsByPage(ctx, req) // ListTools would follow the cursors itself
		if err != nil {
			return tools, pages, err
		}
		tools += len(res.Tools)
		pages++
		if res.NextCursor == "" {
			return tools, pages, nil
		}
		req.Params.Cursor = res.NextCursor
	}
}

// waitTools connects to t until it lists want tools (toolgate has
// imported the upstream's), at most upstreamStartup.
func waitTools(ctx context.Context, t *target, want int) (*client.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, upstreamStartup)
	defer cancel()
	var last error
	for {
		c, err := connect(ctx, t)
		if err == nil {
			var n int
			if n, _, err = walk(ctx, c); err == nil && n == want {
				return c, nil
			} else if err == nil {
				err = fmt.Errorf("%d tools listed, not %d", n, want)
			}
			_ = c.Close()
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s to list %d tools: %w (last: %v)", t.name, want, ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// bigListSide is one target of the biglist bench and what it measured.
type bigListSide struct {
	t     *target
	c     *client.Client
	pid   int
	walks []time.Duration
	pages int
}

// runBigList is -mode biglist.
func runBigList(ctx context.Context, p params, stdout, stderr io.Writer) error {
	dir, err := os.MkdirTemp("", "toolgate-biglist")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	up, upURL, err := startBigListUpstream(ctx, p)
	if err != nil {
		return err
	}
	defer up.stop()
	tg, tgURL, pprofAddr, err := startBigListToolgate(ctx, p, dir, upURL)
	if err != nil {
		return err
	}
	defer tg.stop()
	hc := newHTTPClient()
	defer hc.CloseIdleConnections()
	sides := []*bigListSide{
		{t: &target{name: "direct", url: upURL, client: hc}, pid: up.cmd.Process.Pid},
		{t: &target{name: "toolgate", url: tgURL, client: hc}, pid: tg.cmd.Process.Pid},
	}
	for _, s := range sides {
		if s.c, err = waitTools(ctx, s.t, p.tools); err != nil {
			return err
		}
		defer s.c.Close()
	}
	rssHeld, err := procStatus(tg.cmd.Process.Pid, "VmRSS")
	if err != nil {
		return err
	}
	for range p.warmup {
		for _, s := range sides {
			if _, _, err := walk(ctx, s.c); err != nil {
				return fmt.Errorf("warming up %s: %w", s.t.name, err)
			}
		}
	}
	profiled := make(chan error, 1)
	if pprofAddr != "" {
		go func() { profiled <- fetchProfile(ctx, pprofAddr, p.profileDir, "cpu.pprof", "profile?seconds=10") }()
	}
	for r := range p.rounds {
		for k := range sides {
			s := sides[k]
			if r%2 == 1 {
				s = sides[len(sides)-1-k]
			}
			start := time.Now()
			n, pages, err := walk(ctx, s.c)
			if err != nil {
				return fmt.Errorf("listing %s: %w", s.t.name, err)
			}
			if n != p.tools {
				return fmt.Errorf("listing %s: %d tools, not %d", s.t.name, n, p.tools)
			}
			s.walks = append(s.walks, time.Since(start))
			s.pages = pages
		}
	}
	if pprofAddr != "" {
		if err := errors.Join(<-profiled, fetchProfile(ctx, pprofAddr, p.profileDir, "heap.pprof", "heap?gc=1")); err != nil {
			return err
		}
	}
	mem := make([]map[string]uint64, len(sides))
	for i, s := range sides {
		if mem[i], err = procStatus(s.pid, "VmRSS", "VmHWM", "RssAnon", "RssFile"); err != nil {
			return err
		}
	}
	reportBigList(stdout, p, sides, rssHeld["VmRSS"], mem)
	return nil
}

// fetchProfile saves toolgate's pprof endpoint path into dir/name.
func fetchProfile(ctx context.Context, addr, dir, name, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/"+path, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("fetching toolgate's %s profile: %w", name, err)
	}
	defer res.Body.Close()
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, res.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// The targets for a big list: a walk through toolgate within
// bigListRatio of the direct one, at p50 and p99; toolgate's RSS holding
// them at most bigListRSS.
const (
	bigListRatio = 1.2
	bigListRSS   = 44 << 20
)

// reportBigList writes the biglist markdown.
func reportBigList(w io.Writer, p params, sides []*bigListSide, rssHeld uint64, mem []map[string]uint64) {
	fmt.Fprintf(w, "Machine: %s/%s, %d CPUs (GOMAXPROCS %d), %s. ", runtime.GOOS, runtime.GOARCH,
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version())
	schemas := "one input schema shared by all"
	if p.distinct {
		schemas = "an input schema each"
	}
	fmt.Fprintf(w, "Upstream: an mcp-go server with %d tools (5 properties, %s, ~200-character descriptions), "+
		"stateful streamable HTTP, pages of %d, a child process. toolgate: `toolgate serve` (CGO off), a child process, "+
		"with that one upstream. A walk lists every page in one session; %d walks each after %d warm-up walks, "+
		"alternating which target goes first.\n\n", p.tools, schemas, p.page, p.rounds, p.warmup)
	fmt.Fprintln(w, "| target | pages | p50 ms | p99 ms | RSS MiB | of it anonymous / file MiB | peak RSS MiB |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for i, s := range sides {
		slices.Sort(s.walks)
		fmt.Fprintf(w, "| %s | %d | %.1f | %.1f | %.1f | %.1f / %.1f | %.1f |\n", s.t.name, s.pages, ms(percentile(s.walks, 0.5)),
			ms(percentile(s.walks, 0.99)), mib(mem[i]["VmRSS"]), mib(mem[i]["RssAnon"]), mib(mem[i]["RssFile"]), mib(mem[i]["VmHWM"]))
	}
	d, g := sides[0].walks, sides[1].walks
	r50 := float64(percentile(g, 0.5)) / float64(percentile(d, 0.5))
	r99 := float64(percentile(g, 0.99)) / float64(percentile(d, 0.99))
	rss := mem[1]["VmRSS"]
	fmt.Fprintf(w, "\ntoolgate/direct: p50 %.2f×, p99 %.2f× (target ≤ %.1f×: %s). toolgate's RSS holding the tools, "+
		"before the walks %.1f MiB, after %.1f MiB (target ≤ %d MiB: %s).\n", r50, r99, bigListRatio,
		yesNo(r50 <= bigListRatio && r99 <= bigListRatio), mib(rssHeld), mib(rss), bigListRSS>>20, yesNo(rss <= bigListRSS))
}
