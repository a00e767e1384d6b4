package catalogtool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/config/configtest"
	"github.com/toolgate/toolgate/executors"
	"github.com/toolgate/toolgate/executors/rest"
	"github.com/toolgate/toolgate/executors/rest/openapi"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// doc is the document served with catalog: search.
const doc = configtest.ShopOpenAPI

// fakeRegistry stands in for the gateway's registry: tools by name,
// replaced in place.
type fakeRegistry struct {
	mu    sync.Mutex
	tools map[string]*registry.Tool // guarded by mu
}

func (r *fakeRegistry) replace(ts ...registry.Tool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range ts {
		if _, ok := r.tools[t.Name]; !ok {
			return errors.New("no tool " + t.Name)
		}
		r.tools[t.Name] = &t
	}
	return nil
}

func (r *fakeRegistry) get(name string) (*registry.Tool, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.tools[name]
	return t, ok
}

// newShop returns doc's catalog "shop", its hidden tools registered in
// reg with their stub schemas as the gateway registers them, and their
// executors by name.
func newShop(t *testing.T) (*Catalog, *fakeRegistry, map[string]executors.Executor) {
	t.Helper()
	d, err := openapi.Open(openapi.Source{Name: "shop", Spec: []byte(doc)})
	if err != nil {
		t.Fatal(err)
	}
	ex := rest.New(nil)
	t.Cleanup(ex.Close)
	reg := &fakeRegistry{tools: map[string]*registry.Tool{}}
	c := New("shop", d, Env{
		Compile: ex.Add,
		Replace: reg.replace,
		Tool:    reg.get,
		CheckArgs: func(t *registry.Tool, args map[string]any) error {
			if vs := t.Validate(args); len(vs) > 0 {
				return retry.Errorf(retry.Validation, "%d violations", len(vs))
			}
			return nil
		},
	})
	execs := map[string]executors.Executor{}
	for i := range d.Len() {
		sp, _, ok := d.Outline(i)
		if !ok {
			t.Fatalf("operation %d does not convert", i)
		}
		sp.InputSchema = c.StubSchema()
		tl, exec, err := ex.Add(sp)
		if err != nil {
			t.Fatal(err)
		}
		execs[tl.Name] = c.Add(tl, d.Operation(i), i, exec)
		reg.tools[tl.Name] = &tl
	}
	return c, reg, execs
}

func (c *Catalog) buildCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.builds
}

