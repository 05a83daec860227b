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
// and package syscall), which is still one host function. It decodes the
// module with wazero's interpreter configuration, which validates without
// generating code.
func Imports(ctx context.Context, payload []byte) ([]string, error) {
	imports, _, err := Interface(ctx, payload)
	return imports, err
}

// Interface returns what Imports does and the names of the functions the
// payload exports, sorted (the ABI's marker among them: see
// host.CheckABIExports).
func Interface(ctx context.Context, payload []byte) (imports, exports []string, err error) {
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer r.Close(ctx)
	cm, err := r.CompileModule(ctx, payload)
	if err != nil {
		return nil, nil, fmt.Errorf("decode module: %w", err)
	}
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		imports = append(imports, mod+"."+name)
	}
	slices.Sort(imports)
	for name := range cm.ExportedFunctions() {
		exports = append(exports, name)
	}
	slices.Sort(exports)
	return slices.Compact(imports), exports, nil
}
