package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// HookType selects what a [Hook] does.
type HookType string

// The hook types.
const (
	// HookRedact replaces every match of Patterns in a result's text and
	// structured content with [redacted].
	HookRedact HookType = "redact"
	// HookTruncate caps a result's text at MaxBytes, with a notice of the
	// true size.
	HookTruncate HookType = "truncate"
	// HookDenyArgs refuses a call whose arguments match one of Rules; the
	// rule's reason is the result, of class permission.
	HookDenyArgs HookType = "deny_args"
	// HookWebhook asks an HTTP endpoint about the call, before it runs,
	// after, or both.
	HookWebhook HookType = "webhook"
)

// hookTypes lists the valid [HookType] values, for error messages.
var hookTypes = []HookType{HookRedact, HookTruncate, HookDenyArgs, HookWebhook}

// HookPhase says when a webhook is asked.
type HookPhase string

// The webhook phases.
const (
	PhaseBefore HookPhase = "before"
	PhaseAfter  HookPhase = "after"
	PhaseBoth   HookPhase = "both"
)

// HookOnError says what happens to a call when its webhook fails (times
// out, answers with a status other than 2xx, or with JSON that is not an
// answer).
type HookOnError string

// The webhook failure policies.
const (
	// OnErrorAllow lets the call go on as if the webhook had allowed it.
	OnErrorAllow HookOnError = "allow"
	// OnErrorDeny answers the call with a permission error saying the
	// webhook failed.
	OnErrorDeny HookOnError = "deny"
)

// Defaults and limits of the hooks section.
const (
	defaultHookTimeout = 2 * time.Second
	maxHookTimeout     = time.Minute
	maxTruncateBytes   = 1 << 30
)

// Hook is one configured hook. Hooks run in the order written, each on the
// calls it matches: every tool when Tools is empty, else a tool whose
// registered name matches one of its globs; every principal when
// Principals is empty, else only calls made by one of them. The gateway
// builds them; config checks the shape, and the owner of each rule
// (regular expressions, JSON pointers, globs, the URL) checks the rest.
//
// Fields that do not apply to the Type are errors when set.
type Hook struct {
	// Type is redact, truncate, deny_args or webhook. Required.
	Type HookType `yaml:"type"`
	// Tools lists globs ([path.Match] syntax) of the registered tool names
	// the hook applies to. Default none: every tool.
	Tools []string `yaml:"tools"`
	// Principals lists the principals the hook applies to. Default none:
	// every call. While no authentication is configured calls have no
	// principal, so a hook that lists principals matches no call.
	Principals []string `yaml:"principals"`
	// Patterns are the regular expressions (Go RE2 syntax) a redact hook
	// replaces. Required for redact.
	Patterns []string `yaml:"patterns"`
	// MaxBytes caps a truncate hook's result text, from 1 to 1073741824.
	// Required for truncate.
	MaxBytes int `yaml:"max_bytes"`
	// Rules are a deny_args hook's rules; a call is refused by the first
	// that matches. Required for deny_args.
	Rules []DenyRule `yaml:"rules"`
	// URL is a webhook's endpoint, an absolute http or https URL. The
	// request goes to its host only and never follows a redirect.
	// Required for webhook.
	URL string `yaml:"url"`
	// Phase says when a webhook is asked: before the call runs, after, or
	// both. Default before.
	Phase HookPhase `yaml:"phase"`
	// Timeout bounds one request to a webhook, from 1ms to 1m. Default 2s.
	Timeout Duration `yaml:"timeout"`
	// OnError is allow or deny: what happens to the call when the webhook
	// fails. Default deny.
	OnError HookOnError `yaml:"on_error"`
}

// DenyRule refuses a call when the argument Pointer names exists and
// matches Pattern.
type DenyRule struct {
	// Pointer is a JSON pointer (RFC 6901) into the arguments, like /path
	// or /files/0; empty means the whole arguments object.
	Pointer string `yaml:"pointer"`
	// Pattern is a regular expression (Go RE2 syntax) matched against the
	// argument: a string as it is, any other value as its JSON. Required.
	Pattern string `yaml:"pattern"`
	// Reason is the result the model gets, so it should say what to do
	// instead. Required.
	Reason string `yaml:"reason"`
}

// completeHooks fills in, between decoding and validation, what the file
// left out of its webhooks: phase before, timeout 2s, on_error deny.
// present reports whether the file gave a key path a value.
func completeHooks(cfg *Config, present func(path string) bool) {
	for i := range cfg.Hooks {
		h := &cfg.Hooks[i]
		if h.Type != HookWebhook {
			continue
		}
		p := fmt.Sprintf("hooks[%d]", i)
		if h.Phase == "" {
			h.Phase = PhaseBefore
		}
		if !present(p + ".timeout") {
			h.Timeout = Duration(defaultHookTimeout)
		}
		if h.OnError == "" {
			h.OnError = OnErrorDeny
		}
	}
}