// A hidden tool is built on first use, once; at most maxBytes of built
// schemas stay built, the least recently used going back to its stub.
func TestBuild(t *testing.T) {
	c, reg, execs := newShop(t)
	stubbed := func(name string) bool {
		tl, ok := reg.get(name)
		return ok && bytes.Equal(tl.InputSchema, c.StubSchema())
	}
	if n := c.buildCount(); n != 0 {
		t.Fatalf("%d tools built at start, want none", n)
	}
	// A call resolved to the stub builds the tool and checks its real
	// schema: limit is at most 100.
	stub, _ := reg.get("shop__listPets")
	_, err := execs["shop__listPets"].Execute(t.Context(), executors.Call{Tool: stub, Args: map[string]any{"limit": 1000.0}})
	if retry.Classify(err) != retry.Validation {
		t.Errorf("calling unbuilt shop__listPets with limit 1000 = %v, want a validation error", err)
	}
	if c.buildCount() != 1 || stubbed("shop__listPets") {
		t.Errorf("after the call: %d builds, listPets stubbed %v; want it built, once", c.buildCount(), stubbed("shop__listPets"))
	}
	if _, err := c.Resolve("listPets", nil); err != nil {
		t.Fatalf("Resolve(listPets) = %v", err)
	}
	if c.buildCount() != 1 {
		t.Errorf("%d builds after using a built tool again, want 1", c.buildCount())
	}

	// With room for one built schema, each build puts the last one back.
	c.mu.Lock()
	c.maxBytes = 1
	c.mu.Unlock()
	describe := func(name string) (string, error) {
		res, err := metaExec{c: c, op: Describe}.Execute(t.Context(), executors.Call{Args: map[string]any{"name": name}})
		if err != nil {
			return "", err
		}
		var out struct {
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		if err := json.Unmarshal([]byte(res.Content[0].Text), &out); err != nil {
			t.Fatal(err)
		}
		return string(out.InputSchema), nil
	}
	if got, err := describe("createPet"); err != nil || !strings.Contains(got, `"required":["body"]`) {
		t.Errorf("describe createPet = %s, %v; want its body required", got, err)
	}
	if !stubbed("shop__listPets") || stubbed("shop__createPet") {
		t.Errorf("after building createPet with room for one: listPets stubbed %v, createPet stubbed %v; want true, false",
			stubbed("shop__listPets"), stubbed("shop__createPet"))
	}

	// Many at once, each building and unbuilding the others: every
	// describe gets its tool's real schema, or is told to try again.
	var wg sync.WaitGroup
	for range 4 {
		for _, name := range []string{"listPets", "createPet", "getOrder"} {
			wg.Go(func() {
				got, err := describe(name)
				switch {
				case err != nil && retry.Classify(err) != retry.Unavailable:
					t.Errorf("describe %s: %v", name, err)
				case err == nil && strings.Contains(got, "built on first use"):
					t.Errorf("describe %s gave the stub: %s", name, got)
				}
			})
		}
	}
	wg.Wait()
}

func TestSearch(t *testing.T) {
	c, _, _ := newShop(t)
	search := func(ctx context.Context, args map[string]any) ([]string, error) {
		res, err := metaExec{c: c, op: Search}.Execute(ctx, executors.Call{Args: args})
		if err != nil {
			return nil, err
		}
		var out struct {
			Tools []hit `json:"tools"`
			Total int   `json:"total"`
		}
		if err := json.Unmarshal([]byte(res.Content[0].Text), &out); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, h := range out.Tools {
			names = append(names, h.Name)
		}
		return names, nil
	}
	tests := []struct {
		name  string
		query string
		limit float64
		want  []string
	}{
		{"a name before a tag", "pets", 0, []string{"shop__listPets", "shop__createPet"}},
		{"a path", "orders", 0, []string{"shop__getOrder"}},
		{"equal scores by name, limit", "pets order", 2, []string{"shop__getOrder", "shop__listPets"}},
		{"nothing", "zebra", 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := map[string]any{"query": tc.query}
			if tc.limit > 0 {
				args["limit"] = tc.limit
			}
			got, err := search(t.Context(), args)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("search(%q) = %v, %v; want %v", tc.query, got, err, tc.want)
			}
		})
	}
	if _, err := search(t.Context(), map[string]any{"query": " !! "}); retry.Classify(err) != retry.Validation {
		t.Errorf("search of no words = %v, want a validation error", err)
	}
}

func TestResolve(t *testing.T) {
	c, _, _ := newShop(t)
	for _, tc := range []struct {
		name, want string
		wantClass  retry.Class
	}{
		{"shop__getOrder", "shop__getOrder", ""},
		{"getOrder", "shop__getOrder", ""},
		{"getOrdr", "", retry.NotFound},
	} {
		got, err := c.Resolve(tc.name, nil)
		var class retry.Class
		if err != nil {
			class = retry.Classify(err)
		}
		if got != tc.want || class != tc.wantClass {
			t.Errorf("Resolve(%q) = %q, %v; want %q, class %q", tc.name, got, err, tc.want, tc.wantClass)
		}
	}
	if !c.IsMeta("shop__call") || c.IsMeta("shop__getOrder") {
		t.Errorf("IsMeta(shop__call), IsMeta(shop__getOrder) = %v, %v; want true, false", c.IsMeta("shop__call"), c.IsMeta("shop__getOrder"))
	}
}

func TestSplitWords(t *testing.T) {
	tests := []struct{ in, want string }{
		{"listPetsByID_v2", "list Pets By ID v2"},
		{"GetHTTPServer", "Get HTTP Server"},
		{"plain", "plain"},
	}
	for _, tc := range tests {
		if got := splitWords(tc.in); got != tc.want {
			t.Errorf("splitWords(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestQueryTerms(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"Refund a charge", []string{"refund", "charge"}},
		{"list-pets list", []string{"list", "pets"}},
		{"the a", []string{"the", "a"}},
		{" !! ", nil},
	}
	for _, tc := range tests {
		if got := queryTerms(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("queryTerms(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
