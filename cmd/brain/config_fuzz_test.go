package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzServeConfig: any bytes as a serve config either load or give an
// error naming the file; nothing panics, hangs or allocates without bound.
// The seeds are the shipped example configs and the corpus in
// testdata/fuzz/FuzzServeConfig.
func FuzzServeConfig(f *testing.F) {
	seeds, _ := filepath.Glob("../../examples/*.yaml")
	for _, p := range seeds {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n"))
	f.Add([]byte("policy:\n  - match: \"fs.*\"\n    requiresApproval: true\n"))
	f.Add([]byte("limits: {frames_per_second: -5}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "brain.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := loadServeConfig(path, t.TempDir())
		if err != nil {
			if !strings.Contains(err.Error(), "brain.yaml") && !strings.Contains(err.Error(), "$.") {
				t.Fatalf("error does not say where: %v", err)
			}
			return
		}
		if c == nil {
			t.Fatal("no config and no error")
		}
	})
}

// TestServeConfigRefusesAliasesAndHugeFiles: the decoding bounds.
func TestServeConfigRefusesAliasesAndHugeFiles(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"alias bomb", "a: &a [x, x]\nb: &b [*a, *a]\n", "anchors and aliases are not allowed"},
		{"huge", "tools: []\n" + strings.Repeat("# padding\n", maxConfigBytes/10+1), "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "brain.yaml")
			if err := os.WriteFile(path, []byte(tt.body), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := loadServeConfig(path, t.TempDir())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one saying %q", err, tt.want)
			}
		})
	}
}
