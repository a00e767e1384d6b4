package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/prereq"
)

// chromiumPath finds the headless browser the /ui tests drive. `make
// test` installs it (the chromium target); without it the test is skipped,
// or fails under CI=true, naming the prerequisite (internal/prereq).
func chromiumPath(t *testing.T) string {
	t.Helper()
	return prereq.Need(t, prereq.Chromium)
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
	// The totals and charts count ops's calls only, as the rows do.
	b.waitFor("ops's totals", `document.getElementById("total-calls").textContent === "3" && `+
		`document.getElementById("total-errors").textContent === "2" && `+
		`document.querySelector('#tools tr[data-tool="calc"]').dataset.calls === "3"`)
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

// TestUIOperatorView checks what an operator reads on /ui, in headless
// Chromium with an admin's token: each call's time, principal and
// session; totals; per tool the calls per minute, error rate and p50/p95
// as inline SVG charts drawn from the calls the page saw (the recent ones
// /ui/state lists, then the live ones); a filter; and no backend address
// anywhere on the page. A screenshot must show the charts' colours where
// the DOM says the charts are.
func TestUIOperatorView(t *testing.T) {
	const (
		adminToken = "ui-admin-token-0123456789abcdef"
		devToken   = "ui-dev2-token-0123456789abcdef"
	)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"pong":true}`)
	}))
	t.Cleanup(backend.Close)
	srv := startServe(t, `
builtin: [calc, clock_now, scratchpad]
rest:
  - name: ping
    url: `+backend.URL+`/ping
auth:
  tokens:
    - name: admin
      token: `+adminToken+`
    - name: dev
      token: `+devToken+`
  admins: [admin]
`)
	admin, err := authClient(t, srv, adminToken)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := authClient(t, srv, devToken)
	if err != nil {
		t.Fatal(err)
	}
	// Before the page opens: it shows these from /ui/state's recent calls.
	wantOK(t, mustCall(t, dev, "calc", map[string]any{"expression": "1+1"}, ""), "2")
	wantError(t, mustCall(t, dev, "calc", map[string]any{"expression": "1/0"}, ""), "execution")

	b := newBrowser(t)
	b.navigate(srv.URL + "/ui")
	b.waitFor("the token form", `document.body.dataset.auth === "required"`)
	b.value(`document.getElementById("token").focus()`, nil)
	b.typeText(adminToken)
	b.waitFor("the page following /events", `document.body.dataset.live === "true"`)
	waitSubscribers(t, srv, adminToken, 1)
	// While it follows /events.
	wantOK(t, mustCall(t, dev, "calc", map[string]any{"expression": "2*3"}, ""), "6")
	wantOK(t, mustCall(t, admin, "scratchpad", map[string]any{"op": "put", "key": "k", "value": "v"}, ""), "stored k")
	wantOK(t, mustCall(t, admin, "ping", map[string]any{}, ""), `{"pong":true}`)
	b.waitFor("five calls in the totals", `document.getElementById("total-calls").textContent === "5"`)
	b.waitFor("calc's charts", `document.querySelector('#tools tr[data-tool="calc"]').dataset.calls === "3"`)

	var view struct {
		Headers []string
		Rows    []struct{ Time, Tool, Principal, Session, State string }
		Totals  map[string]string
		Tools   map[string]struct {
			Calls     string
			Bars      int
			ErrBars   int
			Lines     int
			Rate      string
			ErrorRate string
			Latency   string
			RateTitle string
		}
	}
	b.value(`({
  headers: [...document.querySelectorAll("#calls thead th")].map((th) => th.textContent),
  rows: [...document.querySelectorAll("#calls tr.call")].map((r) => ({
    time: r.querySelector(".time").textContent, tool: r.querySelector(".tool").textContent,
    principal: r.querySelector(".principal").textContent, session: r.querySelector(".session").textContent,
    state: r.dataset.state })),
  totals: Object.fromEntries([...document.querySelectorAll("#totals b")].map((e) => [e.id, e.textContent])),
  tools: Object.fromEntries([...document.querySelectorAll("#tools tr.tool")].map((r) => [r.dataset.tool, {
    calls: r.dataset.calls,
    bars: r.querySelectorAll(".rate svg.chart rect.bar").length,
    errBars: r.querySelectorAll(".errors svg.chart rect.bar").length,
    lines: r.querySelectorAll(".latency svg.chart polyline").length,
    rate: r.querySelector(".rate span").textContent,
    errorRate: r.querySelector(".errors span").textContent,
    latency: r.querySelector(".latency span").textContent,
    rateTitle: r.querySelector(".rate svg title").textContent }]))
})`, &view)

	for _, h := range []string{"time", "principal", "session"} {
		if !slices.Contains(view.Headers, h) {
			t.Errorf("the calls table's headers %v lack %q", view.Headers, h)
		}
	}
	clock := regexp.MustCompile(`^\d\d:\d\d:\d\d$`)
	sessions := map[string]string{}
	if len(view.Rows) != 5 {
		t.Fatalf("call rows = %+v, want 5", view.Rows)
	}
	for _, r := range view.Rows {
		if !clock.MatchString(r.Time) || r.Session == "" {
			t.Errorf("call row %+v: want an HH:MM:SS time and a session", r)
		}
		if want := map[string]string{"calc": "dev", "scratchpad": "admin", "ping": "admin"}[r.Tool]; r.Principal != want {
			t.Errorf("call row %+v: principal %q, want %q", r, r.Principal, want)
		}
		if s, ok := sessions[r.Principal]; ok && s != r.Session {
			t.Errorf("%s's calls show sessions %q and %q, want one (one client each)", r.Principal, s, r.Session)
		}
		sessions[r.Principal] = r.Session
	}
	if sessions["dev"] == sessions["admin"] {
		t.Errorf("dev and admin show the same session %q", sessions["dev"])
	}
	if got, want := view.Totals, map[string]string{"total-calls": "5", "total-errors": "1", "total-error-rate": "20%", "total-inflight": "0"}; !mapSubset(want, got) {
		t.Errorf("totals = %v, want %v", got, want)
	}
	for _, id := range []string{"total-p50", "total-p95"} {
		if !strings.HasSuffix(view.Totals[id], " ms") {
			t.Errorf("totals %s = %q, want a latency in ms", id, view.Totals[id])
		}
	}
	calc := view.Tools["calc"]
	if calc.Calls != "3" || calc.Bars < 1 || calc.ErrBars < 1 || calc.Lines != 2 || calc.ErrorRate != "33%" ||
		!strings.HasSuffix(calc.Rate, "/min") || !strings.Contains(calc.Latency, " ms / ") || sumFields(calc.RateTitle) != 3 {
		t.Errorf("calc's stats = %+v; want 3 calls in the rate chart, an error bar, 33%%, two latency lines", calc)
	}
	if p := view.Tools["ping"]; p.Calls != "1" || p.ErrBars != 0 || p.ErrorRate != "0%" {
		t.Errorf("ping's stats = %+v, want 1 call and no errors", p)
	}
	if c := view.Tools["clock_now"]; c.Calls != "0" || c.Bars != 0 || c.Lines != 0 || c.ErrorRate != "–" {
		t.Errorf("clock_now's stats = %+v, want no calls drawn", c)
	}
	backendAddr := strings.TrimPrefix(backend.URL, "http://")
	if page := b.html(); strings.Contains(page, backendAddr) {
		t.Errorf("the page shows the backend address %s; page:\n%s", backendAddr, page)
	}

	// The filter: every word must match; tools and calls alike.
	b.value(`document.getElementById("filter").focus()`, nil)
	b.typeText("scratch")
	const visible = `[...document.querySelectorAll(SEL)].filter((r) => !r.hidden).map((r) => r.dataset.tool || r.querySelector(".tool").textContent)`
	var shown struct{ Calls, Tools []string }
	b.waitFor("the filter applied", `document.querySelectorAll("#calls tr.call:not([hidden])").length === 1`)
	b.value(`({calls: `+strings.ReplaceAll(visible, "SEL", `"#calls tr.call"`)+`, tools: `+strings.ReplaceAll(visible, "SEL", `"#tools tr.tool"`)+`})`, &shown)
	if !slices.Equal(shown.Calls, []string{"scratchpad"}) || !slices.Equal(shown.Tools, []string{"scratchpad"}) {
		t.Errorf("with the filter \"scratch\" the page shows calls %v and tools %v, want scratchpad's only", shown.Calls, shown.Tools)
	}
	b.value(`(() => { const f = document.getElementById("filter"); f.value = "dev error"; f.dispatchEvent(new Event("input")); })()`, nil)
	b.value(`({calls: `+strings.ReplaceAll(visible, "SEL", `"#calls tr.call"`)+`, tools: []})`, &shown)
	if !slices.Equal(shown.Calls, []string{"calc"}) {
		t.Errorf(`with the filter "dev error" the page shows calls %v, want dev's failed calc`, shown.Calls)
	}
	b.value(`(() => { const f = document.getElementById("filter"); f.value = ""; f.dispatchEvent(new Event("input")); })()`, nil)

	checkScreenshot(t, b)
}

