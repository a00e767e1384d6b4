package catalogtool

import (
	"cmp"
	"container/list"
	"encoding/json"
	"slices"
	"strings"
	"unicode"

	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// entry is one tool as search sees it.
type entry struct {
	name      string // the tool's registered name
	summary   string
	operation string // an OpenAPI tool's "METHOD /path"; "" for others
	// words are the distinct lower-case words of its search fields, each
	// with the weight of the best field it is in (weights).
	words []string
	wts   []uint8

	// An OpenAPI catalog's tool only (openapi.go).
	index int           // the operation's index in the document
	stub  registry.Tool // the tool as registered before it is built
	// built is its element in recent while its real schema is
	// registered; nil while the stub is. Guarded by Catalog.mu.
	built *list.Element
	size  int // the built schema's bytes
}

// Weights of a query term found in each of an entry's search fields. An OpenAPI
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
	e := &entry{name: t.Name, summary: summaryOf(t)}
	e.setWords([5]string{
		t.Name + " " + splitWords(t.Name),
		t.Title,
		"",
		paramWords(t.InputSchema),
		t.Description,
	})
	return e
}

// setWords sets e's words from its search fields, by weight (weights).
func (e *entry) setWords(fields [5]string) {
	at := map[string]int{}
	for i, f := range fields {
		for _, w := range strings.FieldsFunc(strings.ToLower(f), notWord) {
			if j, ok := at[w]; ok {
				e.wts[j] = max(e.wts[j], uint8(weights[i]))
				continue
			}
			at[w] = len(e.words)
			e.words = append(e.words, w)
			e.wts = append(e.wts, uint8(weights[i]))
		}
	}
	e.words, e.wts = slices.Clip(e.words), slices.Clip(e.wts)
}

// notWord reports whether r separates words.
func notWord(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }

// index finds entries by the words of their search fields: a query term
// matches a word it is a substring of, as it would match the field (a
// term has no separators), so a search scans the distinct words and their
// postings, not every tool's fields. Entries live in numbered slots; a
// removed entry's slot is emptied, and the index is rebuilt when most
// slots are empty, so that removing a tool costs no scan of postings.
type index struct {
	byName map[string]int32     // name → its entry's slot
	slots  []*entry             // nil: a removed entry's
	empty  int                  // how many slots are nil
	words  map[string][]posting // word → the slots of the entries with it
}

// posting is one entry's use of a word: its slot, and the word's weight
// in it.
type posting struct {
	slot int32
	wt   uint8
}

func newIndex() index {
	return index{byName: map[string]int32{}, words: map[string][]posting{}}
}

// len is how many entries ix holds.
func (ix *index) len() int { return len(ix.byName) }

// get returns the entry called name.
func (ix *index) get(name string) (*entry, bool) {
	s, ok := ix.byName[name]
	if !ok {
		return nil, false
	}
	return ix.slots[s], true
}

// names calls yield with each entry's name, in no order.
func (ix *index) names(yield func(string) bool) {
	for n := range ix.byName {
		if !yield(n) {
			return
		}
	}
}

// put adds e, in place of an entry of the same name.
func (ix *index) put(e *entry) {
	ix.remove(e.name)
	slot := int32(len(ix.slots))
	ix.slots = append(ix.slots, e)
	ix.byName[e.name] = slot
	for i, w := range e.words {
		ix.words[w] = append(ix.words[w], posting{slot, e.wts[i]})
	}
}

// remove drops the entry called name, if any.
func (ix *index) remove(name string) {
	slot, ok := ix.byName[name]
	if !ok {
		return
	}
	delete(ix.byName, name)
	ix.slots[slot] = nil
	if ix.empty++; ix.empty > 64 && ix.empty > len(ix.slots)/2 {
		old := ix.slots
		*ix = newIndex()
		for _, e := range old {
			if e != nil {
				ix.put(e)
			}
		}
	}
}

// tally is how an entry matches a query.
type tally struct{ matched, score int }

// match calls add with each entry that matches a term of terms and how:
// how many terms it has, and for each the weight of its best word with it.
func (ix *index) match(terms []string, add func(*entry, tally)) {
	best := make([]uint8, len(ix.slots))
	tot := make([]tally, len(ix.slots))
	for _, term := range terms {
		clear(best)
		for w, ps := range ix.words {
			if !strings.Contains(w, term) {
				continue
			}
			for _, p := range ps {
				best[p.slot] = max(best[p.slot], p.wt)
			}
		}
		for s, wt := range best {
			if wt > 0 {
				tot[s].matched++
				tot[s].score += int(wt)
			}
		}
	}
	for s, t := range tot {
		if e := ix.slots[s]; t.matched > 0 && e != nil {
			add(e, t)
		}
	}
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
	for _, w := range strings.FieldsFunc(strings.ToLower(q), notWord) {
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

// better orders hits best first: by how many terms they match, then by
// weighted score, then by name, so the same query always gives the same
// order.
func better(a, b hit) int {
	return cmp.Or(cmp.Compare(b.matched, a.matched), cmp.Compare(b.score, a.score), cmp.Compare(a.Name, b.Name))
}

// top keeps the best limit hits of those offered, in order, and counts
// them all: a search ranks thousands of matches, and sorting them all to
// return ten would cost most of its time.
type top struct {
	limit int
	hits  []hit // the best so far, best first
	total int
}

// offer counts h and keeps it if it is among the best limit so far.
func (t *top) offer(h hit) {
	t.total++
	if len(t.hits) == t.limit && better(h, t.hits[len(t.hits)-1]) >= 0 {
		return
	}
	i, _ := slices.BinarySearchFunc(t.hits, h, better)
	if len(t.hits) == t.limit {
		t.hits = t.hits[:len(t.hits)-1]
	}
	t.hits = slices.Insert(t.hits, i, h)
}
