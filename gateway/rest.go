package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/executors/rest"
	"github.com/toolgate/toolgate/registry"
)

const (
	specFetchTimeout = 30 * time.Second
	maxSpecBytes     = 16 << 20
)

// addRESTTools compiles the config's rest and openapi sections into REST
// tools and registers them in one batch. Every problem is reported.
func (g *Gateway) addRESTTools(cfg *config.Config) error {
	secrets := restSecrets(cfg.Secrets())
	var specs []rest.Spec
	var errs []error
	for _, t := range cfg.Rest {
		specs = append(specs, rest.Spec{
			Name:             t.Name,
			Description:      t.Description,
			Source:           "rest:" + t.Name,
			Method:           t.Method,
			URL:              t.URL,
			Query:            t.Query,
			Headers:          t.Headers,
			Body:             t.Body,
			InputSchema:      t.InputSchema,
			Idempotent:       t.Idempotent,
			Timeout:          t.Timeout.D(),
			Retry:            retrySpec(cfg, t.Retry),
			MaxResponseBytes: t.MaxResponseBytes,
			AllowedHosts:     t.AllowedHosts,
			Secrets:          secrets,
		})
	}
	for _, o := range cfg.OpenAPI {
		doc, err := g.readSpec(o.Spec)
		if err != nil {
			errs = append(errs, fmt.Errorf("openapi source %q: %w", o.Name, err))
			continue
		}
		got, warnings, err := rest.FromOpenAPI(rest.OpenAPISource{
			Name:             o.Name,
			Spec:             doc,
			Location:         o.Spec,
			BaseURL:          o.BaseURL,
			Include:          o.Include,
			Exclude:          o.Exclude,
			Headers:          o.Headers,
			Timeout:          o.Timeout.D(),
			Retry:            retrySpec(cfg, o.Retry),
			MaxResponseBytes: o.MaxResponseBytes,
			Secrets:          secrets,
		})
		for _, w := range warnings {
			g.logger.Warn("openapi operation skipped", "source", o.Name, "operation", w.Operation, "reason", w.Msg)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("openapi source %q: %w", o.Name, err))
			continue
		}
		specs = append(specs, got...)
	}
	tools := make([]registry.Tool, 0, len(specs))
	for _, s := range specs {
		t, err := g.rest.Add(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("rest tool %q: %w", s.Name, err))
			continue
		}
		tools = append(tools, t)
		backend := restBackend(s.URL)
		g.res.restHost[s.Source] = backend
		g.metrics.circuitState(backend, g.res.backends.Get(backend).State())
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if len(tools) == 0 {
		return nil
	}
	return g.reg.Add(tools...)
}

// minSecretLen is the shortest value from the environment that REST tools
// scrub from results. Shorter ones ("1000", "debug") are settings, and
// replacing every occurrence of them would corrupt results.
const minSecretLen = 6

func restSecrets(all []string) []string {
	var out []string
	for _, s := range all {
		if len(s) >= minSecretLen {
			out = append(out, s)
		}
	}
	return out
}

func retrySpec(cfg *config.Config, r *config.Retry) rest.RetrySpec {
	d := cfg.Defaults.Retry
	if r != nil {
		d = *r
	}
	p := policyOf(d)
	return rest.RetrySpec{Attempts: p.Attempts, InitialBackoff: p.InitialBackoff, MaxBackoff: p.MaxBackoff, On: p.On}
}

// readSpec reads an OpenAPI document from a file or an http(s) URL.
func (g *Gateway) readSpec(location string) ([]byte, error) {
	if !strings.HasPrefix(location, "http://") && !strings.HasPrefix(location, "https://") {
		f, err := os.Open(location)
		if err != nil {
			return nil, fmt.Errorf("reading the spec: %w", err)
		}
		defer f.Close()
		return readCapped(f)
	}
	ctx, cancel := context.WithTimeout(g.root, specFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, location, nil)
	if err != nil {
		return nil, fmt.Errorf("fetching the spec: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		// *url.Error repeats the URL, which may carry a token.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return nil, fmt.Errorf("fetching the spec from %s: %w", req.URL.Host, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching the spec: HTTP %s", strconv.Itoa(resp.StatusCode))
	}
	return readCapped(resp.Body)
}

func readCapped(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxSpecBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the spec: %w", err)
	}
	if len(b) > maxSpecBytes {
		return nil, fmt.Errorf("the spec is larger than %d bytes", maxSpecBytes)
	}
	return b, nil
}