// mapSubset reports whether got has every key of want with its value.
func mapSubset(want, got map[string]string) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// sumFields adds the numbers after the colon of a chart title such as
// "calls per minute, oldest first: 0, 0, 3".
func sumFields(title string) int {
	_, list, _ := strings.Cut(title, ": ")
	n := 0
	for _, f := range strings.Split(list, ", ") {
		v, _ := strconv.Atoi(f)
		n += v
	}
	return n
}

// checkScreenshot takes a screenshot of the page and checks that it is
// a real rendering (its size, many colours) with calc's charts drawn
// where the DOM places them: the rate chart holds pixels of the bars'
// blue, the error chart of their red. TOOLGATE_UI_SCREENSHOT=path also
// writes it there (docs/ui.png is made so).
func checkScreenshot(t *testing.T, b *browser) {
	t.Helper()
	const width, height = 1280, 900
	data := b.screenshot(width, height)
	if out := os.Getenv("TOOLGATE_UI_SCREENSHOT"); out != "" {
		if err := os.WriteFile(out, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	if r := img.Bounds(); r.Dx() != width || r.Dy() != height {
		t.Fatalf("the screenshot is %v, want %dx%d", r, width, height)
	}
	colours := map[color.RGBA]bool{}
	for y := 0; y < height; y += 2 {
		for x := 0; x < width; x += 2 {
			colours[color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)] = true
		}
	}
	if len(colours) < 30 {
		t.Errorf("the screenshot has %d colours, want a rendered page (30 or more)", len(colours))
	}
	var boxes map[string]struct{ X, Y, W, H float64 }
	b.value(`Object.fromEntries(["rate", "errors"].map((k) => {
  const r = document.querySelector('#tools tr[data-tool="calc"] .' + k + " svg").getBoundingClientRect();
  return [k, {x: r.x, y: r.y, w: r.width, h: r.height}];
}))`, &boxes)
	for chart, want := range map[string]color.RGBA{"rate": {0x4a, 0x78, 0xc2, 0xff}, "errors": {0xc2, 0x4a, 0x4a, 0xff}} {
		box := boxes[chart]
		if box.W == 0 || box.Y+box.H > height {
			t.Errorf("calc's %s chart is at %+v, outside the %dx%d screenshot", chart, box, width, height)
			continue
		}
		n := 0
		for y := int(box.Y); y < int(box.Y+box.H); y++ {
			for x := int(box.X); x < int(box.X+box.W); x++ {
				if near(color.RGBAModel.Convert(img.At(x, y)).(color.RGBA), want) {
					n++
				}
			}
		}
		if n < 10 {
			t.Errorf("calc's %s chart at %+v has %d pixels of its bars' colour %v in the screenshot, want 10 or more", chart, box, n, want)
		}
	}
}

// near reports whether two colours differ by at most 24 in each channel.
func near(a, b color.RGBA) bool {
	d := func(x, y uint8) bool { return max(x, y)-min(x, y) <= 24 }
	return d(a.R, b.R) && d(a.G, b.G) && d(a.B, b.B)
}
