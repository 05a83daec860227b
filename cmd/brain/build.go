package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/brainrt/brain/build"
)

// runBuild is `brain build [packages] -o DIR`.
func runBuild(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "directory to write <name>.tool.json and <name>.wasm to (required)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: brain build [packages] -o DIR\n\nBuilds each tool package (one that exports a Tool made with tool.New) into a\nWebAssembly payload and its tool/v1 manifest. Packages default to \".\".")
		fs.PrintDefaults()
	}
	flags, pkgs := splitFlags(args)
	if err := fs.Parse(flags); err != nil {
		return 2
	}
	pkgs = append(pkgs, fs.Args()...)
	if *out == "" {
		fmt.Fprintln(stderr, "brain build: -o DIR is required")
		return 2
	}
	if len(pkgs) == 0 {
		pkgs = []string{"."}
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	arts, err := build.Build(ctx, pkgs, build.Options{Out: *out, Logger: logger})
	if err != nil {
		fmt.Fprintln(stderr, "brain build:", err)
		return 1
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
