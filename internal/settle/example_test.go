package settle_test

import (
	"context"
	"fmt"

	"github.com/brainrt/brain/internal/settle"
)

// A server starts Run beside its listener: once the process has gone
// quiet after a busy spell, its free memory goes back to the system.
func ExampleRun() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go settle.Run(ctx, nil) // the defaults: quiet for 15 s at under 256 KiB/s
	fmt.Println("serving")
	// Output: serving
}
