package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// chromiumPath finds the headless browser the /ui test drives. `make
// test` installs it (the chromium target); without it the test fails,
// naming the prerequisite, rather than skipping.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("the /ui test needs Chromium: `make chromium` installs it (apt-get install -y chromium), or put chromium on PATH")
	return ""
}

// TestUIShowsCalls loads /ui in headless Chromium, makes calls while the
// page follows /events, and checks the rows the page built: one per call,
// in its final state, with a failed call's message opened. The page's
// until=2 mode closes its event stream after two calls have finished, so
// that Chromium's virtual time can run out and it dumps the DOM: no sleep
// decides when the page is read.
func TestUIShowsCalls(t *testing.T) {
	chromium := chromiumPath(t)
	srv := startServe(t, baseConfig)
	c := connect(t, streamableHTTP, srv)

	// A failed call before the page opens: the page lists it from
	// /ui/state's recent calls, and opens its message (#open=).
	wantError(t, mustCall(t, c, "calc", map[string]any{"expression": "1/0"}, ""), "execution")
	_, state := get(t, srv.URL+"/ui/state")
	var st struct {
		Sources []struct {
			Source string `json:"source"`
			Tools  []struct {
				Name string `json:"name"`
			} `json:"tools"`
		} `json:"sources"`
		Recent []struct {
			ID    string `json:"id"`
			State string `json:"state"`
		} `json:"recent"`
	}
	if err := json.Unmarshal([]byte(state), &st); err != nil || len(st.Recent) != 1 || st.Recent[0].State != "error" {
		t.Fatalf("/ui/state = %s (%v), want one recent failed call", state, err)
	}
	before := st.Recent[0].ID

	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	var dom, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
		"--dump-dom", srv.URL+"/ui?until=2#open="+before)
	cmd.Stdout, cmd.Stderr = &dom, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", chromium, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// The page is live once it has subscribed to /events.
	waitMetric(t, srv.URL, "toolgate_event_subscribers", nil, 1)
	wantOK(t, mustCall(t, c, "calc", map[string]any{"expression": "6*7"}, ""), "42")
	wantError(t, mustCall(t, c, "calc", map[string]any{"expression": "2/0"}, ""), "execution")
	if err := <-done; err != nil {
		t.Fatalf("chromium --dump-dom: %v\n%s", err, stderr.String())
	}
	page := dom.String()

	rows := regexp.MustCompile(`<tr id="call-(c-\d+)" class="call is-(\w+)" data-state="(\w+)"`).FindAllStringSubmatch(page, -1)
	var got []string
	for _, r := range rows {
		got = append(got, r[2])
	}
	if want := []string{"error", "completed", "error"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("call rows (newest first) = %v, want %v; page:\n%s", got, want, page)
	}
	for _, want := range []string{
		`data-tool="calc"`, `data-tool="scratchpad"`, // the tools, by source
		`<td class="source">builtin</td>`,
		`data-for="call-` + before + `"`, // the failed call's message, opened
		"execution: calc: division by zero",
		` ms</td>`, // durations
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q; page:\n%s", want, page)
		}
	}
	if !strings.Contains(page, `data-live="done"`) {
		t.Errorf("the page did not see both calls live (body data-live is not done); page:\n%s", page)
	}
}
