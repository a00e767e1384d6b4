// Command cluster measures what a toolgate cluster costs per call as it
// grows (issue 26): for N = 1, 2, 3 replicas of `toolgate serve` behind
// HAProxy (plain round robin, as a Kubernetes Service would), sharing one
// redis-server (membership, the /events relay, and principals' rates
// counted with auth.rate_scope: cluster), it sends 2026-07-28 calc calls
// at a fixed rate through the balancer and reads the CPU time each
// process used from /proc: the replicas' sum per call, each replica's
// share, and the balancer's and Redis's. The claim it defends: the
// replicas' CPU per call stays flat as N grows (nothing on a call's path
// grows with the cluster).
//
// Each replica runs under the same CPU quota: GOMAXPROCS (-procs, 1 by
// default), as a container's CPU limit would set it. Run it on a quiet
// machine; it names the machine in its output.
//
//	go run ./bench/cluster [-rate 200] [-duration 10s] [-replicas 1,2,3]
//
// It needs haproxy and redis-server on PATH (`make balancers
// redis-server`), and Linux's /proc.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench/cluster:", err)
		os.Exit(1)
	}
}

// params are the command-line settings.
type params struct {
	rate     int
	duration time.Duration
	replicas []int
	procs    int
	toolgate string
}

func parse(args []string) (params, error) {
	var p params
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.IntVar(&p.rate, "rate", 200, "calls per second sent through the balancer")
	fs.DurationVar(&p.duration, "duration", 10*time.Second, "how long each cluster size is measured")
	counts := fs.String("replicas", "1,2,3", "the cluster sizes measured, comma-separated")
	fs.IntVar(&p.procs, "procs", 1, "GOMAXPROCS of each replica: its CPU quota")
	fs.StringVar(&p.toolgate, "toolgate", "", "the toolgate binary (default: built from ./cmd/toolgate)")
	if err := fs.Parse(args); err != nil {
		return p, err
	}
	if fs.NArg() > 0 {
		return p, fmt.Errorf("unexpected argument %q: every setting is a flag", fs.Arg(0))
	}
	for f := range strings.SplitSeq(*counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 9 {
			return p, fmt.Errorf("-replicas %q: want counts from 1 to 9, like 1,2,3", *counts)
		}
		p.replicas = append(p.replicas, n)
	}
	if p.rate < 1 || p.duration <= 0 || p.procs < 1 {
		return p, errors.New("-rate, -duration and -procs must be positive")
	}
	return p, nil
}

func run(args []string, out io.Writer) error {
	p, err := parse(args)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "toolgate-bench-cluster")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if p.toolgate == "" {
		p.toolgate = filepath.Join(dir, "toolgate")
		// With the Makefile's build tags, as make build.
		build := exec.Command("go", "build", "-tags", "grpcnotrace", "-o", p.toolgate, "./cmd/toolgate")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building toolgate: %w", err)
		}
	}
	fmt.Fprintf(out, "machine: %s, %d CPUs, %s/%s; each replica GOMAXPROCS=%d; %d calls/s for %v through HAProxy round robin\n\n",
		cpuModel(), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, p.procs, p.rate, p.duration)
	fmt.Fprintf(out, "%-3s %7s %6s %10s %14s %12s %12s %9s %9s\n",
		"N", "calls", "errors", "replicas", "per replica", "haproxy", "redis", "p50", "p99")
	fmt.Fprintf(out, "%-3s %7s %6s %10s %14s %12s %12s %9s %9s\n",
		"", "", "", "µs/call", "µs/call, mean", "µs/call", "µs/call", "ms", "ms")
	for _, n := range p.replicas {
		r, err := measure(p, dir, n)
		if err != nil {
			return fmt.Errorf("N=%d: %w", n, err)
		}
		fmt.Fprintf(out, "%-3d %7d %6d %10.1f %14.1f %12.1f %12.1f %9.2f %9.2f\n",
			n, r.calls, r.errors, r.replicasUS, r.replicasUS/float64(n), r.haproxyUS, r.redisUS, r.p50, r.p99)
	}
	return nil
}

// result is one cluster size's measurement.
type result struct {
	calls, errors                  int
	replicasUS, haproxyUS, redisUS float64 // CPU µs per call that worked
	p50, p99                       float64 // ms
}

// proc is one process the measurement starts and stops.
type proc struct {
	name string
	cmd  *exec.Cmd
}

func (p *proc) stop() {
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

// start starts a process, its output in a file of logDir, and waits until
// addr accepts connections.
func start(logDir, name, addr string, env []string, bin string, args ...string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	logPath := filepath.Join(logDir, strings.ReplaceAll(name, " ", "-")+".log")
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	p := &proc{name: name, cmd: cmd}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return p, nil
		}
		if time.Now().After(deadline) {
			p.stop()
			out, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("%s did not listen on %s: %w; its output:\n%s", name, addr, err, out)
		}
		time.Sleep(50 * time.Millisecond) // polling a port, not ordering
	}
}

// freeAddr returns a free port of 127.0.0.1.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

const token = "bench-token-0123456789abcdef"

// replicaConfig is replica id of a cluster of peers sharing redisURL.
func replicaConfig(id, redisURL string, peers map[string]string) string {
	var ps []string
	for _, k := range slices.Sorted(maps.Keys(peers)) {
		ps = append(ps, fmt.Sprintf("%s: %q", k, peers[k]))
	}
	return fmt.Sprintf(`log: {level: warn}
builtin: [calc]
guards: {loop: {action: "off"}}
auth:
  rate_scope: cluster
  tokens:
    - {name: bench, token: %s, rate: 100000/s, burst: 1000}
cluster:
  replica_id: %s
  secret: bench-cluster-secret-0123456789abcdef-0123
  peers: {%s}
  redis: %s
  drain_delay: 0s
`, token, id, strings.Join(ps, ", "), redisURL)
}

