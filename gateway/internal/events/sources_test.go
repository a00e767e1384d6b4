package events

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/registry"
)

// only permits the tools it names.
type only map[string]bool

func (o only) Permits(tool string) bool { return o[tool] }
func (o only) Take() time.Duration      { return 0 }

// TestListingSources: tools grouped by source and sorted, an upstream's
// state, the backend's address for admins only, and an upstream waiting
// for authorization shown to whoever may see one of its tools, or to
// admins when none is registered.
func TestListingSources(t *testing.T) {
	l := &Listing{
		Tools: []*registry.Tool{
			{Name: "rest_get", Kind: registry.REST, Source: "openapi:pets"},
			{Name: "gh__issues", Kind: registry.MCP, Source: "upstream:gh"},
			echo,
			{Name: "rest_put", Kind: registry.REST, Source: "openapi:pets"},
		},
		Up:        map[string]bool{"gh": true},
		NeedsAuth: map[string]string{"gh": "toolgate auth gh", "drive": "toolgate auth drive"},
		Backend: func(t *registry.Tool) (string, string) {
			if t.Kind == registry.REST {
				return "pets.internal:8080", "closed"
			}
			return "", ""
		},
	}
	admin := `[{"source":"embedder","tools":[{"name":"echo","kind":"stateless"}]},` +
		`{"source":"openapi:pets","tools":[{"name":"rest_get","kind":"rest","backend":"pets.internal:8080","circuit":"closed"},{"name":"rest_put","kind":"rest","backend":"pets.internal:8080","circuit":"closed"}]},` +
		`{"source":"upstream:drive","up":false,"needs_auth":"toolgate auth drive","tools":[]},` +
		`{"source":"upstream:gh","up":true,"needs_auth":"toolgate auth gh","tools":[{"name":"gh__issues","kind":"mcp"}]}]`
	bob := &principal.Identity{Name: "bob", Policy: only{"rest_get": true, "gh__issues": true}}
	user := `[{"source":"openapi:pets","tools":[{"name":"rest_get","kind":"rest","circuit":"closed"}]},` +
		`{"source":"upstream:gh","up":true,"needs_auth":"toolgate auth gh","tools":[{"name":"gh__issues","kind":"mcp"}]}]`
	for _, tc := range []struct {
		name string
		id   *principal.Identity
		want string
	}{
		{"no authentication", nil, admin},
		{"an admin", &principal.Identity{Name: "root", Admin: true, Policy: only{}}, admin},
		{"a principal", bob, user},
	} {
		b, err := json.Marshal(l.Sources(tc.id))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("%s: Sources =\n%s\nwant\n%s", tc.name, b, tc.want)
		}
	}
}
