package catalogtool

import (
	"cmp"
	"container/list"
	"encoding/json"
	"slices"
	"strings"
	"unicode"

	"github.com/toolgate/toolgate/internal/principal"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// entry is one tool as search sees it.
type entry struct {
	name      string // the tool's registered name
	summary   string
	operation string // an OpenAPI tool's "METHOD /path"; "" for others
	// Lower-case search fields, by weight (weights).
	fields [5]string

	// An OpenAPI catalog's tool only (openapi.go).
	index int           // the operation's index in the document
	stub  registry.Tool // the tool as registered before it is built
	// built is its element in recent while its real schema is
	// registered; nil while the stub is. Guarded by Catalog.mu.
	built *list.Element
	size  int // the built schema's bytes
}

// Weights of a query term found in each of entry.fields. An OpenAPI
// tool's fields are its name (its words split at case changes too),
// operationId and tags, path, summary, description; a registered tool's
// are its name, title, (none), parameter names, description.
var weights = [5]int{8, 4, 4, 2, 1}

// Bounds on a query: longer ones are refused with advice, not searched
// (a megabyte of words would scan every tool once per word).
const (
	maxQueryBytes = 1000
	maxQueryTerms = 16
)

// toolEntry is the search entry of a registered tool: its name, title,
// parameter names and description.
func toolEntry(t *registry.Tool) *entry {
	return &entry{name: t.Name, summary: summaryOf(t), fields: [5]string{
		strings.ToLower(t.Name + " " + splitWords(t.Name)),
		strings.ToLower(t.Title),
		"",
		strings.ToLower(paramWords(t.InputSchema)),
		strings.ToLower(t.Description),
	}}
}

// maxSummary bounds a search result's summary, in runes.
const maxSummary = 200

// summaryOf is t's one-line summary: the first line of its description
// (its title when it has none), at most maxSummary runes.
func summaryOf(t *registry.Tool) string {
	s, _, _ := strings.Cut(strings.TrimSpace(t.Description), "\n")
	if s == "" {
		s = t.Title
	}
	if rs := []rune(s); len(rs) > maxSummary {
		s = string(rs[:maxSummary-1]) + "…"
	}
	return s
}

// paramWords lists the top-level property names of an input schema, each
// also split into words.
func paramWords(schema json.RawMessage) string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return ""
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n+" "+splitWords(n))
	}
	slices.Sort(names)
	return strings.Join(names, " ")
}

// splitWords returns s with a space at each lower-to-upper case change
// and each run of non-alphanumerics: "listPetsByID_v2" → "list Pets By
// ID v2", so that a query word finds a camelCase name.
func splitWords(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			b.WriteByte(' ')
			continue
		}
		if i > 0 && unicode.IsUpper(r) && (unicode.IsLower(rs[i-1]) ||
			(i+1 < len(rs) && unicode.IsUpper(rs[i-1]) && unicode.IsLower(rs[i+1]))) {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// parseQuery returns the words of query q to search for, or a validation
// error saying what to write instead: a query of no words (all
// punctuation), more than maxQueryBytes or more than maxQueryTerms
// distinct words.
func parseQuery(q string) ([]string, error) {
	if len(q) > maxQueryBytes {
		return nil, retry.Errorf(retry.Validation, "query is %d bytes, more than the %d allowed; write a few keywords, like \"list customers\"", len(q), maxQueryBytes)
	}
	terms := queryTerms(q)
	switch {
	case len(terms) == 0:
		return nil, retry.Errorf(retry.Validation, "query %q has no words to search for; write keywords, like \"list customers\"", q)
	case len(terms) > maxQueryTerms:
		return nil, retry.Errorf(retry.Validation, "query has %d words, more than the %d allowed; keep the few that say what the tool does", len(terms), maxQueryTerms)
	}
	return terms, nil
}

// queryTerms splits a search query into distinct lower-case words,
// leaving out one-letter words and a few English function words ("a",
// "the", "for", ...), which as substrings would match nearly every tool,
// unless nothing else is left.
func queryTerms(q string) []string {
	var terms, weak []string
	for _, w := range strings.FieldsFunc(strings.ToLower(q), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		switch {
		case slices.Contains(terms, w) || slices.Contains(weak, w):
		case len([]rune(w)) < 2 || slices.Contains(stopWords, w):
			weak = append(weak, w)
		default:
			terms = append(terms, w)
		}
	}
	if len(terms) == 0 {
		return weak
	}
	return terms
}

// stopWords are left out of a query that has other words.
var stopWords = []string{"an", "and", "as", "at", "by", "for", "from", "in", "into", "is", "it", "of", "on", "or", "the", "to", "with"}

// hit is one search result.
type hit struct {
	Name      string `json:"name"`
	Summary   string `json:"summary"`
	Operation string `json:"operation,omitempty"`
	matched   int
	score     int
}

// match scores e against terms: how many terms it matches, and their
// weights (each term counted at its best field); ok is false when it
// matches none.
func (e *entry) match(terms []string) (h hit, ok bool) {
	h = hit{Name: e.name, Summary: e.summary, Operation: e.operation}
	for _, term := range terms {
		best := 0
		for i, f := range e.fields {
			if weights[i] > best && strings.Contains(f, term) {
				best = weights[i]
			}
		}
		if best > 0 {
			h.matched++
			h.score += best
		}
	}
	return h, h.matched > 0
}

// collect appends to hits the entries id may call that match terms.
func collect(hits []hit, es func(yield func(*entry) bool), terms []string, id *principal.Identity) []hit {
	for e := range es {
		if h, ok := e.match(terms); ok && id.Permits(e.name) {
			hits = append(hits, h)
		}
	}
	return hits
}

// rank sorts hits best first: by how many terms they match, then by
// weighted score, then by name, so the same query always gives the same
// order; and returns at most limit of them and how many there were.
func rank(hits []hit, limit int) ([]hit, int) {
	slices.SortFunc(hits, func(a, b hit) int {
		return cmp.Or(cmp.Compare(b.matched, a.matched), cmp.Compare(b.score, a.score), cmp.Compare(a.Name, b.Name))
	})
	return hits[:min(len(hits), limit)], len(hits)
}
