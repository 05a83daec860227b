package script_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/provide/script"
)

func ExampleRuntime_Call() {
	js, err := script.New(script.Grants{}, nil)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()

	out, err := js.Call(ctx, `(args) => args.items.filter(i => i.price < args.max).map(i => i.name)`,
		json.RawMessage(`{"items": [{"name": "tea", "price": 3}, {"name": "cake", "price": 9}], "max": 5}`))
	fmt.Println(string(out), err)

	_, err = js.Call(ctx, `() => "x".repeat(1e9)`, nil)
	fmt.Println(handle.CodeOf(err))

	_, err = js.Call(ctx, `(args) => args.missing.field`, json.RawMessage(`{}`))
	fmt.Println(err)
	// Output:
	// ["tea"] <nil>
	// too_large
	// js call: the function threw: TypeError: cannot read property 'field' of undefined (line 1, column 23)
}
