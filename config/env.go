package config

import (
	"fmt"
	"regexp"
	"strings"
)

// InstanceDirVar names the variable the upstream executor sets for each
// process of a stdio upstream: a private directory of that process's own,
// removed when it ends. In upstreams[].args and upstreams[].env values,
// ${TOOLGATE_INSTANCE_DIR} is not expanded when the file loads but kept as
// [InstanceDirRef], which the executor replaces with the directory when it
// starts a process; that is how each process of an isolation: thread
// upstream gets files of its own (for example MEMORY_FILE_PATH:
// ${TOOLGATE_INSTANCE_DIR}/memory.jsonl). Anywhere else it is an error.
//
// InstanceDirRef is a marker no loaded value can otherwise hold (it is
// framed by NUL bytes, which config refuses in args and env), so that
// $${TOOLGATE_INSTANCE_DIR}, or a variable whose value is that text, stays
// literal.
const (
	InstanceDirVar = "TOOLGATE_INSTANCE_DIR"
	InstanceDirRef = "\x00" + InstanceDirVar + "\x00"
)

// runtimePath matches the key paths where ${TOOLGATE_INSTANCE_DIR} is kept.
var runtimePath = regexp.MustCompile(`^upstreams\[\d+\]\.(args\[\d+\]|env\..+)$`)

// expand replaces ${NAME} and ${NAME:-default} in s with values from lookup
// and turns $$ into a literal $. ${NAME:-default} uses default when NAME is
// unset or empty; ${NAME} with NAME set to "" gives "". The default is taken
// literally up to the first "}" and cannot nest another ${...}.
//
// fromEnv reports whether s held at least one ${...}: such a value must never
// be shown in an error, because it may be a secret. The error's text quotes
// only what the file says (variable names, never their values).
func expand(s string, lookup func(string) (string, bool)) (out string, fromEnv bool, err error) {
	if !strings.Contains(s, "$") {
		return s, false, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		if c != '$' {
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 < len(s) && s[i+1] == '$' {
			b.WriteByte('$')
			i += 2
			continue
		}
		if i+1 >= len(s) || s[i+1] != '{' {
			return "", false, fmt.Errorf(`a "$" must start ${NAME} or ${NAME:-default}; write $$ for a literal $`)
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			return "", false, fmt.Errorf(`unterminated "${"; close it with "}", like ${NAME}`)
		}
		ref := s[i+2 : i+2+end]
		name, def, hasDef := strings.Cut(ref, ":-")
		if !validEnvName(name) {
			return "", false, fmt.Errorf("invalid variable reference ${%s}; write ${NAME} or ${NAME:-default}, where NAME is letters, digits and _", ref)
		}
		if strings.Contains(def, "${") {
			return "", false, fmt.Errorf("${%s}: a default cannot contain another ${...}", name)
		}
		v, ok := lookup(name)
		switch {
		case hasDef && v == "":
			v = def
		case !ok && name == InstanceDirVar:
			return "", false, fmt.Errorf("${%s} is set only for the processes of stdio upstreams; use it in upstreams[].args or upstreams[].env", name)
		case !ok:
			return "", false, fmt.Errorf("environment variable %s is not set; set it or write ${%s:-value}", name, name)
		}
		b.WriteString(v)
		fromEnv = true
		i += 2 + end + 1
	}
	return b.String(), fromEnv, nil
}

// validEnvName reports whether name is a portable environment variable name:
// a letter or _, then letters, digits or _.
func validEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i, r := range name {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
