package tests

// Load balancers and replicas for the cluster tests (cluster_lb_test.go):
// HAProxy and nginx started in the foreground on free ports of 127.0.0.1
// with the configs shipped in examples/cluster/, and three `toolgate
// serve` replicas whose peers are named before they start.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/internal/prereq"
)

// clusterSecret is the replicas' cluster.secret (at least 32 bytes).
const clusterSecret = "e2e-cluster-secret-0123456789abcdef-0123456789"

// replicaIDs are the replicas' IDs, as the shipped balancer configs name
// them.
var replicaIDs = []string{"r1", "r2", "r3"}

// needProgram returns the path of the balancer program name, from
// Debian's package pkg (internal/prereq: a missing one skips t, or fails
// it under CI=true, where `make test` installs it).
func needProgram(t *testing.T, name, pkg string) string {
	t.Helper()
	c, ok := prereq.Lookup(name)
	if !ok || c.Debian != pkg {
		t.Fatalf("internal/prereq knows no %s from Debian's %s", name, pkg)
	}
	return prereq.Need(t, c)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// balancer is a load balancer process started by [startBalancer].
type balancer struct {
	// URL is the balancer's base URL, http://127.0.0.1:PORT.
	URL string

	name   string
	cmd    *exec.Cmd
	exited chan struct{} // closed once its output is drained and it is reaped

	mu  sync.Mutex
	out strings.Builder // its stdout and stderr; guarded by mu
}

// balancerEnv is what the shipped configs take from the environment: the
// balancer's listen address and each replica's.
func balancerEnv(listen string, replicas []string) map[string]string {
	env := map[string]string{"TOOLGATE_LB_LISTEN": listen}
	for i, addr := range replicas {
		env[fmt.Sprintf("TOOLGATE_R%d", i+1)] = addr
	}
	return env
}

// startHAProxy runs HAProxy in the foreground with the config at cfg (a
// path relative to tests/), in front of replicas (r1, r2, r3).
func startHAProxy(t *testing.T, cfg string, replicas []string) *balancer {
	t.Helper()
	bin := needProgram(t, "haproxy", "haproxy")
	listen := freeAddr(t)
	cmd := exec.Command(bin, "-db", "-f", cfg)
	cmd.Env = os.Environ()
	for k, v := range balancerEnv(listen, replicas) {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return startBalancer(t, "haproxy", cmd, listen)
}

// startNginx runs nginx in the foreground with examples/cluster/nginx.conf,
// its placeholders filled in, in front of replicas (r1, r2, r3).
func startNginx(t *testing.T, replicas []string) *balancer {
	t.Helper()
	bin := needProgram(t, "nginx", "nginx-light")
	listen := freeAddr(t)
	b, err := os.ReadFile("../examples/cluster/nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	conf := string(b)
	for k, v := range balancerEnv(listen, replicas) {
		conf = strings.ReplaceAll(conf, "${"+k+"}", v)
	}
	if i := strings.Index(conf, "${TOOLGATE_"); i >= 0 {
		t.Fatalf("examples/cluster/nginx.conf has a placeholder the test does not fill: %.40s", conf[i:])
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-e", "stderr", "-p", dir, "-c", path, "-g", "pid "+filepath.Join(dir, "nginx.pid")+";")
	return startBalancer(t, "nginx", cmd, listen)
}

// startBalancer starts cmd, a balancer listening on listen, and waits (at
// most listenTimeout) until listen accepts connections. t.Cleanup stops it
// by its PID (SIGTERM, SIGKILL after stopTimeout).
func startBalancer(t *testing.T, name string, cmd *exec.Cmd, listen string) *balancer {
	t.Helper()
	b := &balancer{URL: "http://" + listen, name: name, cmd: cmd, exited: make(chan struct{})}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		br := bufio.NewReader(pr)
		for {
			line, err := br.ReadString('\n')
			b.mu.Lock()
			b.out.WriteString(line)
			b.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() {
		_ = cmd.Wait()
		pw.Close() // ends the reader above
		close(b.exited)
	}()
	t.Cleanup(func() {
		b.stop(t)
		if t.Failed() {
			t.Logf("%s output:\n%s", name, b.output())
		}
	})
	pollUntil(t, listenTimeout, name+" listening on "+listen, func() (bool, string) {
		select {
		case <-b.exited:
			t.Fatalf("%s exited (%v) before listening; output:\n%s", name, cmd.ProcessState, b.output())
		default:
		}
		c, err := net.DialTimeout("tcp", listen, time.Second)
		if err != nil {
			return false, err.Error()
		}
		c.Close()
		return true, ""
	})
	return b
}

func (b *balancer) output() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out.String()
}

// stop stops the balancer by its PID and waits for it to be reaped.
func (b *balancer) stop(t *testing.T) {
	select {
	case <-b.exited:
		return
	default:
	}
	stopProcess(t, b.name, b.cmd, b.exited)
}

// cluster is three `toolgate serve` replicas, r1 to r3.
type cluster struct {
	addrs    []string  // each replica's host:port, by index
	configs  []string  // each replica's config, to start it again
	replicas []*server // each replica's process, by index
}

// startCluster starts three replicas with the config yaml plus, when
// peered, a cluster section naming each (with cluster.peers, so they
// forward); otherwise three lone toolgates that know nothing of each
// other.
func startCluster(t *testing.T, yaml string, peered bool) *cluster {
	t.Helper()
	return startClusterWith(t, yaml, peered, "")
}

// startClusterWith is startCluster with extra lines, indented, added to
// each peered replica's cluster section (cluster.redis, say). Unless
// they set drain_delay, it is 100ms: the tests stop replicas by the dozen.
func startClusterWith(t *testing.T, yaml string, peered bool, extra string) *cluster {
	t.Helper()
	c := &cluster{}
	for range replicaIDs {
		c.addrs = append(c.addrs, freeAddr(t))
	}
	for i, id := range replicaIDs {
		cfg := yaml
		if peered {
			var peers []string
			for j, pid := range replicaIDs {
				peers = append(peers, fmt.Sprintf("%s: %q", pid, c.addrs[j]))
			}
			cfg += fmt.Sprintf("cluster:\n  replica_id: %s\n  secret: %q\n  peers: {%s}\n", id, clusterSecret, strings.Join(peers, ", ")) + extra
			if !strings.Contains(extra, "drain_delay:") {
				cfg += "  drain_delay: 100ms\n"
			}
		}
		c.configs = append(c.configs, cfg)
		c.replicas = append(c.replicas, startServeAt(t, cfg, c.addrs[i], listenTimeout))
	}
	return c
}

// stopAll stops servers at once (each takes its drain and grace).
func stopAll(t *testing.T, servers []*server) {
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Go(func() { s.Stop(t) })
	}
	wg.Wait()
}

// restart starts replica i again, on its address, after it was killed.
func (c *cluster) restart(t *testing.T, i int) {
	t.Helper()
	c.replicas[i] = startServeAt(t, c.configs[i], c.addrs[i], listenTimeout)
}

// forwards is the cluster's toolgate_cluster_forwards_total, summed over
// the replicas and their peers.
func (c *cluster) forwards(t *testing.T) float64 {
	t.Helper()
	var n float64
	for _, r := range c.replicas {
		n += metricSum(scrape(t, r.URL), "toolgate_cluster_forwards_total")
	}
	return n
}

// metricSum sums every sample of name in text, whatever its labels.
func metricSum(text, name string) float64 {
	var sum float64
	for line := range strings.Lines(text) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), name)
		if !ok || (!strings.HasPrefix(rest, "{") && !strings.HasPrefix(rest, " ")) {
			continue
		}
		if i := strings.LastIndexByte(rest, '}'); i >= 0 {
			rest = rest[i+1:]
		}
		var v float64
		if _, err := fmt.Sscan(rest, &v); err == nil {
			sum += v
		}
	}
	return sum
}

// updatesUpstream starts an MCP server (mcp-go, streamable HTTP on
// 127.0.0.1) with n resources, test://lb/0 to test://lb/<n-1>, that
// clients may subscribe to, and a tool, touch, that tells every client
// the resource named by its uri argument changed
// (notifications/resources/updated). It returns its URL.
func updatesUpstream(t *testing.T, n int) string {
	t.Helper()
	s := mcpserver.NewMCPServer("updates-upstream", "1", mcpserver.WithResourceCapabilities(true, false))
	for i := range n {
		uri := fmt.Sprintf("test://lb/%d", i)
		s.AddResource(mcp.NewResource(uri, uri, mcp.WithMIMEType("text/plain")),
			func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
				return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: "text/plain", Text: uri}}, nil
			})
	}
	s.AddTool(mcp.NewTool("touch", mcp.WithString("uri", mcp.Required())),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			uri, err := req.RequireString("uri")
			if err != nil {
				return mcp.NewToolResultError(err.Error()), nil
			}
			s.SendNotificationToAllClients(string(mcp.MethodNotificationResourceUpdated), map[string]any{"uri": uri})
			return mcp.NewToolResultText("touched " + uri), nil
		})
	return serveMCP(t, s)
}
