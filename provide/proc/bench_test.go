//go:build linux

package proc_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/provide/grant"
	"github.com/brainrt/brain/provide/proc"
)

// BenchmarkRunTrue runs /bin/true through the handle; compare
// BenchmarkOSExecTrue. As root the process limit is applied through ptrace,
// or, in the helper case, through a second exec of this binary.
func BenchmarkRunTrue(b *testing.B) {
	for _, bc := range []struct {
		name   string
		g      proc.Grants
		helper bool
	}{
		{"landlock=off,netns=off", proc.Grants{Landlock: proc.LandlockOff, Network: true}, false},
		{"landlock=on,netns=off", proc.Grants{Network: true}, false},
		{"landlock=on,netns=on", proc.Grants{}, false}, // the defaults
		{"landlock=on,netns=on,helper", proc.Grants{}, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if bc.helper {
				if os.Geteuid() != 0 {
					b.Skip("the helper is used only as root")
				}
				proc.ForceHelper(b)
			}
			bc.g.Root = newRoot(b)
			bc.g.Allow = []string{"/bin/true"}
			e, err := proc.New(bc.g, nil)
			var fe *grant.FieldError
			if errors.As(err, &fe) && fe.Field == "network" {
				b.Skip(err)
			}
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			cmd := handle.Command{Program: "/bin/true"}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Run(ctx, cmd); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOSExecTrue runs /bin/true with os/exec directly, unconfined.
func BenchmarkOSExecTrue(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		cmd := exec.Command("/bin/true")
		cmd.Env = []string{}
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
}
