// Package tool is how tools are written: typed authoring against the handles
// of package handle, and the tool/v1 manifest that describes a tool to an
// environment.
//
// A tool names the handles it needs as the fields of a struct type, and its
// bindings (credentials, endpoints supplied at attach) as the fields of
// another. Its run context is derived from those types, so using a handle or
// binding the tool did not declare does not compile:
//
//	type readHandles struct{ FS handle.FS }
//
//	var Read = tool.New(tool.Spec{Name: "fs.read", Description: "Read a file."},
//		func(ctx *tool.Context[readHandles, tool.None], in ReadIn) (ReadOut, error) {
//			b, err := ctx.Handles.FS.ReadFile(ctx, in.Path)  // declared: compiles
//			// ctx.Handles.Exec  → compile error: type readHandles has no field or method Exec
//			return ReadOut{Text: string(b)}, err
//		})
//
// The manifest's `requires` is derived from the handles struct and its
// `binding_names` from the bindings struct; input and output JSON Schemas
// are derived from the Go types with github.com/google/jsonschema-go (field
// descriptions from `jsonschema:"…"` tags) unless given in the Spec.
package tool
