package build

import (
	"context"
	"fmt"
	"slices"

	"github.com/tetratelabs/wazero"
)

// Imports returns the host functions a payload imports, as "module.name",
// sorted, each once: a module may import one function several times (a Go
// payload imports wasi_snapshot_preview1.fd_write from both the runtime
// and package syscall), which is still one host function. It decodes the module with wazero's interpreter configuration,
// which validates without generating code.
func Imports(ctx context.Context, payload []byte) ([]string, error) {
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer r.Close(ctx)
	cm, err := r.CompileModule(ctx, payload)
	if err != nil {
		return nil, fmt.Errorf("decode module: %w", err)
	}
	var out []string
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		out = append(out, mod+"."+name)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
