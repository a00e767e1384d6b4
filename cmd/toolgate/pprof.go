//go:build pprof

package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"

	"github.com/toolgate/toolgate/config"
)

// Built with -tags pprof, toolgate serves net/http/pprof on the loopback
// address in TOOLGATE_PPROF (e.g. 127.0.0.1:6060) for as long as it runs,
// on its own listener: bench/peerbench.sh profiles toolgate under load this
// way (PPROF=seconds). A default build has none of it.
func init() {
	addr := os.Getenv("TOOLGATE_PPROF")
	if addr == "" {
		return
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil || !config.IsLoopbackHost(host) {
		fmt.Fprintf(os.Stderr, "toolgate: TOOLGATE_PPROF=%q: a loopback host:port only\n", addr)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "toolgate: TOOLGATE_PPROF:", err)
		os.Exit(2)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go func() { _ = http.Serve(ln, mux) }()
}