// hooks checks what config owns of the hooks section: the type, which
// selects the fields that apply, the enums and the ranges. Globs, regular
// expressions, JSON pointers and the URL are checked by the gateway when
// it builds the hooks; see [Config.Locate]. One pass over the hooks with a
// case per hook type, as the reference lists them: kept whole on purpose.
func (c *checker) hooks(cfg *Config) {
	names := make([]string, len(hookTypes))
	for i, t := range hookTypes {
		names[i] = string(t)
	}
	valid := strings.Join(names, ", ")
	for i, h := range cfg.Hooks {
		p := fmt.Sprintf("hooks[%d]", i)
		if c.broken[p] {
			continue
		}
		for j, s := range h.Tools {
			if s == "" {
				c.fail(fmt.Sprintf("%s.tools[%d]", p, j), "", "is empty; write a tool name or a glob, like fs__*")
			}
		}
		for j, s := range h.Principals {
			if s == "" {
				c.fail(fmt.Sprintf("%s.principals[%d]", p, j), "", "is empty; write a principal's name")
			}
		}
		// set lists the type-specific fields the hook writes, for the
		// check that they apply.
		set := map[string]bool{
			"patterns":  len(h.Patterns) > 0,
			"max_bytes": h.MaxBytes != 0,
			"rules":     len(h.Rules) > 0,
			"url":       h.URL != "",
			"phase":     h.Phase != "",
			"timeout":   h.Timeout != 0,
			"on_error":  h.OnError != "",
		}
		var own []string // the fields that apply to the type
		switch h.Type {
		case HookRedact:
			own = []string{"patterns"}
			if len(h.Patterns) == 0 {
				c.fail(p+".patterns", "", `is required for a redact hook; list regular expressions, like ["ghp_[A-Za-z0-9]{36}"]`)
			}
			for j, s := range h.Patterns {
				if s == "" {
					c.fail(fmt.Sprintf("%s.patterns[%d]", p, j), "", "is empty; write a regular expression")
				}
			}
		case HookTruncate:
			own = []string{"max_bytes"}
			if h.MaxBytes < 1 || h.MaxBytes > maxTruncateBytes {
				c.fail(p+".max_bytes", strconv.Itoa(h.MaxBytes), "must be between 1 and %d, like 20000", maxTruncateBytes)
			}
		case HookDenyArgs:
			own = []string{"rules"}
			if len(h.Rules) == 0 {
				c.fail(p+".rules", "", `is required for a deny_args hook; write rules like [{pointer: /path, pattern: "^/etc/", reason: "system files are off limits"}]`)
			}
			for j, r := range h.Rules {
				rp := fmt.Sprintf("%s.rules[%d]", p, j)
				if r.Pattern == "" {
					c.fail(rp+".pattern", "", "is required; write a regular expression, like ^/etc/")
				}
				if r.Reason == "" {
					c.fail(rp+".reason", "", "is required; say why the call is refused and what to do instead")
				}
			}
		case HookWebhook:
			own = []string{"url", "phase", "timeout", "on_error"}
			if h.URL == "" {
				c.fail(p+".url", "", "is required for a webhook hook; write an http or https URL, like http://127.0.0.1:9000/hook")
			}
			switch h.Phase {
			case PhaseBefore, PhaseAfter, PhaseBoth:
			default:
				c.fail(p+".phase", quoteShort(string(h.Phase)), "must be one of before, after, both")
			}
			if d := h.Timeout.D(); d < time.Millisecond || d > maxHookTimeout {
				c.fail(p+".timeout", h.Timeout.String(), "must be from 1ms to 1m, like 2s; leave it out for 2s")
			}
			switch h.OnError {
			case OnErrorAllow, OnErrorDeny:
			default:
				c.fail(p+".on_error", quoteShort(string(h.OnError)), "must be allow or deny")
			}
		case "":
			c.fail(p+".type", "", "is required; write one of %s", valid)
			continue
		default:
			c.fail(p+".type", quoteShort(string(h.Type)), "must be one of %s", valid)
			continue
		}
		for _, f := range []string{"patterns", "max_bytes", "rules", "url", "phase", "timeout", "on_error"} {
			if set[f] && !slices.Contains(own, f) {
				c.fail(p+"."+f, "", "does not apply to a %s hook; remove it", h.Type)
			}
		}
	}
}
