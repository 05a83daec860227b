package script_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/brainrt/brain/provide/script"
)

// BenchmarkCallSmall is a whole call of a small function on a reused
// QuickJS realm: the hand-off to the realm's worker, the dispatcher's
// JSON.parse of the arguments, the call, JSON.stringify of the result and
// the check of the global object's shape after it.
func BenchmarkCallSmall(b *testing.B) {
	r, err := script.New(script.Grants{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	args := json.RawMessage(`{"a": 2, "b": 3}`)
	b.ReportAllocs()
	for b.Loop() {
		out, err := r.Call(ctx, `(args) => args.a + args.b`, args)
		if err != nil || string(out) != "5" {
			b.Fatalf("Call = %s, %v", out, err)
		}
	}
}
