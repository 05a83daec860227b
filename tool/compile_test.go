package tool_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestUndeclaredDoesNotCompile runs the compiler on three fixtures: a tool
// using an undeclared handle and one using an undeclared binding must fail
// to build with a message that points at the field; the declared version
// must build.
func TestUndeclaredDoesNotCompile(t *testing.T) {
	tests := []struct {
		dir     string
		wantErr []string
	}{
		{"declared", nil},
		{"undeclared_handle", []string{"main.go:16:", "ctx.Handles.Exec undefined", "has no field or method Exec"}},
		{"undeclared_binding", []string{"main.go:15:", "ctx.Bindings.Token undefined", "has no field or method Token"}},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			cmd := exec.Command("go", "build", "-o", t.TempDir()+"/out", "./testdata/compile/"+tt.dir)
			out, err := cmd.CombinedOutput()
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("the declared tool does not build: %v\n%s", err, out)
				}
				return
			}
			if err == nil {
				t.Fatalf("the tool using an undeclared field built")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(string(out), w) {
					t.Errorf("compiler output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
