package registry

import (
	"strings"
	"testing"
)

func TestShortName(t *testing.T) {
	long := strings.Repeat("a", 59)
	got, shortened, ok := ShortName("pets__" + long)
	if len(got) != MaxNameLen || !shortened || !ok || !strings.HasPrefix(got, "pets__aaa") {
		t.Errorf("ShortName(pets__59×a) = %q (%d), %v, %v, want %d chars under pets__, true, true", got, len(got), shortened, ok, MaxNameLen)
	}
	if err := ValidateName(got); err != nil {
		t.Errorf("ShortName gave an invalid name: %v", err)
	}
	// Stable: a constant, so a change of algorithm (which would rename
	// every long tool of every deployment) fails here.
	if want := "pets__aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa_bb6ee832"; got != want {
		t.Errorf("ShortName(pets__59×a) = %q, want %q on every run", got, want)
	}
	if other, _, _ := ShortName("pets__" + long + "b"); other == got {
		t.Errorf("ShortName gives %q for two different long names", got)
	}
	if _, _, ok := ShortName(strings.Repeat("s", 60) + "__" + long); ok {
		t.Errorf("ShortName with a 60-char prefix = ok, want no room to shorten")
	}
	if got, shortened, ok := ShortName("fs__read"); got != "fs__read" || shortened || !ok {
		t.Errorf("ShortName(fs__read) = %q, %v, %v, want it unchanged", got, shortened, ok)
	}
}

func TestUniqueNameClash(t *testing.T) {
	full := "up__" + strings.Repeat("x", 90)
	short, _, _ := ShortName(full)
	// Another tool already holds the short name: the long one is numbered.
	used := map[string]string{short: "up__other"}
	got, note := UniqueName(full, used)
	want, _, _ := ShortName(full + "_2")
	if got != want || got == short {
		t.Errorf("UniqueName = %q, want %q (full name with _2, shortened)", got, want)
	}
	if !strings.Contains(note, "taken by up__other") || !strings.Contains(note, got) {
		t.Errorf("note %q should say the name was taken and what was chosen", note)
	}
	if again, _ := UniqueName(full, used); again != got {
		t.Errorf("UniqueName is not deterministic: %q then %q", got, again)
	}
}
