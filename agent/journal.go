package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// JournalVersion is the version of the journal format this package
// writes and reads.
const JournalVersion = 1

// journalKind names the format in a journal's first line.
const journalKind = "toolgate-agent-journal"

// ErrJournalVersion is wrapped by the *[JournalError] of a journal written
// by another version of the format.
var ErrJournalVersion = errors.New("the journal is of another format version")

// JournalError reports a journal that cannot be resumed from: not a
// journal, another version, or cut short in a line (a crash in the middle
// of a write). Nothing is written to such a journal.
type JournalError struct {
	Path string
	Line int
	Err  error
}

// Error names the file, the line and the problem.
func (e *JournalError) Error() string {
	return fmt.Sprintf("%s:%d: cannot resume from this journal: %v", e.Path, e.Line, e.Err)
}

// Unwrap returns the problem.
func (e *JournalError) Unwrap() error { return e.Err }

// Journal records a run's history as JSON Lines, one record a line,
// written and synced as each message is committed: the user's messages,
// each assistant message once its stream ended, each tool result the
// moment its call finished (so a crash or a cancel loses no finished
// call), and a whole new history after compaction. [OpenJournal] reads
// it back; a [Runner] given the history and the journal goes on where the
// run stopped, running only the tool calls that have no result in it.
type Journal struct {
	path string

	mu     sync.Mutex // guards f, msgs, synced, held and holding
	f      *os.File
	msgs   int // messages the journal's history holds
	synced int // leading messages of the runner's history the journal holds; -1: unknown
	// holding is set while a step streams: the results of its calls that
	// finish before its assistant message is written wait in held.
	holding bool
	held    []Message
	failed  error // a result's write error, returned by the next write
}

// journalHeader is a journal's first line.
type journalHeader struct {
	Journal string `json:"journal"`
	Version int    `json:"version"`
}

// journalRecord is one line after the header: a message appended, or the
// history replaced.
type journalRecord struct {
	Message *Message  `json:"message,omitempty"`
	Replace []Message `json:"replace,omitempty"`
}

// CreateJournal creates (or truncates) the journal at path for a new run.
func CreateJournal(path string) (*Journal, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating the journal: %w", err)
	}
	j := &Journal{path: path, f: f}
	if err := j.write(journalHeader{Journal: journalKind, Version: JournalVersion}); err != nil {
		f.Close()
		return nil, err
	}
	return j, nil
}

// OpenJournal reads the journal at path and opens it to go on writing: it
// returns the history it holds, to pass as [Params.Messages] with the
// journal as [RunnerOptions.Journal]. A journal that is cut short, of
// another version or not a journal is a *[JournalError], and is left as it
// is.
func OpenJournal(path string) (*Journal, History, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("opening the journal: %w", err)
	}
	h, err := readJournal(path, data)
	if err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("opening the journal: %w", err)
	}
	return &Journal{path: path, f: f, msgs: len(h), synced: len(h)}, h, nil
}

// readJournal decodes a journal's lines into its history.
func readJournal(path string, data []byte) (History, error) {
	bad := func(line int, err error) error { return &JournalError{Path: path, Line: line, Err: err} }
	if len(data) > 0 && data[len(data)-1] != '\n' {
		return nil, bad(bytes.Count(data, []byte("\n"))+1, errors.New("its last line is cut short (the run stopped in the middle of a write); remove that line to resume from the line before"))
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var h History
	line := 0
	for sc.Scan() {
		line++
		if line == 1 {
			var hd journalHeader
			if err := json.Unmarshal(sc.Bytes(), &hd); err != nil || hd.Journal != journalKind {
				return nil, bad(1, errors.New("it is not a toolgate agent journal"))
			}
			if hd.Version != JournalVersion {
				return nil, bad(1, fmt.Errorf("%w: version %d, this program reads version %d", ErrJournalVersion, hd.Version, JournalVersion))
			}
			continue
		}
		var rec journalRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, bad(line, fmt.Errorf("the record does not decode: %w", err))
		}
		switch {
		case rec.Message != nil:
			h = append(h, *rec.Message)
		case rec.Replace != nil:
			h = append(History(nil), rec.Replace...)
		default:
			return nil, bad(line, errors.New("the record is neither a message nor a replacement"))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, bad(line+1, err)
	}
	if line == 0 {
		return nil, bad(1, errors.New("it is empty"))
	}
	return h, nil
}

// Close closes the journal's file.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.f.Close()
}

// write appends v as one line and syncs it to disk. Callers hold mu or
// own j alone.
func (j *Journal) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if _, err := j.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("journal: writing: %w", err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("journal: syncing: %w", err)
	}
	return nil
}

// add appends one message.
func (j *Journal) add(m Message) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.failed != nil {
		return j.failed
	}
	j.msgs++
	return j.write(journalRecord{Message: &m})
}

// hold makes results wait until the step's assistant message is written
// ([Journal.release]): a call may finish before its stream has ended.
func (j *Journal) hold() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.holding, j.held = true, nil
}

// result appends a tool result, or holds it while the step streams.
func (j *Journal) result(m Message) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.holding {
		j.held = append(j.held, m)
		return nil
	}
	j.msgs++
	if err := j.write(journalRecord{Message: &m}); err != nil && j.failed == nil {
		j.failed = err
	}
	return j.failed
}

// release writes the step's assistant message a, then the results held;
// a nil a (the step failed) drops them.
func (j *Journal) release(a *Message) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	held := j.held
	j.holding, j.held = false, nil
	if j.failed != nil {
		return j.failed
	}
	if a == nil {
		return nil
	}
	for _, m := range append([]Message{*a}, held...) {
		j.msgs++
		if err := j.write(journalRecord{Message: &m}); err != nil {
			return err
		}
	}
	return nil
}

// replace records a new history.
func (j *Journal) replace(h []Message) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.msgs, j.synced = len(h), len(h)
	if h == nil {
		h = []Message{}
	}
	return j.write(journalRecord{Replace: h})
}

// mark says the runner's history's first n messages are in the journal
// (n < 0: the journal and the history differ, as after a step whose
// params a caller changed).
func (j *Journal) mark(n int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.synced = n
}

// sync brings the journal up to the runner's history h: it appends the
// messages it lacks, or records h whole when they differ.
func (j *Journal) sync(h []Message) error {
	j.mu.Lock()
	synced := j.synced
	j.mu.Unlock()
	if synced < 0 || synced > len(h) {
		return j.replace(h)
	}
	for _, m := range h[synced:] {
		if err := j.add(m); err != nil {
			return err
		}
	}
	j.mark(len(h))
	return nil
}

var _ io.Closer = (*Journal)(nil)

// syncJournal brings the journal up to the history.
func (l *runLoop) syncJournal() error {
	if l.o.Journal == nil {
		return nil
	}
	return l.o.Journal.sync(l.r.History())
}
