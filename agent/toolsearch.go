package agent

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// ToolSearchName is the tool a [Runner] offers in place of the tools it
// cannot send ([RunnerOptions.MaxTools]): the model searches with it, and
// the tools it finds are sent from the next step on.
const ToolSearchName = "search_tools"

// ToolLimiter is a [Provider] that accepts at most MaxTools tools in a
// request (OpenAI: 128).
type ToolLimiter interface {
	MaxTools() int
}

// toolSearchResults caps the tools one search returns (and loads).
const toolSearchResults = 8

var toolSearchSpec = ToolSpec{
	Name:        ToolSearchName,
	Description: "Find tools by what they do. Only some tools are listed; search when none of them fits. The tools found can be called from the next turn on.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"words describing what the tool should do"}},"required":["query"]}`),
}

// toolSelector picks the tools a request carries when there are more than
// the cap: the search tool, the gateway's catalog meta-tools, the tools
// searches found, then the tools most relevant to the conversation.
type toolSelector struct {
	max int

	mu     sync.Mutex // guards all and loaded
	all    map[string]ToolSpec
	loaded []string // tool names found by searches, in order
}

func newToolSelector(max int, p Provider) *toolSelector {
	if max <= 0 {
		if l, ok := p.(ToolLimiter); ok {
			max = l.MaxTools()
		}
	}
	return &toolSelector{max: max}
}

// limited reports whether all is more than the cap.
func (t *toolSelector) limited(all []ToolSpec) bool { return t.max > 0 && len(all) > t.max }

// offer returns the tools to send: all when they fit, else a selection
// of at most the cap.
func (t *toolSelector) offer(all []ToolSpec, history []Message) []ToolSpec {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.all == nil || len(t.all) != len(all) {
		t.all = make(map[string]ToolSpec, len(all))
	}
	for _, s := range all {
		t.all[s.Name] = s
	}
	if !t.limited(all) {
		return all
	}
	out := []ToolSpec{toolSearchSpec}
	seen := map[string]bool{ToolSearchName: true}
	add := func(s ToolSpec) {
		if len(out) < t.max && !seen[s.Name] {
			seen[s.Name] = true
			out = append(out, s)
		}
	}
	for _, s := range all {
		if isCatalogMeta(s.Name) {
			add(s)
		}
	}
	for _, name := range slices.Backward(t.loaded) {
		if s, ok := t.all[name]; ok {
			add(s) // the latest found first, should they not all fit
		}
	}
	for _, s := range rank(all, conversationText(history)) {
		add(s)
	}
	return out
}

// isCatalogMeta reports whether name is a gateway's catalog meta-tool
// (<source>__search, __describe, __call): they reach a whole catalog.
func isCatalogMeta(name string) bool {
	return strings.HasSuffix(name, "__search") || strings.HasSuffix(name, "__describe") || strings.HasSuffix(name, "__call")
}

// answer answers a call of the search tool, loading the tools found; it
// returns nil for any other call.
func (t *toolSelector) answer(c ToolCall) *ToolResult {
	if c.Name != ToolSearchName {
		return nil
	}
	var args struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil || strings.TrimSpace(args.Query) == "" {
		return errorResult(`validation: call search_tools with {"query": "words describing the tool"}`)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	all := make([]ToolSpec, 0, len(t.all))
	for _, s := range t.all {
		all = append(all, s)
	}
	found := rank(all, args.Query)
	var b strings.Builder
	for _, s := range found[:min(len(found), toolSearchResults)] {
		if score(s, terms(args.Query)) == 0 {
			break
		}
		t.loaded = append(slices.DeleteFunc(t.loaded, func(n string) bool { return n == s.Name }), s.Name)
		fmt.Fprintf(&b, "- %s: %s\n", s.Name, firstLine(s.Description))
	}
	if b.Len() == 0 {
		return &ToolResult{Content: []Part{Text(fmt.Sprintf("No tool matches %q. Search again with other words (what the tool does, the service it reaches), or answer without a tool.", args.Query))}}
	}
	return &ToolResult{Content: []Part{Text("Found these tools; call them from now on:\n" + b.String())}}
}

// spec returns the tool named name, or nil.
func (t *toolSelector) spec(name string) *ToolSpec {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.all[name]; ok {
		return &s
	}
	return nil
}

// rank returns tools by relevance to text, best first, ties by name.
func rank(tools []ToolSpec, text string) []ToolSpec {
	ts := terms(text)
	out := slices.Clone(tools)
	scores := make(map[string]int, len(out))
	for _, s := range out {
		scores[s.Name] = score(s, ts)
	}
	slices.SortStableFunc(out, func(a, b ToolSpec) int {
		return cmp.Or(cmp.Compare(scores[b.Name], scores[a.Name]), strings.Compare(a.Name, b.Name))
	})
	return out
}

// score counts the query terms in a tool's name (twice) and description.
func score(s ToolSpec, query []string) int {
	name := strings.Join(terms(s.Name), " ")
	desc := strings.ToLower(s.Description)
	n := 0
	for _, q := range query {
		if strings.Contains(name, q) {
			n += 2
		}
		if strings.Contains(desc, q) {
			n++
		}
	}
	return n
}

// terms splits text into lower-case words of 3 bytes or more.
func terms(text string) []string {
	f := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127)
	})
	return slices.DeleteFunc(f, func(s string) bool { return len(s) < 3 })
}

// conversationText is what tools are ranked against: the user's messages.
func conversationText(h []Message) string {
	var b strings.Builder
	for _, m := range h {
		if m.Role == RoleUser {
			b.WriteString(m.Text())
			b.WriteByte(' ')
		}
	}
	return b.String()
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
