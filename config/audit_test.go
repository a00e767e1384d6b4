package config

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseAudit(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "toolgate.yaml")
	for _, tc := range []struct {
		name string
		in   []byte
		want *Audit
	}{
		{"none", yamlLines("builtin: [calc]"), nil},
		{"relative file, defaults", yamlLines("audit:", "  file: audit/calls.jsonl"),
			&Audit{File: filepath.Join(dir, "audit/calls.jsonl"), MaxSizeMB: 100, MaxBackups: 10}},
		{"absolute file, sizes", yamlLines("audit:", "  file: /var/log/toolgate/audit.jsonl", "  max_size_mb: 5", "  max_backups: 0"),
			&Audit{File: "/var/log/toolgate/audit.jsonl", MaxSizeMB: 5, MaxBackups: 0}},
		{"stdout", yamlLines("audit: {file: stdout}"), &Audit{File: AuditStdout, MaxSizeMB: 100, MaxBackups: 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse(name, tc.in, nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, cfg.Audit); diff != "" {
				t.Errorf("audit (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseAuditErrors(t *testing.T) {
	_, err := Parse("t.yaml", yamlLines(
		"audit:",
		"  max_size_mb: 0",
		"  max_backups: -1",
		"  rotate: daily",
	), nil)
	want := []string{
		"t.yaml:1:1: audit.file: is required: a file path (relative to this configuration file) or stdout",
		"t.yaml:2:16: audit.max_size_mb: must be at least 1 (megabytes); got 0",
		"t.yaml:3:16: audit.max_backups: must be 0 (keep every rotated file) or more; got -1",
		"t.yaml:4:3: audit.rotate: unknown key; valid keys: file, max_size_mb, max_backups",
	}
	if diff := cmp.Diff(want, errLines(t, err)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}
