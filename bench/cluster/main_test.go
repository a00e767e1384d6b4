package main

import (
	"strings"
	"testing"
	"time"
)

// /proc/<pid>/stat's CPU times are read past a command name holding
// spaces and parentheses.
func TestStatCPU(t *testing.T) {
	line := "4242 (tool gate (r1)) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 50 0 0 20 0 9 0 100 0 0"
	got, err := statCPU(line)
	if err != nil || got != 3*time.Second {
		t.Errorf("statCPU = %v, %v; want 3s (300 ticks)", got, err)
	}
	if _, err := statCPU("4242 no parentheses"); err == nil {
		t.Error("a line without a command name was read")
	}
}

func TestParse(t *testing.T) {
	p, err := parse([]string{"-replicas", "1, 3", "-rate", "50"})
	if err != nil || len(p.replicas) != 2 || p.replicas[1] != 3 || p.rate != 50 {
		t.Errorf("parse = %+v, %v", p, err)
	}
	for _, bad := range [][]string{{"-replicas", "0"}, {"-replicas", "x"}, {"-rate", "0"}, {"extra"}} {
		if _, err := parse(bad); err == nil {
			t.Errorf("parse(%q) accepted", bad)
		}
	}
}

// Every replica is a server of the round robin backend.
func TestHAProxyConfig(t *testing.T) {
	cfg := haproxyConfig("127.0.0.1:9000", []string{"127.0.0.1:1", "127.0.0.1:2"})
	for _, want := range []string{"bind 127.0.0.1:9000", "balance roundrobin", "server r1 127.0.0.1:1", "server r2 127.0.0.1:2"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config lacks %q:\n%s", want, cfg)
		}
	}
}
