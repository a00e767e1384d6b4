package openapi

import (
	"encoding/base64"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// applyAuth adds to d's headers and query the credentials of the first
// of op's security requirements (or the document's) that src.Auth
// satisfies, and returns the Spec's secrets: src.Secrets plus every
// credential, in each form it is sent in.
func (b *oapiBuilder) applyAuth(op *openapi3.Operation, d *oapiDraft) []string {
	secrets := slices.Clone(b.src.Secrets)
	for _, k := range slices.Sorted(maps.Keys(b.src.Auth)) {
		secrets = append(secrets, b.src.Auth[k])
	}
	reqs := b.doc.Security
	if op.Security != nil {
		reqs = *op.Security
	}
	if len(reqs) == 0 || len(b.src.Auth) == 0 {
		return secrets
	}
	for _, req := range reqs {
		if len(req) == 0 {
			return secrets // security is optional; no credentials are sent
		}
		if !b.satisfies(req) {
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(req)) {
			secrets = d.credential(b.usableScheme(name), b.src.Auth[name], secrets)
		}
		return secrets
	}
	var names []string
	for _, req := range reqs {
		names = append(names, slices.Sorted(maps.Keys(req))...)
	}
	slices.Sort(names)
	d.sc.note(fmt.Sprintf("no credentials sent: the operation needs %s, and auth has none of them (or only a scheme type toolgate cannot send)",
		strings.Join(slices.Compact(names), " or ")))
	return secrets
}

// satisfies reports whether src.Auth can send every scheme of req.
func (b *oapiBuilder) satisfies(req openapi3.SecurityRequirement) bool {
	for name := range req {
		if b.usableScheme(name) == nil {
			return false
		}
	}
	return true
}

// usableScheme returns the document's security scheme called name when
// src.Auth has its credential and toolgate can send it, else nil.
func (b *oapiBuilder) usableScheme(name string) *openapi3.SecurityScheme {
	var schemes openapi3.SecuritySchemes
	if b.doc.Components != nil {
		schemes = b.doc.Components.SecuritySchemes
	}
	ref := schemes[name]
	if ref == nil || ref.Value == nil || b.src.Auth[name] == "" {
		return nil
	}
	v := ref.Value
	switch {
	case v.Type == "apiKey" && (v.In == "header" || v.In == "query" || v.In == "cookie") && v.Name != "":
	case v.Type == "http" && (strings.EqualFold(v.Scheme, "bearer") || strings.EqualFold(v.Scheme, "basic")):
	case v.Type == "oauth2" || v.Type == "openIdConnect":
	default:
		return nil
	}
	return v
}

// credential adds cred to d as scheme v sends it, and returns secrets
// with the forms of cred that are not literal in the request added.
func (d *oapiDraft) credential(v *openapi3.SecurityScheme, cred string, secrets []string) []string {
	lit := oapiBraces.Replace(cred)
	switch {
	case v.Type == "apiKey" && v.In == "header":
		d.setHeader(v.Name, lit)
	case v.Type == "apiKey" && v.In == "query":
		d.query[v.Name] = lit
		secrets = append(secrets, url.QueryEscape(cred), strings.ReplaceAll(url.QueryEscape(cred), "+", "%20"))
	case v.Type == "apiKey" && v.In == "cookie":
		c := v.Name + "=" + lit
		for k, old := range d.headers {
			if strings.EqualFold(k, "Cookie") {
				c = old + "; " + c
			}
		}
		d.setHeader("Cookie", c)
	case v.Type == "http" && strings.EqualFold(v.Scheme, "basic"):
		enc := base64.StdEncoding.EncodeToString([]byte(cred))
		d.setHeader("Authorization", "Basic "+enc)
		secrets = append(secrets, enc)
	default: // bearer, oauth2, openIdConnect: a token
		d.setHeader("Authorization", "Bearer "+lit)
	}
	return secrets
}
