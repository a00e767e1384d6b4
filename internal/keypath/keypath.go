// Package keypath writes the key paths by which toolgate names a place in
// its configuration file ("server.listen", "rest[0].headers.X-Key",
// `headers."Bad Header"`). config writes them where it positions values and
// registry where owners of a rule name the field they refuse, and the two
// must agree for a problem to land at its file:line:col, so the syntax is
// written once, here. It imports only the standard library.
package keypath

import "strconv"

// Child appends key to path. A key that is not a plain word (letters,
// digits, _ and -) is quoted, so that a path always fits on one line.
func Child(path, key string) string {
	if !plain(key) {
		key = strconv.Quote(key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func plain(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if r != '_' && r != '-' && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}
