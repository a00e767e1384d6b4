// Command conformanceclient runs toolgate's upstream side as the client of
// a client scenario of the official MCP conformance suite: the suite starts
// its test server and runs `conformanceclient URL` with the scenario in
// MCP_CONFORMANCE_SCENARIO; this writes a configuration whose one upstream
// is that server (streamable HTTP, no prefix) and runs the toolgate binary
// named by TOOLGATE_BIN against it: `toolgate tools` (initialize and list)
// or `toolgate call` for the scenarios that call a tool. It exits with
// toolgate's status. It is built by the tests, never shipped.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: conformanceclient URL (with MCP_CONFORMANCE_SCENARIO and TOOLGATE_BIN set)")
		os.Exit(2)
	}
	bin := os.Getenv("TOOLGATE_BIN")
	if bin == "" {
		fmt.Fprintln(os.Stderr, "conformanceclient: TOOLGATE_BIN is not set")
		os.Exit(2)
	}
	dir, err := os.MkdirTemp("", "conformanceclient-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformanceclient:", err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "toolgate.yaml")
	yaml := fmt.Sprintf("upstreams:\n  - name: server\n    prefix: \"\"\n    transport: streamable-http\n    url: %q\n    startup_timeout: 10s\n", os.Args[1])
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "conformanceclient:", err)
		os.Exit(1)
	}
	args := []string{"tools", "--config", cfg}
	switch os.Getenv("MCP_CONFORMANCE_SCENARIO") {
	case "tools_call":
		args = []string{"call", "--config", cfg, "add_numbers", `{"a":5,"b":3}`}
	case "elicitation-sep1034-client-defaults":
		args = []string{"call", "--config", cfg, "test_client_elicitation_defaults", `{}`}
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "conformanceclient: toolgate", args[0]+":", err)
		if ee, ok := err.(*exec.ExitError); ok {
			os.Exit(ee.ExitCode())
		}
		os.Exit(1)
	}
}
