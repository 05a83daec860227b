//go:build linux

package proc_test

import (
	"testing"
	"time"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/provide/proc"
)

func TestClamp(t *testing.T) {
	g := proc.Grants{Timeout: 10 * time.Second, MaxOutputBytes: 1000, MaxProcesses: 8}
	tests := []struct {
		name string
		cmd  handle.Command
		g    proc.Grants
		want proc.Bounds
		code protocol.Code
	}{
		{"defaults", handle.Command{}, proc.Grants{},
			proc.Bounds{Timeout: proc.DefaultTimeout, MaxOutputBytes: proc.DefaultMaxOutputBytes, MaxProcesses: proc.DefaultMaxProcesses}, ""},
		{"grant values", handle.Command{}, g, proc.Bounds{Timeout: 10 * time.Second, MaxOutputBytes: 1000, MaxProcesses: 8}, ""},
		{"shorter timeout wins", handle.Command{Timeout: time.Second}, g, proc.Bounds{Timeout: time.Second, MaxOutputBytes: 1000, MaxProcesses: 8}, ""},
		{"longer timeout clamped", handle.Command{Timeout: time.Hour}, g, proc.Bounds{Timeout: 10 * time.Second, MaxOutputBytes: 1000, MaxProcesses: 8}, ""},
		{"smaller output wins", handle.Command{MaxOutput: 10}, g, proc.Bounds{Timeout: 10 * time.Second, MaxOutputBytes: 10, MaxProcesses: 8}, ""},
		{"larger output clamped", handle.Command{MaxOutput: 1 << 40}, g, proc.Bounds{Timeout: 10 * time.Second, MaxOutputBytes: 1000, MaxProcesses: 8}, ""},
		{"longer than default clamped", handle.Command{Timeout: time.Hour, MaxOutput: 1 << 40}, proc.Grants{},
			proc.Bounds{Timeout: proc.DefaultTimeout, MaxOutputBytes: proc.DefaultMaxOutputBytes, MaxProcesses: proc.DefaultMaxProcesses}, ""},
		{"negative timeout", handle.Command{Timeout: -time.Second}, g, proc.Bounds{}, protocol.CodeInvalidArgument},
		{"negative output", handle.Command{MaxOutput: -1}, g, proc.Bounds{}, protocol.CodeInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := proc.Clamp(tt.cmd, tt.g)
			if tt.code != "" {
				wantCode(t, err, tt.code)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("Clamp = %+v, want %+v", got, tt.want)
			}
		})
	}
}
