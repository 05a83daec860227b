package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/brainrt/brain/build"
	"github.com/brainrt/brain/host"
	"github.com/brainrt/brain/host/jshost"
)

// runInspect is `brain inspect ARTIFACT`: verify the payload's identity and
// print the manifest and the host functions the payload imports.
func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("inspect", "inspect ARTIFACT",
		`Verifies an artifact's payload against the identity in its manifest and prints
the manifest and the host functions the payload imports. ARTIFACT is a
<name>.tool.json, its payload <name>.wasm (or, for a JavaScript artifact of
runtime js/1, <name>.mjs) beside it.`,
		"brain inspect artifacts/fs.read.tool.json")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return usageError(stderr, "inspect", "want exactly one ARTIFACT, got %d arguments", fs.NArg())
	}
	if rt, err := artifactRuntime(fs.Arg(0)); err == nil && isScriptRuntime(rt) {
		return inspectScript(fs.Arg(0), stdout, stderr)
	}
	m, payload, err := host.ReadArtifact(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "brain inspect:", err)
		return 1
	}
	imports, exports, err := build.Interface(ctx, payload)
	if err == nil {
		// What attach would refuse before anything runs, refused here
		// too: a payload of another ABI is no verified artifact.
		err = host.CheckABIExports(exports)
	}
	if err != nil {
		fmt.Fprintf(stderr, "brain inspect: %s: %v\n", fs.Arg(0), err)
		return 1
	}
	mj, _ := json.MarshalIndent(m, "", "  ")
	fmt.Fprintf(stdout, "identity verified: %s (%d bytes)\n\nmanifest:\n%s\n\nimports:\n", m.Payload, len(payload), mj)
	for _, imp := range imports {
		fmt.Fprintf(stdout, "  %s\n", imp)
	}
	return 0
}

// inspectScript is inspect for a JavaScript artifact (runtime js/1): its
// payload <name>.mjs reaches the host only through the handles it
// requires, so those are what it "imports".
func inspectScript(path string, stdout, stderr io.Writer) int {
	m, payload, err := jshost.ReadArtifact(path)
	if err != nil {
		fmt.Fprintln(stderr, "brain inspect:", err)
		return 1
	}
	mj, _ := json.MarshalIndent(m, "", "  ")
	fmt.Fprintf(stdout, "identity verified: %s (%d bytes of JavaScript)\n\nmanifest:\n%s\n\nhandles (runtime %s):\n", m.Payload, len(payload), mj, m.Runtime)
	for _, k := range m.Requires {
		fmt.Fprintf(stdout, "  %s\n", k)
	}
	return 0
}
