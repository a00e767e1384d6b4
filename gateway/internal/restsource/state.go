package restsource

import (
	"crypto/sha256"
	"slices"
	"sync"
)

// SkippedOperation is an operation of an OpenAPI source that made no
// tool, with why.
type SkippedOperation struct {
	// Source is the openapi source's name.
	Source string
	// Operation is "METHOD /path", with " (operationId)" when it has one.
	Operation string
	// Tool is the name its tool would have had.
	Tool string
	// Reason says why it was skipped.
	Reason string
}

// State is what loading the OpenAPI sources left behind: the operations
// skipped, the sources not loaded and why, and each document's checksum.
// Its zero value is empty and ready; it is safe for concurrent use.
type State struct {
	mu       sync.Mutex
	skipped  []SkippedOperation
	problems []sourceProblem
	down     []string // names of the sources not loaded, for /readyz
	// sums are the SHA-256 of each source's document as last read, so that
	// a reload tells a changed document from an unchanged one
	// ([Loader.DocChanged]).
	sums map[string][32]byte
}

// sourceProblem is why an OpenAPI source was not loaded.
type sourceProblem struct {
	source string
	err    error
}

// Skipped returns the operations that made no tool, in source then
// document order.
func (s *State) Skipped() []SkippedOperation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.skipped)
}

// Problems returns why each source not loaded was not, each placed in
// the configuration file.
func (s *State) Problems() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]error, 0, len(s.problems))
	for _, p := range s.problems {
		out = append(out, p.err)
	}
	return out
}

// Unavailable returns the names of the OpenAPI sources not loaded, or
// nil.
func (s *State) Unavailable() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.down)
}

// Forget drops what loading source left behind, before it is loaded
// again or removed.
func (s *State) Forget(source string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.skipped = slices.DeleteFunc(s.skipped, func(o SkippedOperation) bool { return o.Source == source })
	s.problems = slices.DeleteFunc(s.problems, func(p sourceProblem) bool { return p.source == source })
	s.down = slices.DeleteFunc(s.down, func(n string) bool { return n == source })
	delete(s.sums, source)
}

// setSum records the document source was loaded from.
func (s *State) setSum(source string, doc []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sums == nil {
		s.sums = map[string][32]byte{}
	}
	s.sums[source] = sha256.Sum256(doc)
}

// sum returns the SHA-256 of the document source was last loaded from.
func (s *State) sum(source string) ([32]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum, ok := s.sums[source]
	return sum, ok
}

// loaded records the operations of a source that made no tool.
func (s *State) loaded(skipped []SkippedOperation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.skipped = append(s.skipped, skipped...)
}

// failed records that source was not loaded, and why.
func (s *State) failed(source string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.problems = append(s.problems, sourceProblem{source, err})
	if !slices.Contains(s.down, source) {
		s.down = append(s.down, source)
	}
}
