package jsvm_test

import (
	"context"
	"fmt"
	"time"

	"modernc.org/quickjs"

	"github.com/brainrt/brain/internal/jsvm"
)

func ExampleVM_Run() {
	vm, err := jsvm.New(jsvm.Limits{MemoryBytes: 16 << 20})
	if err != nil {
		panic(err)
	}
	defer vm.Close()
	eval := func(src string) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		var out any
		err := vm.Run(ctx, func(q *quickjs.VM) error {
			var err error
			out, err = q.Eval(src, quickjs.EvalGlobal)
			return err
		})
		if err != nil {
			fmt.Println(jsvm.KindOf(err) == jsvm.Memory, jsvm.KindOf(err) == jsvm.Timeout, err)
			return
		}
		fmt.Println(out)
	}
	eval(`[1, 2, 3].map(x => x * 2).join(",")`)
	eval(`{ let s = "x"; for (;;) s += s }`) // the engine's own memory limit
	eval(`for (;;) {}`)                      // the engine's interrupt, at the deadline
	// Output:
	// 2,4,6
	// true false the script went over its memory limit
	// false true the script did not finish before its deadline
}
