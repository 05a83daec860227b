// Package abi holds what the WebAssembly host (package host) and guest
// (package guest) agree on: export and import names, and the JSON shapes
// that cross the boundary. docs/abi.md describes the same contract for
// authors of guests in other languages.
package abi

import (
	"encoding/binary"
	"encoding/json"
	"errors"

	"github.com/brainrt/brain/handle"
)

// Version is the ABI this package describes. ABI 1 (until 2026-12) sent
// brain_invoke a JSON envelope and took an Outcome back; ABI 2 sends a
// binary request and takes a status-byte result (docs/abi.md).
const Version = 2

// Runtime names this ABI in a manifest's runtime field.
const Runtime = "wasm/2"

// MaxPayloadBytes bounds a payload, <name>.wasm: the host refuses a larger
// one, and `brain build` refuses to write one. Go payloads are 3 to 10 MB.
const MaxPayloadBytes = 64 << 20

// ExportVersion is the export that marks a payload built for [Version]: a
// function of no parameters and no results that does nothing. Its name
// carries the version so that the host reads it without running the guest
// ([ExportVersionPrefix] and the number).
const ExportVersion = "brain_abi_v2"

// ExportVersionPrefix begins the version marker of every ABI version.
const ExportVersionPrefix = "brain_abi_v"

// Guest exports.
const (
	ExportAlloc  = "brain_alloc"  // (size u32) -> ptr u32
	ExportInit   = "brain_init"   // (ptr u32, len u32) -> packed u64: an Outcome
	ExportInvoke = "brain_invoke" // (ptr u32, len u32) -> packed u64: a result (ResultValue, ResultOutcome)
)

// Host imports. Module "brain" serves every guest; each handle has its own
// module, "brain_<handle>", so that a payload's import section names the
// handles it uses.
const (
	ModuleBrain    = "brain"
	ImportResponse = "response" // (ptr u32) copies the pending response
	ImportProgress = "progress" // (ptr u32, len u32)
)

// HandleModule returns the import module of handle k: "brain_fs", …
func HandleModule(k handle.Kind) string { return "brain_" + string(k) }

// The operations of each handle module. Every one has the signature
// (req_ptr u32, req_len u32) -> resp_len u32.
var Ops = map[handle.Kind][]string{
	handle.KindFS:   {"read_file", "write_file", "read_dir", "stat", "mkdir_all", "remove", "rename", "symlink", "link", "walk", "glob"},
	handle.KindExec: {"run"},
	handle.KindNet:  {"fetch"},
	handle.KindJS:   {"call"},
	handle.KindPage: {"navigate", "text", "evaluate", "screenshot"},
}

// Pack joins a pointer and a length into the u64 a guest export returns.
func Pack(ptr, n uint32) uint64 { return uint64(ptr)<<32 | uint64(n) }

// Unpack splits what Pack joined.
func Unpack(v uint64) (ptr, n uint32) { return uint32(v >> 32), uint32(v) }

// InvokeRequest is what brain_invoke receives, encoded by [AppendInvoke]:
// binary, so that a guest reads the input JSON once, as the tool decodes
// it, and never as part of an envelope.
type InvokeRequest struct {
	ID        string          `json:"id"`
	Input     json.RawMessage `json:"input"`
	Workspace string          `json:"workspace,omitempty"`
}

// AppendInvoke appends the encoding of an invoke request to dst:
//
//	u32le len(id) | id | u32le len(workspace) | workspace | input JSON
//
// The input runs to the end of the request.
func AppendInvoke(dst []byte, id, workspace string, input []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(id)))
	dst = append(dst, id...)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(workspace)))
	dst = append(dst, workspace...)
	return append(dst, input...)
}

// ErrMalformed is returned for a record that does not decode.
var ErrMalformed = errors.New("malformed record")

// ParseInvoke decodes what AppendInvoke encoded. The input aliases b.
func ParseInvoke(b []byte) (id, workspace string, input []byte, err error) {
	field := func() (string, bool) {
		if len(b) < 4 {
			return "", false
		}
		n := binary.LittleEndian.Uint32(b)
		if uint64(n) > uint64(len(b)-4) {
			return "", false
		}
		s := string(b[4 : 4+n])
		b = b[4+n:]
		return s, true
	}
	var ok bool
	if id, ok = field(); !ok {
		return "", "", nil, ErrMalformed
	}
	if workspace, ok = field(); !ok {
		return "", "", nil, ErrMalformed
	}
	return id, workspace, b, nil
}

// The first byte of what brain_invoke returns says what follows it.
const (
	// ResultValue: the rest is the tool's output, a JSON value.
	ResultValue byte = 'v'
	// ResultOutcome: the rest is an Outcome, JSON (a failed call).
	ResultOutcome byte = 'o'
)

// PathRequest names one path (read_file, read_dir, stat, mkdir_all,
// remove, walk) or a pattern (glob).
type PathRequest struct {
	Path string `json:"path"`
}

// WriteRequest is write_file's request.
type WriteRequest struct {
	Path string `json:"path"`
	Data []byte `json:"data"`
}

// TwoPathRequest is rename's, symlink's and link's request.
type TwoPathRequest struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// WalkEntry is one entry of walk's response, in order.
type WalkEntry struct {
	Path string          `json:"path"`
	Info handle.FileInfo `json:"info"`
}

// JSRequest is js call's request.
type JSRequest struct {
	Source string          `json:"source"`
	Args   json.RawMessage `json:"args"`
}

// PageRequest is the request of page navigate (URL), text (Selector) and
// evaluate (Expression); screenshot takes {}.
type PageRequest struct {
	URL        string `json:"url,omitempty"`
	Selector   string `json:"selector,omitempty"`
	Expression string `json:"expression,omitempty"`
}
