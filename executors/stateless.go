package executors

import (
	"context"
	"sync"

	"github.com/toolgate/toolgate/retry"
)

// Stateless runs stateless tools: one Go function per tool name. It is safe
// for concurrent use.
type Stateless struct {
	mu    sync.RWMutex
	funcs map[string]StatelessFunc // guarded by mu
}

var _ Executor = (*Stateless)(nil)

// NewStateless returns an executor with no tools.
func NewStateless() *Stateless { return &Stateless{funcs: map[string]StatelessFunc{}} }

// Set makes fn the implementation of the tool called name.
func (s *Stateless) Set(name string, fn StatelessFunc) {
	s.mu.Lock()
	s.funcs[name] = fn
	s.mu.Unlock()
}

// Delete forgets the tool called name.
func (s *Stateless) Delete(name string) {
	s.mu.Lock()
	delete(s.funcs, name)
	s.mu.Unlock()
}

// Execute calls the tool's function.
func (s *Stateless) Execute(ctx context.Context, call Call) (Result, error) {
	s.mu.RLock()
	fn := s.funcs[call.Tool.Name]
	s.mu.RUnlock()
	if fn == nil {
		return Result{}, retry.Errorf(retry.NotFound, "stateless tool %q has no implementation", call.Tool.Name)
	}
	return fn(ctx, call.Args)
}
