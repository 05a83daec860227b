package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/brainrt/brain/build"
	"github.com/brainrt/brain/host"
)

// runInspect is `brain inspect ARTIFACT`: verify the payload's identity and
// print the manifest and the host functions the payload imports.
func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: brain inspect ARTIFACT\n\nARTIFACT is a <name>.tool.json (its payload <name>.wasm beside it).")
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	m, payload, err := host.ReadArtifact(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "brain inspect:", err)
		return 1
	}
	imports, err := build.Imports(ctx, payload)
	if err != nil {
		fmt.Fprintln(stderr, "brain inspect:", err)
		return 1
	}
	mj, _ := json.MarshalIndent(m, "", "  ")
	fmt.Fprintf(stdout, "identity verified: %s (%d bytes)\n\nmanifest:\n%s\n\nimports:\n", m.Payload, len(payload), mj)
	for _, imp := range imports {
		fmt.Fprintf(stdout, "  %s\n", imp)
	}
	return 0
}
