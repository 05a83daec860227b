//go:build !linux

package proc

// RunHelperIfRequested does nothing: the exec helper exists on Linux only.
// Call it first thing in main regardless; see the Linux documentation.
func RunHelperIfRequested() {}
