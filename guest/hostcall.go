//go:build wasip1

package guest

import (
	"encoding/json"
	"unsafe"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/tool"
)

//go:wasmimport brain response
func hostResponse(ptr uint32)

//go:wasmimport brain progress
func hostProgress(ptr, n uint32)

func bytesAddr(b []byte) uint32 {
	if len(b) == 0 {
		return 0
	}
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

func progress(p tool.Progress) {
	b, _ := json.Marshal(p)
	hostProgress(bytesAddr(b), uint32(len(b)))
}

// hostFunc is the shape of every handle operation.
type hostFunc func(ptr, n uint32) uint32

// call sends req to a host function and decodes its outcome into out. A
// failed outcome becomes the *handle.CapabilityError the host reported.
func call(h handle.Kind, op string, fn hostFunc, req, out any) error {
	b, err := json.Marshal(req)
	if err != nil {
		return handle.Errorf(h, op, protocol.CodeInvalidArgument, "request: %v", err)
	}
	n := fn(bytesAddr(b), uint32(len(b)))
	resp := make([]byte, n)
	if n > 0 {
		hostResponse(bytesAddr(resp))
	}
	var o protocol.Outcome
	if err := json.Unmarshal(resp, &o); err != nil {
		return handle.Errorf(h, op, protocol.CodeInternal, "response: %v", err)
	}
	if o.Err != nil {
		return &handle.CapabilityError{Handle: h, Op: op, Code: o.Err.Code, Message: o.Err.Message}
	}
	if out != nil {
		if err := json.Unmarshal(o.Value, out); err != nil {
			return handle.Errorf(h, op, protocol.CodeInternal, "response value: %v", err)
		}
	}
	return nil
}
