package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/retry"
)

// maxWebhookBytes caps the body of a webhook's answer: 1 MiB.
const maxWebhookBytes = 1 << 20

// WebhookSpec describes an HTTP endpoint that toolgate asks about calls
// (a configured hook of type webhook).
type WebhookSpec struct {
	// URL is the endpoint: an absolute http or https URL with no
	// placeholders or fragment. Required.
	URL string
	// Secrets are scrubbed from every string of the payload, and from
	// error messages, as from a REST tool's results.
	Secrets []string
}

// Webhook posts JSON to one endpoint through the executor's pooled
// transport, under the host rules of REST tools: the request goes to the
// URL's host only, and a redirect is never followed (it is an answer
// other than 2xx). A Webhook is safe for concurrent use.
type Webhook struct {
	client  *http.Client
	u       *url.URL
	shown   string // the URL as errors show it: no userinfo, query or fragment
	secrets *strings.Replacer
}

// Webhook checks s and returns its webhook. Problems are
// *[registry.FieldError] values for "url" (never quoting the URL, which may
// hold a token), joined with [errors.Join].
func (e *Executor) Webhook(s WebhookSpec) (*Webhook, error) {
	msg := urlProblem(s.URL)
	if msg == "" && strings.ContainsAny(s.URL, "{}") {
		msg = "must not hold placeholders; a webhook's URL is fixed, like http://127.0.0.1:9000/hook"
	}
	if msg != "" {
		return nil, &registry.FieldError{Field: "url", Msg: msg}
	}
	u, err := url.Parse(s.URL)
	if err != nil {
		return nil, &registry.FieldError{Field: "url", Msg: msgNotURL}
	}
	w := &Webhook{
		// The executor's transport, without its redirect rule: a webhook
		// follows none.
		client: &http.Client{Transport: e.client.Transport, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}},
		u:       u,
		secrets: secretReplacer(s.Secrets, u.User),
	}
	c := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	w.shown = w.redact(c.String())
	return w, nil
}

// String returns the webhook's URL as errors and logs show it: without
// userinfo, query or fragment, with secrets replaced.
func (w *Webhook) String() string { return w.shown }

// Post sends payload, a JSON value, with every secret replaced in its
// strings and object keys, and returns the body of a 2xx answer of at
// most 1 MiB. ctx bounds the whole exchange. An error names the URL as
// [Webhook.String] shows it; a failure of the transport wraps its cause
// (context.Canceled, context.DeadlineExceeded, a net.Error).
func (w *Webhook) Post(ctx context.Context, payload json.RawMessage) ([]byte, error) {
	body, err := w.scrub(payload)
	if err != nil {
		return nil, fmt.Errorf("encoding the payload for %s: %w", w.shown, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("posting to %s: %v", w.shown, w.redact(stripURLErr(err).Error()))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "toolgate")
	resp, err := w.client.Do(req)
	if err != nil {
		return nil, w.transportError("posting to", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxWebhookBytes+1))
	switch {
	case err != nil:
		return nil, w.transportError("reading the answer of", err)
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return nil, fmt.Errorf("%s answered HTTP %d", w.shown, resp.StatusCode)
	case len(b) > maxWebhookBytes:
		return nil, fmt.Errorf("the answer of %s is larger than %d bytes", w.shown, maxWebhookBytes)
	}
	return b, nil
}

// scrub returns payload with the webhook's secrets replaced in every
// string and object key.
func (w *Webhook) scrub(payload json.RawMessage) ([]byte, error) {
	if w.secrets == nil {
		return payload, nil
	}
	v, ok := decodeBody(payload)
	if !ok {
		return nil, errors.New("the payload is not one JSON value")
	}
	return json.Marshal(replaceValue(w.secrets, v))
}

// transportError is the error of a transport failure err while doing
// what to the webhook: its text has the secrets replaced (a dial or DNS
// error names the host, which may hold one), and it wraps err's cause
// for errors.Is and errors.As.
func (w *Webhook) transportError(what string, err error) error {
	cause := stripURLErr(err)
	return &retry.Error{Class: transportClass(err), Msg: w.redact(fmt.Sprintf("%s %s: %v", what, w.shown, cause)), Err: cause}
}

func (w *Webhook) redact(s string) string {
	if w.secrets == nil {
		return s
	}
	return w.secrets.Replace(s)
}
