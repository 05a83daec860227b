package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// newFlagSet returns the flag set of `brain <name>`. Its usage shows the
// synopsis (after "brain "), what the command does, its flags and an
// example, on the flag set's output.
func newFlagSet(name, synopsis, about, example string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: brain %s\n\n%s\n", synopsis, strings.TrimSpace(about))
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintln(w, "\nFlags:")
			fs.PrintDefaults()
		}
		fmt.Fprintf(w, "\nExample:\n  %s\n", example)
	}
	return fs
}

// parseFlags parses args with fs. -h or --help prints the usage to stdout
// (exit 0); a bad flag prints what is wrong and where the usage is, as
// every usage error does (usageError), to stderr (exit 2): the whole usage
// would bury the one line that matters. ok is false when the caller must
// return code at once.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		_, _ = io.Copy(stdout, &buf)
		fs.SetOutput(stdout)
		return exitOK, false
	case err != nil:
		fs.SetOutput(stderr)
		return usageError(stderr, fs.Name(), "%v", err), false
	}
	fs.SetOutput(stderr)
	return exitOK, true
}

// usageError prints a usage problem of `brain <name>` and returns exit 2.
func usageError(stderr io.Writer, name, format string, args ...any) int {
	fmt.Fprintf(stderr, "brain %s: %s\nRun 'brain %s -h' for usage.\n", name, fmt.Sprintf(format, args...), name)
	return exitUsage
}

// noArgs refuses positional arguments for a command that takes none.
func noArgs(stderr io.Writer, name string, args []string) (int, bool) {
	if len(args) > 0 {
		return usageError(stderr, name, "unexpected argument %q (this command takes only flags)", args[0]), false
	}
	return exitOK, true
}

// runVersion is `brain version` and `brain --version`.
func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", "version", "Prints brain's version, the Go toolchain and the build's VCS information (runtime/debug.ReadBuildInfo).", "brain version")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if code, ok := noArgs(stderr, "version", fs.Args()); !ok {
		return code
	}
	fmt.Fprint(stdout, versionText())
	return exitOK
}

// versionText is the module version and build settings of this binary.
func versionText() string {
	var b strings.Builder
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		fmt.Fprintf(&b, "brain (no build information) %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return b.String()
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	fmt.Fprintf(&b, "brain %s %s %s/%s\n", v, bi.GoVersion, runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(&b, "  module   %s\n", bi.Main.Path)
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision", "vcs.time", "vcs.modified", "-tags", "CGO_ENABLED":
			fmt.Fprintf(&b, "  %-8s %s\n", strings.TrimPrefix(s.Key, "vcs."), s.Value)
		}
	}
	return b.String()
}
