package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/brainrt/brain/build"
)

// runBuild is `brain build [packages] -o DIR`.
func runBuild(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("build", "build [packages] -o DIR",
		`Builds each Go tool package (one that exports a Tool made with tool.New) into
a WebAssembly payload, <name>.wasm, and each TypeScript or JavaScript tool
(a *.tool.ts, .tool.mts, .tool.js or .tool.mjs file of a directory with a
package.json) into an ES module, <name>.mjs; beside each goes its tool/v1
manifest, <name>.tool.json (docs/manifest.md, docs/tools-typescript.md).
Prints name, payload digest and manifest path per tool. Packages default
to ".". A tool's name must be a capability name that can name a file: no
spaces, control characters, '/' or '\', not starting with '.' or '-', at
most 245 bytes; no two tools may share one. Nothing is written unless
every tool builds.`,
		"brain build ./examples/tools/... -o artifacts\n  brain build ./examples/ts-tools -o artifacts")
	out := fs.String("o", "", "directory to write <name>.tool.json and <name>.wasm or <name>.mjs to (required)")
	flags, pkgs := splitFlags(args)
	if code, ok := parseFlags(fs, flags, stdout, stderr); !ok {
		return code
	}
	pkgs = append(pkgs, fs.Args()...)
	if *out == "" {
		return usageError(stderr, "build", "-o DIR is required")
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// A directory with a package.json is a TypeScript or JavaScript
	// project; the other patterns are Go packages (build.Build).
	arts, err := build.Build(ctx, pkgs, build.Options{Out: *out, Logger: logger})
	if err != nil {
		fmt.Fprintln(stderr, "brain build:", err)
		return exitFail
	}
	for _, a := range arts {
		fmt.Fprintf(stdout, "%s\t%s\t%s\n", a.Manifest.Name, a.Manifest.Payload, a.ManifestPath)
	}
	return 0
}

// splitFlags separates flags (and their values) from positional arguments,
// so that flags may follow packages: brain build ./x -o out.
func splitFlags(args []string) (flags, rest []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return flags, append(rest, args[i+1:]...)
		case len(a) > 1 && a[0] == '-':
			flags = append(flags, a)
			if !containsEq(a) && i+1 < len(args) && !isBoolFlag(a) {
				flags = append(flags, args[i+1])
				i++
			}
		default:
			rest = append(rest, a)
		}
	}
	return flags, rest
}

func containsEq(s string) bool {
	for _, c := range s {
		if c == '=' {
			return true
		}
	}
	return false
}

// isBoolFlag names the boolean flags of every subcommand, which take no
// separate value.
func isBoolFlag(a string) bool {
	switch a {
	case "-frames", "--frames", "-h", "-help", "--help":
		return true
	}
	return false
}
