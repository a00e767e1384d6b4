package mcpfront

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
)

func TestReadLine(t *testing.T) {
	for _, tc := range []struct {
		name, in    string
		limit       int
		want        []string
		wantTooLong []bool
	}{
		{"lines", "ab\ncd\n", 10, []string{"ab", "cd", ""}, []bool{false, false, false}},
		{"no final newline", "ab\ncd", 10, []string{"ab", "cd"}, []bool{false, false}},
		{"too long then fine", strings.Repeat("x", 30) + "\nok\n", 10, []string{"", "ok", ""}, []bool{true, false, false}},
		{"exactly the limit", "0123456789\n", 10, []string{"0123456789", ""}, []bool{false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			br := bufio.NewReaderSize(bytes.NewReader([]byte(tc.in)), 16)
			for i := range tc.want {
				line, tooLong, err := readLine(br, tc.limit)
				if string(line) != tc.want[i] || tooLong != tc.wantTooLong[i] {
					t.Errorf("readLine #%d = %q, %v, %v; want %q, %v", i, line, tooLong, err, tc.want[i], tc.wantTooLong[i])
				}
			}
		})
	}
}
