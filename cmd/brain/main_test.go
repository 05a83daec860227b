package main

import (
	"bytes"
	"context"
	"fmt"
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
		{"help run", []string{"help", "run"}, 0, "Usage: brain run ARTIFACT"},
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

// TestDemoFramesInOrder: with -frames every event is printed once, in seq
// order, where it happened: a call's frames come before the line with its
// result, and each step's frames before the next step.
func TestDemoFramesInOrder(t *testing.T) {
	for i := range 5 { // the race it guards against was timing-dependent
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"demo", "-frames"}, &stdout, &stderr); code != 0 {
			t.Fatalf("demo exited %d: %s", code, stderr.String())
		}
		lines := strings.Split(stdout.String(), "\n")
		seq := 0
		pos := map[string]int{}
		for n, l := range lines {
			if rest, ok := strings.CutPrefix(l, `    event {"v":2,"seq":`); ok {
				var got int
				if _, err := fmt.Sscanf(rest, "%d", &got); err != nil || got != seq+1 {
					t.Fatalf("run %d line %d: seq %d after %d:\n%s", i, n, got, seq, stdout.String())
				}
				seq = got
				pos[fmt.Sprint("seq", got)] = n
			}
			for _, mark := range []string{"2. ", "3. ", `   llm → platform.react {"emoji":"👍"}`, `   llm → files.delete {"path":"secrets/"}`, "6. "} {
				if strings.HasPrefix(l, mark) {
					pos[mark] = n
				}
			}
		}
		if seq != 13 {
			t.Fatalf("run %d: %d frames, want 13", i, seq)
		}
		for _, order := range [][2]string{
			{"seq1", "2. "}, {"seq2", "3. "},
			{"seq4", `   llm → platform.react {"emoji":"👍"}`},
			{"seq11", `   llm → files.delete {"path":"secrets/"}`},
			{"seq13", "6. "},
		} {
			if pos[order[0]] >= pos[order[1]] {
				t.Errorf("run %d: %s printed after %q:\n%s", i, order[0], order[1], stdout.String())
			}
		}
	}
}
