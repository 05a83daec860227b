package jshost_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/brainrt/brain/host/jshost"
	"github.com/brainrt/brain/kernel"
)

// Example attaches the TypeScript echo tool (the artifact brain build
// makes of examples/ts-tools/src/echo.tool.ts) and calls it.
func Example() {
	h, err := jshost.New(nil)
	if err != nil {
		panic(err)
	}
	art, err := h.LoadManifest("testdata/echo.tool.json") // the identity is verified here
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	env := kernel.New(nil)
	defer env.Close()
	env.Setup(ctx)
	rec := env.Attach(ctx, kernel.Attachment{Tool: art})
	fmt.Println(rec.Attached, art.Manifest().Runtime)
	out := env.Invoke(ctx, "echo", kernel.Call{Session: "s1", Input: json.RawMessage(`{"message":"hello"}`)})
	fmt.Println(string(out.Value))
	out = env.Invoke(ctx, "echo", kernel.Call{Session: "s1", Input: json.RawMessage(`{"message":42}`)})
	fmt.Println(out.Err.Code)
	// Output:
	// [echo] js/1
	// {"message":"hello"}
	// invalid_input
}

// ExampleArtifact_Compile fills a bytecode cache at deploy time: a host
// started later over the same directory attaches without compiling.
func ExampleArtifact_Compile() {
	dir, err := os.MkdirTemp("", "brain-js-cache-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	h, err := jshost.New(&jshost.Options{CacheDir: filepath.Join(dir, "cache")})
	if err != nil {
		panic(err)
	}
	art, err := h.LoadManifest("testdata/echo.tool.json")
	if err != nil {
		panic(err)
	}
	if err := art.Compile(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println("compiled", art.Manifest().Name)
	// Output: compiled echo
}
