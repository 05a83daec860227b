package host_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/brainrt/brain/tool"
)

// TestProvisionSharesCompiledModule: a payload provisioned again on the
// same host while an instance of it is provisioned shares its compiled
// module, instead of decoding and validating the payload again (which a
// compile does even from the cache); once the last is closed, the module
// is released and the next provisioning compiles afresh. Measured in
// bytes allocated, against a compile from the cache in the same test.
func TestProvisionSharesCompiledModule(t *testing.T) {
	h := newHost(t, nil)
	fs, _ := stallFS(t)
	a := load(t, h, "stall")
	provision := func() (tool.Instance, uint64) {
		t.Helper()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		inst, err := a.Provision(context.Background(), tool.Handles{FS: fs}, nil)
		runtime.ReadMemStats(&after)
		must(t, err)
		return inst, after.TotalAlloc - before.TotalAlloc
	}
	cold, _ := provision() // fills the compilation cache, if no test did
	must(t, cold.Close())
	first, compiling := provision() // compiles from the cache
	second, sharing := provision()
	if sharing*4 > compiling {
		t.Fatalf("a provisioning sharing the compiled module allocated %d bytes, a compiling one %d: want under a quarter", sharing, compiling)
	}
	must(t, first.Close())
	third, stillSharing := provision() // second still holds the module
	if stillSharing*4 > compiling {
		t.Fatalf("with one of two instances closed, a provisioning allocated %d bytes (compiling: %d): the module was released too early", stillSharing, compiling)
	}
	must(t, second.Close())
	must(t, third.Close())
	again, recompiling := provision()
	defer again.Close()
	if recompiling*4 < compiling {
		t.Fatalf("after every instance was closed, a provisioning allocated %d bytes (compiling: %d): the module was not released", recompiling, compiling)
	}
	t.Logf("allocated per provisioning: compiling from the cache %d MB, sharing %d MB, compiling again %d MB", compiling>>20, sharing>>20, recompiling>>20)
}
