package yamlcheck_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/brainrt/brain/internal/yamlcheck"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name, in string
		opts     yamlcheck.Options
		want     string // "" for accepted
	}{
		{"plain", "a: [1, 2]\nb: {c: d}\n", yamlcheck.Options{}, ""},
		{"tag", "grants: 2\ntools: !000 ", yamlcheck.Options{}, "2:8: YAML tags"},
		{"tag even with anchors", "a: !!str x\n", yamlcheck.Options{Anchors: true}, "YAML tags"},
		{"anchor", "a: &x [1]\nb: *x\n", yamlcheck.Options{}, "1:4: YAML anchors and aliases"},
		{"anchor allowed", "a: &x [1]\nb: *x\n", yamlcheck.Options{Anchors: true}, ""},
		{"bang inside a string", "a: \"!x\"\nb: 'it!'\n", yamlcheck.Options{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := yamlcheck.Check([]byte(tt.in), tt.opts)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestDecodeRecovers: a panic inside the decoder becomes an error, and the
// input fuzzing found crashing goccy/go-yaml gives an error, not a crash.
func TestDecodeRecovers(t *testing.T) {
	err := yamlcheck.Decode(func() error { panic("boom") })
	if err == nil || !strings.Contains(err.Error(), "YAML decoder failed on this input: boom") {
		t.Fatalf("err = %v, want the recovered panic", err)
	}
	var v struct {
		Tools []string `yaml:"tools"`
	}
	if err := yamlcheck.Decode(func() error { return yaml.Unmarshal([]byte("tools: !000000000000000000 "), &v) }); err == nil {
		t.Fatal("a tagged empty value decoded into a slice: want an error")
	}
	want := errors.New("plain")
	if err := yamlcheck.Decode(func() error { return want }); err != want {
		t.Fatalf("err = %v, want the decoder's own error unchanged", err)
	}
}

// TestDocuments: a second document is refused at its place; a leading
// "---" and comments pass.
func TestDocuments(t *testing.T) {
	for in, want := range map[string]string{
		"a: 1\n---\na: 2\n": "2:1: a second YAML document",
		"# c\n---\na: 1\n":  "",
		"a: 1.5\n":          "",
		"":                  "",
	} {
		e := yamlcheck.Documents([]byte(in))
		if (e == nil) != (want == "") || (e != nil && !strings.Contains(e.Error(), want)) {
			t.Errorf("%q: %v, want %q", in, e, want)
		}
	}
}
