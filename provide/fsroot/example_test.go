package fsroot_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/provide/fsroot"
)

func Example() {
	dir, err := os.MkdirTemp("", "fsroot-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// Setup: grants come from the environment's configuration; the tool
	// only ever sees the handle.FS.
	fsys, err := fsroot.New(fsroot.Grants{Root: dir, MaxFileBytes: 1 << 20})
	if err != nil {
		log.Fatal(err)
	}
	defer fsys.Close()
	var tree handle.FS = fsys

	ctx := context.Background()
	if err := tree.MkdirAll(ctx, "notes"); err != nil {
		log.Fatal(err)
	}
	if err := tree.WriteFile(ctx, "notes/a.txt", []byte("hello")); err != nil {
		log.Fatal(err)
	}
	data, err := tree.ReadFile(ctx, "notes/a.txt")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", data)

	matches, _ := tree.Glob(ctx, "**/*.txt")
	fmt.Println(matches)

	// Leaving the root fails with a code the model can act on.
	_, err = tree.ReadFile(ctx, "notes/../../etc/passwd")
	fmt.Println(handle.CodeOf(err))
	fmt.Println(err)
	// Output:
	// hello
	// [notes/a.txt]
	// path_escape
	// fs read_file: the path "notes/../../etc/passwd" leads outside the file tree through ".."; use a path inside it
}

func ExampleGrants_Validate() {
	err := fsroot.Grants{Root: "/srv/work", MaxFileBytes: -1}.Validate()
	fmt.Println(err)
	// Output:
	// max_file_bytes: must not be negative (0 means the default, 16777216)
}
