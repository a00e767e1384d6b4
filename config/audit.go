package config

import (
	"path/filepath"
	"strconv"
)

// Defaults of the audit section.
const (
	defaultAuditMaxSizeMB  = 100
	defaultAuditMaxBackups = 10
)

// AuditStdout is the audit.file value that writes the trail to standard
// output, for a container whose log collector ships it.
const AuditStdout = "stdout"

// Audit writes every tool call as one JSON line (docs/audit.md): who
// called which tool, in which session and thread (hashed), how it ended,
// and a SHA-256 of its arguments, never their values. Default none: no
// audit trail.
type Audit struct {
	// File is where the lines go: a path, relative to the configuration
	// file's directory unless absolute, or stdout. Required.
	File string `yaml:"file"`
	// MaxSizeMB is the size, in megabytes, at which the file is rotated:
	// renamed with its time and a new one started. Default 100.
	MaxSizeMB int `yaml:"max_size_mb"`
	// MaxBackups is how many rotated files are kept; older ones are
	// removed. 0 keeps them all. Default 10.
	MaxBackups int `yaml:"max_backups"`
}

// completeAudit defaults the audit section's sizes and resolves a
// relative file against the configuration file's directory.
func completeAudit(cfg *Config, file string, present func(path string) bool) {
	a := cfg.Audit
	if a == nil {
		return
	}
	if !present("audit.max_size_mb") {
		a.MaxSizeMB = defaultAuditMaxSizeMB
	}
	if !present("audit.max_backups") {
		a.MaxBackups = defaultAuditMaxBackups
	}
	if a.File != "" && a.File != AuditStdout && !filepath.IsAbs(a.File) && file != EmbeddedSource {
		a.File = filepath.Join(filepath.Dir(file), a.File)
	}
}

// audit checks the audit section.
func (c *checker) audit(cfg *Config) {
	a := cfg.Audit
	if a == nil || c.broken["audit"] {
		return
	}
	if a.File == "" {
		c.fail("audit.file", "", "is required: a file path (relative to this configuration file) or stdout")
	}
	if a.MaxSizeMB < 1 {
		c.fail("audit.max_size_mb", strconv.Itoa(a.MaxSizeMB), "must be at least 1 (megabytes)")
	}
	if a.MaxBackups < 0 {
		c.fail("audit.max_backups", strconv.Itoa(a.MaxBackups), "must be 0 (keep every rotated file) or more")
	}
}
