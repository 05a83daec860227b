package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestRunUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"no args", nil, 2, "Usage: brain <command>"},
		{"help", []string{"help"}, 0, "demo"},
		{"unknown", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"bad flag", []string{"demo", "-nope"}, 2, "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if code := run(context.Background(), tt.args, &out, &out); code != tt.code {
				t.Errorf("exit code %d, want %d; output:\n%s", code, tt.code, out.String())
			}
			if !strings.Contains(out.String(), tt.out) {
				t.Errorf("output does not contain %q:\n%s", tt.out, out.String())
			}
		})
	}
}

// TestDemo runs the README's first command and checks the story it tells.
func TestDemo(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"demo", "-frames"}, &stdout, &stderr); code != 0 {
		t.Fatalf("demo exited %d: %s", code, stderr.String())
	}
	for _, want := range []string{
		`register "evil": a client may only register origin kind "client"`,
		`platform.react {"emoji":"👍"} ⇒ {"ok":true,"value":{"shown":true}}`,
		`"code":"invalid_input"`,
		`files.delete {"path":"build/"} ⇒ {"ok":true,"value":{"deleted":true}}`,
		`"code":"rejected","message":"the user (ada) rejected the call: not the secrets folder"`,
		`"code":"not_found"`,
		`event {"v":2,"seq":1,"msg":{"type":"capability_register"`,
		"seq  4  capability_outcome",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	if stderr.Len() != 0 {
		t.Errorf("demo wrote to stderr: %s", stderr.String())
	}
}
