// Package guest runs a tool inside a WebAssembly module built by brain
// build (GOOS=wasip1 GOARCH=wasm, a reactor). It exports the ABI of
// docs/abi.md and implements each handle over the host functions of its
// import module, so that the handles a payload imports are exactly those its
// tool's code can reach: the Go linker drops host functions nothing calls.
//
// Tool authors do not import this package; brain build generates the main
// package that does:
//
//	func init() { guest.Serve(mytool.Tool, tool.Handles{FS: guest.FS{}}) }
//
// Everything but this comment builds for wasip1 only.
package guest
