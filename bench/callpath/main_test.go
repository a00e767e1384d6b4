package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// TestRanInWindows: a function counts when its counters grew between
// sent and entry in every call; one that grew in some calls only (a
// background goroutine) or in none does not, nor one in a skipped package.
func TestRanInWindows(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "p", "p.go"), "package p\n\nfunc Every() {\n}\n\nfunc Some() {\n}\n\nfunc Never() {\n}\n")
	write(t, filepath.Join(root, "executors", "x", "x.go"), "package x\n\nfunc Exec() {\n}\n")
	profile := func(every, some, never, exec int) string {
		return "mode: atomic\n" +
			line("p/p.go:3.15,4.2", every) + line("p/p.go:6.14,7.2", some) +
			line("p/p.go:9.15,10.2", never) + line("executors/x/x.go:3.14,4.2", exec)
	}
	dir := t.TempDir()
	write(t, filepath.Join(dir, "call-001", "sent.txt"), profile(1, 0, 3, 1))
	write(t, filepath.Join(dir, "call-001", "entry.txt"), profile(2, 1, 3, 2))
	write(t, filepath.Join(dir, "call-002", "sent.txt"), profile(2, 1, 3, 2))
	write(t, filepath.Join(dir, "call-002", "entry.txt"), profile(4, 1, 3, 3))
	every, some, calls, err := ranInWindows(root, dir, []string{"executors/"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"p Every"}; !slices.Equal(every, want) || some != 2 || calls != 2 {
		t.Errorf("ranInWindows = %q, %d in some, %d calls; want %q, 2, 2", every, some, calls, want)
	}
	if _, _, _, err := ranInWindows(root, t.TempDir(), nil); err == nil {
		t.Error("ranInWindows of an empty directory: no error")
	}
}

func line(block string, count int) string {
	return "github.com/toolgate/toolgate/" + block + " 1 " + strconv.Itoa(count) + "\n"
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