// haproxyConfig is plain round robin over addrs.
func haproxyConfig(listen string, addrs []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "global\n    maxconn 4096\ndefaults\n    mode http\n    timeout connect 2s\n    timeout client 1m\n    timeout server 1m\n")
	fmt.Fprintf(&b, "frontend mcp\n    bind %s\n    default_backend toolgate\nbackend toolgate\n    balance roundrobin\n", listen)
	for i, a := range addrs {
		fmt.Fprintf(&b, "    server r%d %s\n", i+1, a)
	}
	return b.String()
}

// measure starts Redis, n replicas and HAProxy, warms them, and measures.
func measure(p params, dir string, n int) (result, error) {
	var procs []*proc
	defer func() {
		for _, pr := range slices.Backward(procs) {
			pr.stop()
		}
	}()
	redisAddr, err := freeAddr()
	if err != nil {
		return result{}, err
	}
	_, port, _ := net.SplitHostPort(redisAddr)
	redis, err := start(dir, "redis-server", redisAddr, nil, "redis-server", "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no")
	if err != nil {
		return result{}, err
	}
	procs = append(procs, redis)
	peers, addrs := map[string]string{}, []string{}
	for i := range n {
		a, err := freeAddr()
		if err != nil {
			return result{}, err
		}
		peers[fmt.Sprintf("r%d", i+1)] = a
		addrs = append(addrs, a)
	}
	var replicas []*proc
	for i, a := range addrs {
		id := fmt.Sprintf("r%d", i+1)
		cfg := filepath.Join(dir, id+".yaml")
		if err := os.WriteFile(cfg, []byte(replicaConfig(id, "redis://"+redisAddr+"/0", peers)), 0o600); err != nil {
			return result{}, err
		}
		r, err := start(dir, "toolgate "+id, a, []string{"GOMAXPROCS=" + strconv.Itoa(p.procs)}, p.toolgate, "serve", "--config", cfg, "--listen", a)
		if err != nil {
			return result{}, err
		}
		procs, replicas = append(procs, r), append(replicas, r)
	}
	lbAddr, err := freeAddr()
	if err != nil {
		return result{}, err
	}
	lbCfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(lbCfg, []byte(haproxyConfig(lbAddr, addrs)), 0o600); err != nil {
		return result{}, err
	}
	lb, err := start(dir, "haproxy", lbAddr, nil, "haproxy", "-db", "-f", lbCfg)
	if err != nil {
		return result{}, err
	}
	procs = append(procs, lb)

	base := "http://" + lbAddr
	if _, _, err := load(base, p.rate, 2*time.Second); err != nil { // warm up
		return result{}, err
	}
	before := make([]time.Duration, len(procs))
	for i, pr := range procs {
		before[i] = cpuTime(pr.cmd.Process.Pid)
	}
	lat, errs, err := load(base, p.rate, p.duration)
	if err != nil {
		return result{}, err
	}
	used := func(pr *proc) float64 {
		i := slices.Index(procs, pr)
		return float64((cpuTime(pr.cmd.Process.Pid) - before[i]).Microseconds())
	}
	r := result{calls: len(lat), errors: errs}
	if r.calls == 0 {
		return r, errors.New("no call worked")
	}
	for _, rp := range replicas {
		r.replicasUS += used(rp)
	}
	calls := float64(r.calls)
	r.replicasUS /= calls
	r.haproxyUS, r.redisUS = used(lb)/calls, used(redis)/calls
	slices.Sort(lat)
	r.p50 = float64(lat[len(lat)/2].Microseconds()) / 1000
	r.p99 = float64(lat[len(lat)*99/100].Microseconds()) / 1000
	return r, nil
}

// load sends rate calls a second through base for d, each at its time
// (open loop), and returns the latencies of those that worked and how
// many did not.
func load(base string, rate int, d time.Duration) ([]time.Duration, int, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	var lat []time.Duration
	var errs atomic.Int64
	var wg sync.WaitGroup
	total := int(float64(rate) * d.Seconds())
	every := time.Second / time.Duration(rate)
	begin := time.Now()
	for i := range total {
		if wait := time.Until(begin.Add(time.Duration(i) * every)); wait > 0 {
			time.Sleep(wait) // pacing the open loop
		}
		wg.Go(func() {
			t0 := time.Now()
			if err := call(client, base, i); err != nil {
				errs.Add(1)
				return
			}
			mu.Lock()
			lat = append(lat, time.Since(t0))
			mu.Unlock()
		})
	}
	wg.Wait()
	return lat, int(errs.Load()), nil
}

// call sends one 2026-07-28 tools/call of calc and checks its answer.
func call(c *http.Client, base string, i int) error {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"calc","arguments":{"expression":"%d+1"},`+
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`, i)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, base+"/mcp", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "calc")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"text":"`+strconv.Itoa(i+1)+`"`) {
		return fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, b)
	}
	return nil
}

// cpuTime is the user and system CPU time process pid used so far, from
// /proc/<pid>/stat (0 when it cannot be read).
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	t, _ := statCPU(string(b))
	return t
}

// clockTick is USER_HZ, the unit of /proc's CPU times, 100 on Linux.
const clockTick = 100

// statCPU reads utime and stime (fields 14 and 15) from a /proc/<pid>/stat
// line. The command name (field 2) is in parentheses and may hold spaces.
func statCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("no command name")
	}
	f := strings.Fields(stat[i+1:]) // from field 3, the state
	if len(f) < 13 {
		return 0, errors.New("too few fields")
	}
	var ticks int64
	for _, s := range f[11:13] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clockTick, nil
}

// cpuModel is the machine's CPU model, from /proc/cpuinfo.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}
