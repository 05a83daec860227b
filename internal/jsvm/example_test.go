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

func ExampleVM_DefineBytes() {
	vm, err := jsvm.New(jsvm.Limits{MemoryBytes: 16 << 20})
	if err != nil {
		panic(err)
	}
	defer vm.Close()
	var out any
	err = vm.Run(context.Background(), func(q *quickjs.VM) error {
		if err := vm.DefineBytes("bytesOut", "bytesIn"); err != nil {
			return err
		}
		// A script hands bytes over; Go takes them, and gives others back.
		if _, err := q.Eval(`bytesOut(new Uint8Array([104, 101, 108, 108, 111]))`, quickjs.EvalGlobal); err != nil {
			return err
		}
		b, _ := vm.TakeBytes()
		vm.GiveBytes(append(b, " world"...))
		out, err = q.Eval(`String.fromCharCode(...new Uint8Array(bytesIn()))`, quickjs.EvalGlobal)
		return err
	})
	fmt.Println(out, err)
	// Output: hello world <nil>
}
