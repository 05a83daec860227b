//go:build wasip1

package guest

import (
	"context"
	"encoding/json"
	"fmt"
	"unsafe"

	"github.com/brainrt/brain/internal/abi"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/tool"
)

var (
	served   tool.Attachable
	handles  tool.Handles
	instance tool.Instance

	inBuf  []byte    // handed out by brain_alloc, reused
	outBuf []byte    // the last result, kept reachable until the next call
	cur    tool.Call // the running call, reused: a guest runs one call at a time
)

// Serve makes t the module's tool, with the guest handles hs (only those
// the tool declares).
func Serve(t tool.Attachable, hs tool.Handles) {
	served, handles = t, hs
}

func addr(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

func result(b []byte) uint64 {
	outBuf = b
	return abi.Pack(addr(b), uint32(len(b)))
}

func outcome(o protocol.Outcome) uint64 {
	b, err := json.Marshal(o)
	if err != nil {
		b, _ = json.Marshal(protocol.Fail(protocol.CodeInvalidOutput, "the result does not encode as JSON: %v", err))
	}
	return result(b)
}

func input(ptr, n uint32) ([]byte, bool) {
	if len(inBuf) == 0 || ptr != addr(inBuf) || n > uint32(len(inBuf)) {
		return nil, false
	}
	return inBuf[:n], true
}

// abiVersion marks the payload as built for ABI 2 (abi.ExportVersion);
// the host reads its name and never calls it.
//
//go:wasmexport brain_abi_v2
func abiVersion() {}

//go:wasmexport brain_alloc
func alloc(size uint32) uint32 {
	if size == 0 {
		size = 1
	}
	if uint32(cap(inBuf)) < size {
		inBuf = make([]byte, size)
	}
	inBuf = inBuf[:size]
	return addr(inBuf)
}

//go:wasmexport brain_init
func initialize(ptr, n uint32) uint64 {
	data, ok := input(ptr, n)
	if !ok || served == nil {
		return outcome(protocol.Fail(protocol.CodeInternal, "brain_init: no input or no tool"))
	}
	var bindings map[string]json.RawMessage
	if err := json.Unmarshal(data, &bindings); err != nil {
		return outcome(protocol.Fail(protocol.CodeInvalidInput, "brain_init: bindings: %v", err))
	}
	inst, err := provision(bindings)
	if err != nil {
		return outcome(protocol.OutcomeOf(err))
	}
	instance = inst
	return outcome(protocol.OK(nil))
}

func provision(bindings map[string]json.RawMessage) (inst tool.Instance, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("init panicked: %v", p)
		}
	}()
	return served.Provision(context.Background(), handles, bindings)
}

//go:wasmexport brain_invoke
func invoke(ptr, n uint32) uint64 {
	data, ok := input(ptr, n)
	if !ok || instance == nil {
		return outcome(protocol.Fail(protocol.CodeInternal, "brain_invoke: no input or not initialised"))
	}
	id, workspace, input, err := abi.ParseInvoke(data)
	if err != nil {
		return failed(protocol.Fail(protocol.CodeInvalidInput, "brain_invoke: %v", err))
	}
	// A panic is not recovered: it traps, and the host discards this
	// instance, which is what a crashed tool deserves.
	cur = tool.Call{ID: id, Input: input, Handles: handles, Workspace: workspace, Progress: progress}
	v, err := instance.Invoke(context.Background(), &cur)
	if err != nil {
		return failed(protocol.OutcomeOf(err))
	}
	// The tool's output is JSON encoding/json made: it goes out as is,
	// after one status byte (the host checks it is JSON).
	outBuf = append(append(outBuf[:0], abi.ResultValue), v...)
	return abi.Pack(addr(outBuf), uint32(len(outBuf)))
}

// failed returns a failed outcome as brain_invoke's result.
func failed(o protocol.Outcome) uint64 {
	b, err := json.Marshal(o)
	if err != nil {
		b, _ = json.Marshal(protocol.Fail(protocol.CodeInvalidOutput, "the error does not encode as JSON: %v", err))
	}
	outBuf = append(append(outBuf[:0], abi.ResultOutcome), b...)
	return abi.Pack(addr(outBuf), uint32(len(outBuf)))
}
