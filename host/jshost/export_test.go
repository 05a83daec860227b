package jshost

import (
	"context"

	"github.com/brainrt/brain/tool"
)

// HeapOf returns the heap of session's realm of inst, for tests.
func HeapOf(inst tool.Instance, session string) int64 {
	p := inst.(*pool)
	p.mu.Lock()
	defer p.mu.Unlock()
	if in := p.sessions[session]; in != nil {
		return in.vm.HeapBytes()
	}
	return -1
}

// Serve runs one host-function request on a call that holds no handles.
func Serve(op, arg string) string {
	cs := &callState{ctx: context.Background()}
	return cs.serve(op, arg)
}

// OnRealmClose registers f to run when session's realm of inst is freed,
// which is when its engine has returned (a script given up past its
// deadline frees it only when it ends); it reports false when session has
// no realm.
func OnRealmClose(inst tool.Instance, session string, f func()) bool {
	p := inst.(*pool)
	p.mu.Lock()
	defer p.mu.Unlock()
	in := p.sessions[session]
	if in == nil {
		return false
	}
	in.vm.OnClose(f)
	return true
}
