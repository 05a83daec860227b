//go:build linux

package proc_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/brainrt/brain/provide/proc"
)

func intp(i int) *int { return &i }

func TestGrantsValidate(t *testing.T) {
	ok := proc.Grants{Root: "/srv", Allow: []string{"echo"}}
	with := func(f func(*proc.Grants)) proc.Grants {
		g := ok
		f(&g)
		return g
	}
	tests := []struct {
		name  string
		g     proc.Grants
		field string // "" means valid
	}{
		{"minimal", ok, ""},
		{"everything", proc.Grants{
			Root: "/srv", Allow: []string{"echo", "/usr/bin/env"}, Path: []string{"/usr/bin"},
			Env: map[string]string{"LANG": "C.UTF-8"}, AllowEnv: []string{"GOFLAGS"},
			Timeout: time.Minute, MaxOutputBytes: 4096, MaxProcesses: 8,
			Landlock: proc.LandlockRequired, Network: true, User: intp(1000),
		}, ""},
		{"root missing", with(func(g *proc.Grants) { g.Root = "" }), "root"},
		{"root relative", with(func(g *proc.Grants) { g.Root = "srv" }), "root"},
		{"allow empty", with(func(g *proc.Grants) { g.Allow = nil }), "allow"},
		{"allow empty name", with(func(g *proc.Grants) { g.Allow = []string{"echo", ""} }), "allow[1]"},
		{"allow relative path", with(func(g *proc.Grants) { g.Allow = []string{"bin/echo"} }), "allow[0]"},
		{"allow dot slash", with(func(g *proc.Grants) { g.Allow = []string{"./echo"} }), "allow[0]"},
		{"allow unclean path", with(func(g *proc.Grants) { g.Allow = []string{"/usr/../usr/bin/echo"} }), "allow[0]"},
		{"allow dotdot", with(func(g *proc.Grants) { g.Allow = []string{".."} }), "allow[0]"},
		{"path relative", with(func(g *proc.Grants) { g.Path = []string{"/usr/bin", "bin"} }), "path[1]"},
		{"env LD_PRELOAD", with(func(g *proc.Grants) { g.Env = map[string]string{"LD_PRELOAD": "/x.so"} }), "env.LD_PRELOAD"},
		{"env name with =", with(func(g *proc.Grants) { g.Env = map[string]string{"A=B": "c"} }), "env.A=B"},
		{"env value NUL", with(func(g *proc.Grants) { g.Env = map[string]string{"A": "b\x00c"} }), "env.A"},
		// Several: the first in sorted order, every time (map order is random).
		{"env several bad", with(func(g *proc.Grants) {
			g.Env = map[string]string{"Z=Z": "z", "LD_PRELOAD": "/x.so", "M=M": "m", "GCONV_PATH": "/g"}
		}), "env.GCONV_PATH"},
		{"allow_env LD_PRELOAD", with(func(g *proc.Grants) { g.AllowEnv = []string{"HOME", "LD_PRELOAD"} }), "allow_env[1]"},
		{"allow_env LD_LIBRARY_PATH", with(func(g *proc.Grants) { g.AllowEnv = []string{"LD_LIBRARY_PATH"} }), "allow_env[0]"},
		{"allow_env GLIBC_TUNABLES", with(func(g *proc.Grants) { g.AllowEnv = []string{"GLIBC_TUNABLES"} }), "allow_env[0]"},
		{"allow_env GCONV_PATH", with(func(g *proc.Grants) { g.AllowEnv = []string{"GCONV_PATH"} }), "allow_env[0]"},
		{"allow_env empty", with(func(g *proc.Grants) { g.AllowEnv = []string{""} }), "allow_env[0]"},
		{"timeout negative", with(func(g *proc.Grants) { g.Timeout = -time.Second }), "timeout"},
		{"max_output_bytes negative", with(func(g *proc.Grants) { g.MaxOutputBytes = -1 }), "max_output_bytes"},
		{"max_processes negative", with(func(g *proc.Grants) { g.MaxProcesses = -1 }), "max_processes"},
		{"max_processes zero is default", with(func(g *proc.Grants) { g.MaxProcesses = 0 }), ""},
		{"landlock unknown", with(func(g *proc.Grants) { g.Landlock = "on" }), "landlock"},
		{"landlock off", with(func(g *proc.Grants) { g.Landlock = proc.LandlockOff }), ""},
		{"landlock best-effort", with(func(g *proc.Grants) { g.Landlock = proc.LandlockBestEffort }), ""},
		{"user root", with(func(g *proc.Grants) { g.User = intp(0) }), "user"},
		{"user negative", with(func(g *proc.Grants) { g.User = intp(-5) }), "user"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.g.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			wantField(t, err, tt.field)
		})
	}
}

func TestNewRejects(t *testing.T) {
	root := newRoot(t)
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tool := filepath.Join(root, "bin", "tool")
	if err := os.MkdirAll(filepath.Dir(tool), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tool, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		g     proc.Grants
		field string
	}{
		{"invalid grants", proc.Grants{Root: root}, "allow"},
		{"root does not exist", proc.Grants{Root: filepath.Join(root, "nope"), Allow: []string{"echo"}}, "root"},
		{"root is a file", proc.Grants{Root: file, Allow: []string{"echo"}}, "root"},
		{"name not in path", proc.Grants{Root: root, Allow: []string{"echo", "no-such-program-brain"}}, "allow[1]"},
		{"name outside the given path", proc.Grants{Root: root, Allow: []string{"echo"}, Path: []string{root}}, "allow[0]"},
		{"absolute path missing", proc.Grants{Root: root, Allow: []string{"/nonexistent/bin/tool"}}, "allow[0]"},
		{"absolute path not executable", proc.Grants{Root: root, Allow: []string{file}}, "allow[0]"},
		{"absolute path is a directory", proc.Grants{Root: root, Allow: []string{"/usr/bin"}}, "allow[0]"},
		{"program under root", proc.Grants{Root: root, Allow: []string{"echo", tool}}, "allow[1]"},
		{"name found under root", proc.Grants{Root: root, Allow: []string{"tool"}, Path: []string{filepath.Dir(tool)}}, "allow[0]"},
		{"root is a system directory", proc.Grants{Root: "/usr", Allow: []string{"echo"}}, "allow[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := proc.New(tt.g, nil)
			if err == nil {
				e.Close()
				t.Fatal("New succeeded")
			}
			wantField(t, err, tt.field)
		})
	}
}

func TestNewNotRootUser(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("as root any user may be chosen")
	}
	_, err := proc.New(proc.Grants{Root: newRoot(t), Allow: []string{"echo"}, User: intp(os.Geteuid() + 1)}, nil)
	wantField(t, err, "user")
}
