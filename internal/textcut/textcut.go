// Package textcut cuts text to a size in bytes without splitting a
// character: what a log line, an event, an error message or a summary
// shows of a value it cannot show whole.
package textcut

import "unicode/utf8"

// Prefix returns the longest prefix of s that is at most n bytes long
// and does not end inside a UTF-8 sequence (s itself when it fits; ""
// for n <= 0).
func Prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
