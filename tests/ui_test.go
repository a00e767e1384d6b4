package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
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

// callRows returns "id state" of each call row of page, newest first.
func callRows(page string) []string {
	var rows []string
	for _, r := range regexp.MustCompile(`<tr id="call-(c-\d+)" class="call is-(\w+)" data-state="(\w+)"`).FindAllStringSubmatch(page, -1) {
		rows = append(rows, r[1]+" "+r[2])
	}
	return rows
}

// TestUIShowsCalls loads /ui in headless Chromium, makes calls while the
// page follows /events, and checks the rows the page built: one per call,
// in its final state, with a failed call's message opened. The test waits
// on the page's DOM (browser.waitFor), never on a clock.
func TestUIShowsCalls(t *testing.T) {
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

	b := newBrowser(t)
	b.navigate(srv.URL + "/ui#open=" + before)
	b.waitFor("the page following /events", `document.body.dataset.live === "true"`)
	waitMetric(t, srv.URL, "toolgate_event_subscribers", nil, 1)
	wantOK(t, mustCall(t, c, "calc", map[string]any{"expression": "6*7"}, ""), "42")
	wantError(t, mustCall(t, c, "calc", map[string]any{"expression": "2/0"}, ""), "execution")
	b.waitFor("three finished calls", finishedRows(3))
	page := b.html()

	var got []string
	for _, r := range callRows(page) {
		got = append(got, strings.Fields(r)[1])
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
}

// finishedRows is the condition that the page shows at least n calls
// completed or failed (the test then checks which).
func finishedRows(n int) string {
	return fmt.Sprintf(`document.querySelectorAll("#calls tr.call.is-completed, #calls tr.call.is-error").length >= %d`, n)
}

// waitSubscribers polls srv's /metrics, sending token, until
// toolgate_event_subscribers is want, failing after pollTimeout.
func waitSubscribers(t *testing.T, srv *server, token string, want float64) {
	t.Helper()
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	deadline := time.After(pollTimeout)
	for {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := newHTTPClient().Do(req)
		if err != nil {
			t.Fatalf("GET /metrics: %v", err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /metrics = %d %v:\n%s", resp.StatusCode, err, body)
		}
		got := metricOrZero(string(body), "toolgate_event_subscribers", nil)
		if got == want {
			return
		}
		select {
		case <-ticker.C:
		case <-deadline:
			t.Fatalf("toolgate_event_subscribers = %v after %v, want %v", got, pollTimeout, want)
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
}

// TestUIWithAuth runs /ui against a gateway with static tokens. The page
// itself needs no token; without one it shows the token form and no data,
// and a wrong token is refused. Once ops's token is typed in, the page
// reads /ui/state and follows /events with it in a header and shows ops's
// calls, and only those: dev's calls, made before and while the page
// follows, are not among its rows, nor the tools ops may not use. The
// token stays out of the address; signing out forgets it and ends the
// stream.
func TestUIWithAuth(t *testing.T) {
	const (
		opsToken = "ui-ops-token-0123456789abcdef"
		devToken = "ui-dev-token-0123456789abcdef"
		// mon reads /metrics, which only auth.admins may.
		monToken = "ui-mon-token-0123456789abcdef"
	)
	srv := startServe(t, `
builtin: [calc, clock_now, scratchpad]
auth:
  tokens:
    - name: ops
      token: `+opsToken+`
      deny: ["scratch*"]
    - name: dev
      token: `+devToken+`
    - name: mon
      token: `+monToken+`
      allow: []
  admins: [mon]
`)
	ops, err := authClient(t, srv, opsToken)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := authClient(t, srv, devToken)
	if err != nil {
		t.Fatal(err)
	}
	wantOK(t, mustCall(t, dev, "calc", map[string]any{"expression": "1+1"}, ""), "2")            // c-1
	wantError(t, mustCall(t, ops, "calc", map[string]any{"expression": "1/0"}, ""), "execution") // c-2

	b := newBrowser(t)
	b.navigate(srv.URL + "/ui#open=c-2")
	const form = `document.body.dataset.auth === "required" && !document.getElementById("login").hidden`
	b.waitFor("the token form", form)
	page := b.html()
	if rows := callRows(page); len(rows) != 0 || strings.Contains(page, `data-tool=`) {
		t.Errorf("the page without a token shows calls %v or tools; page:\n%s", rows, page)
	}
	if !strings.Contains(page, "This gateway needs a bearer token") {
		t.Errorf("the form does not say what it wants; page:\n%s", page)
	}

	// A wrong token: asked again, saying so.
	b.value(`document.getElementById("token").focus()`, nil)
	b.typeText("wrong-token-0123456789abcdef")
	b.waitFor("the refusal", form+` && document.getElementById("login-why").textContent.includes("not accepted")`)

	b.value(`document.getElementById("token").focus()`, nil)
	b.typeText(opsToken)
	b.waitFor("the page following /events", `document.body.dataset.live === "true"`)
	waitSubscribers(t, srv, monToken, 1)
	wantOK(t, mustCall(t, dev, "calc", map[string]any{"expression": "2+2"}, ""), "4")            // c-3
	wantOK(t, mustCall(t, ops, "calc", map[string]any{"expression": "6*7"}, ""), "42")           // c-4
	wantOK(t, mustCall(t, dev, "calc", map[string]any{"expression": "3+3"}, ""), "6")            // c-5
	wantError(t, mustCall(t, ops, "calc", map[string]any{"expression": "2/0"}, ""), "execution") // c-6
	b.waitFor("ops's last call", finishedRows(3)+` && document.querySelector("#call-c-6.is-error")`)
	page = b.html()
	if got, want := callRows(page), []string{"c-6 error", "c-4 completed", "c-2 error"}; strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("call rows (newest first) = %v, want ops's %v; page:\n%s", got, want, page)
	}
	for _, want := range []string{
		`data-tool="calc"`, `data-tool="clock_now"`,
		`<span id="principal">ops</span>`,
		`data-for="call-c-2"`, "execution: calc: division by zero", // #open= still works
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page with ops's token lacks %q; page:\n%s", want, page)
		}
	}
	for _, unwanted := range []string{`data-tool="scratchpad"`, `data-auth=`, opsToken} {
		if strings.Contains(page, unwanted) {
			t.Errorf("the page with ops's token shows %q; page:\n%s", unwanted, page)
		}
	}
	var kept struct {
		Stored, Href string
	}
	b.value(`({stored: sessionStorage.getItem("toolgate-token"), href: location.href})`, &kept)
	if kept.Stored != opsToken || strings.Contains(kept.Href, "token") {
		t.Errorf("sessionStorage holds %q and the address is %q; want the token stored and kept out of the address", kept.Stored, kept.Href)
	}

	// Signing out forgets the token and what it showed, and ends the stream.
	b.value(`document.getElementById("signout").click()`, nil)
	b.waitFor("the token form after signing out", form+` && !document.querySelector("#calls tr.call")`)
	waitSubscribers(t, srv, monToken, 0)
	b.value(`sessionStorage.getItem("toolgate-token") ?? "(none)"`, &kept.Stored)
	if kept.Stored != "(none)" {
		t.Errorf("sessionStorage holds %q after signing out", kept.Stored)
	}
}
