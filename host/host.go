package host

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/internal/abi"
	"github.com/brainrt/brain/internal/regularfile"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/tool"
)

// Options configure a [Host]. A nil *Options means the defaults.
type Options struct {
	// CacheDir holds compiled code, one entry per payload identity; ""
	// compiles in memory only. The host refuses a directory that group or
	// others can write, and checks every entry's MAC (under a key it keeps
	// in the directory, mode 0600) before wazero reads it: a bad entry is
	// deleted and its payload recompiled, with a warning.
	CacheDir string
	// InitTimeout bounds the instantiation and initialisation of one
	// instance (_initialize and brain_init), at attach and whenever the
	// pool grows, within the deadline of the context given. Default 30 s.
	InitTimeout time.Duration
	// MemoryLimitMiB bounds each instance's linear memory. Default 128.
	MemoryLimitMiB int
	// PoolSize bounds the instances per attached artifact running calls
	// at once, and so its concurrent calls — except that a call of a
	// session with none running never waits behind other sessions': it
	// takes one of 3 × PoolSize extra slots when all are held. Default 4.
	PoolSize int
	// IdleInstances bounds the idle instances kept per attached artifact
	// between calls, across sessions: an instance serves one session, so
	// a busy tool keeps one per recently active session, the least
	// recently used closed first. Default 2 × PoolSize.
	IdleInstances int
	// Logger receives the host's logs; nil discards them.
	Logger *slog.Logger
}

// Host compiles and runs artifacts. It is safe for concurrent use.
type Host struct {
	opts Options
	log  *slog.Logger
	rt   wazero.Runtime

	cache *codeCache // nil without a CacheDir

	mu           sync.RWMutex
	payloads     map[string][]byte    // identity → verified bytes
	instrumented map[string][]byte    // identity → the instrumented payload
	modules      map[string]*compiled // identity → its compiled module, while a pool uses it
	pools        map[*pool]struct{}
	// compiling counts the compiles running, those an attach's deadline
	// left behind among them (compileWithin), and closed is set by Close:
	// wazero's runtime must not close under a compile (its store's maps
	// go, and the compile panics), so the last compile to end after Close
	// closes it.
	compiling     int
	closed        bool
	closeOnce     sync.Once
	closeErr      error
	runtimeClosed atomic.Bool // for tests
}

// compileStarting, when set, runs as each compile starts: a test holds a
// compile there. Atomic: a compile an earlier test left behind may still
// be starting when a test sets it.
var compileStarting atomic.Pointer[func()]

// errClosed is a compile's error when the host closed under it.
var errClosed = errors.New("host: closed")

// compiled is a payload's compiled module, shared by the pools of every
// artifact provisioned from it: compiling again, even from the cache,
// decodes and validates the whole payload (about 300 MB allocated and
// seconds under the race detector for a Go guest), which an attach would
// otherwise pay before its init even starts.
type compiled struct {
	cm   wazero.CompiledModule
	refs int // pools using cm, and provisionings under way
}

// New starts a host: a wazero runtime with the compilation cache, memory
// limit and deadline enforcement, WASI (with no files, no environment, no
// arguments) and the brain host modules.
func New(ctx context.Context, opts *Options) (*Host, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MemoryLimitMiB <= 0 {
		o.MemoryLimitMiB = 128
	}
	if o.PoolSize <= 0 {
		o.PoolSize = 4
	}
	if o.IdleInstances <= 0 {
		o.IdleInstances = 2 * o.PoolSize
	}
	if o.InitTimeout <= 0 {
		o.InitTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	// No WithCloseOnContextDone: payloads are instrumented instead (see
	// instrument.go), which stops a guest at its deadline without a Go
	// round trip at every loop header (docs/RATIONALE.md, "Why are
	// payloads instrumented instead of compiled with termination checks?").
	cfg := wazero.NewRuntimeConfig().
		WithMemoryLimitPages(uint32(o.MemoryLimitMiB) * 16) // 64 KiB pages
	var cache *codeCache
	if o.CacheDir != "" {
		var err error
		if cache, err = openCache(o.CacheDir, o.Logger); err != nil {
			return nil, fmt.Errorf("host: %w", err)
		}
		cfg = cfg.WithCompilationCache(cache.wcache)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	h := &Host{opts: o, log: o.Logger, rt: rt, cache: cache, payloads: map[string][]byte{},
		instrumented: map[string][]byte{}, modules: map[string]*compiled{}, pools: map[*pool]struct{}{}}
	fail := func(err error) (*Host, error) {
		_ = h.Close(ctx)
		return nil, err
	}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		return fail(fmt.Errorf("host: wasi: %w", err))
	}
	if err := instantiateHostModules(ctx, rt); err != nil {
		return fail(fmt.Errorf("host: host modules: %w", err))
	}
	return h, nil
}

// Close closes every instance and the runtime: at once, or, while a
// compile runs (one an attach's deadline left behind), when the last one
// ends. Closing again does nothing.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	h.closed = true
	busy := h.compiling > 0
	h.mu.Unlock()
	if busy {
		return nil // endCompile closes the runtime
	}
	return h.closeRuntime(ctx)
}

func (h *Host) closeRuntime(ctx context.Context) error {
	h.closeOnce.Do(func() {
		defer h.runtimeClosed.Store(true)
		h.closeErr = h.rt.Close(ctx)
		if h.cache != nil {
			h.cache.close(ctx)
		}
	})
	return h.closeErr
}

// beginCompile counts a compile about to run; false when the host is closed.
func (h *Host) beginCompile() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.compiling++
	return true
}

// endCompile counts the end of a compile that made cm (nil: it failed)
// and reports whether the host closed meanwhile: then cm is closed, not to
// be used, and the last such compile closes the runtime.
func (h *Host) endCompile(cm wazero.CompiledModule) (closed bool) {
	h.mu.Lock()
	h.compiling--
	closed, last := h.closed, h.closed && h.compiling == 0
	h.mu.Unlock()
	if closed && cm != nil {
		_ = cm.Close(context.Background())
	}
	if last {
		_ = h.closeRuntime(context.Background())
	}
	return closed
}

// compile instruments and compiles a payload whose identity the caller
// verified, through the verified cache when there is one. The
// instrumented bytes are kept per identity: each payload is rewritten once
// per host.
func (h *Host) compile(ctx context.Context, identity string, payload []byte) (wazero.CompiledModule, error) {
	h.mu.RLock()
	wasm, ok := h.instrumented[identity]
	h.mu.RUnlock()
	if !ok {
		var err error
		if wasm, err = instrument(payload); err != nil {
			return nil, err
		}
		h.mu.Lock()
		h.instrumented[identity] = wasm
		h.mu.Unlock()
	}
	if h.cache == nil {
		return h.rt.CompileModule(ctx, wasm)
	}
	return h.cache.compile(ctx, h.rt, identity, wasm)
}

// acquireModule returns the compiled module of a payload whose identity the
// caller verified: the one a pool of this host already uses, or a new
// compile. Each acquireModule is paired with a releaseModule.
func (h *Host) acquireModule(ctx context.Context, identity string, payload []byte) (wazero.CompiledModule, error) {
	h.mu.Lock()
	if c, ok := h.modules[identity]; ok {
		c.refs++
		h.mu.Unlock()
		return c.cm, nil
	}
	h.mu.Unlock()
	cm, err := h.compileWithin(ctx, identity, payload)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	c, ok := h.modules[identity]
	if !ok { // the usual case: no other attach compiled it meanwhile
		h.modules[identity] = &compiled{cm: cm, refs: 1}
		h.mu.Unlock()
		return cm, nil
	}
	c.refs++
	h.mu.Unlock()
	_ = cm.Close(ctx) // another attach's compile won: use one module
	return c.cm, nil
}

// compileWithin compiles payload, returning at ctx's end if that comes
// first: wazero decodes and validates a module (even one it finds in the
// compilation cache) without looking at ctx, for seconds for a large
// guest on a loaded machine, and an attach's deadline is a deadline. The
// compile left behind runs to its end (filling the cache) and its module
// is closed; if the host is closed meanwhile, the runtime closes after it
// (endCompile).
func (h *Host) compileWithin(ctx context.Context, identity string, payload []byte) (wazero.CompiledModule, error) {
	type compiled struct {
		cm  wazero.CompiledModule
		err error
	}
	if !h.beginCompile() {
		return nil, errClosed
	}
	done := make(chan compiled, 1)
	go func() {
		if hook := compileStarting.Load(); hook != nil {
			(*hook)()
		}
		cm, err := h.compile(context.WithoutCancel(ctx), identity, payload)
		if err != nil {
			cm = nil
		}
		if h.endCompile(cm) {
			cm, err = nil, errClosed
		}
		done <- compiled{cm, err}
	}()
	select {
	case c := <-done:
		return c.cm, c.err
	case <-ctx.Done():
		go func() {
			if c := <-done; c.err == nil {
				_ = c.cm.Close(context.Background())
			}
		}()
		return nil, stopped(ctx, "compiling the payload")
	}
}

// releaseModule ends a use of the compiled module of identity, closing it
// after the last (which wazero allows while calls are running).
func (h *Host) releaseModule(identity string) error {
	h.mu.Lock()
	c := h.modules[identity]
	if c.refs--; c.refs > 0 {
		h.mu.Unlock()
		return nil
	}
	delete(h.modules, identity)
	h.mu.Unlock()
	return c.cm.Close(context.Background())
}

// Identity returns a payload's identity: "sha256:<hex>".
func Identity(payload []byte) string {
	sum := sha256.Sum256(payload)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// AddPayload registers payload bytes under identity, after checking that
// they are what the identity names.
func (h *Host) AddPayload(identity string, payload []byte) error {
	if got := Identity(payload); got != identity {
		return fmt.Errorf("payload does not match its identity: want %s, got %s", identity, got)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.payloads[identity] = payload
	return nil
}

// ReadArtifact reads an artifact — <name>.tool.json with its payload
// <name>.wasm beside it — strictly: unknown manifest fields, an invalid
// manifest and a payload that does not match its identity are errors.
func ReadArtifact(path string) (tool.Manifest, []byte, error) {
	var m tool.Manifest
	if !strings.HasSuffix(path, ".tool.json") {
		return m, nil, fmt.Errorf("%s: an artifact is named <name>.tool.json", path)
	}
	b, err := regularfile.Read(path, tool.MaxManifestBytes)
	if err != nil {
		return m, nil, err
	}
	if m, err = decodeManifest(b); err != nil {
		return m, nil, fmt.Errorf("%s: %w", path, err)
	}
	payloadPath := strings.TrimSuffix(path, ".tool.json") + ".wasm"
	payload, err := regularfile.Read(payloadPath, abi.MaxPayloadBytes)
	if err != nil {
		return m, nil, fmt.Errorf("%s: payload: %w", path, err)
	}
	if got := Identity(payload); got != m.Payload {
		return m, nil, fmt.Errorf("%s does not match its identity: the manifest names %s, the bytes are %s", payloadPath, m.Payload, got)
	}
	return m, payload, nil
}

// decodeManifest decodes a tool.json strictly: one JSON object, no unknown
// fields, a valid manifest with a well-formed payload identity.
func decodeManifest(b []byte) (tool.Manifest, error) {
	var m tool.Manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return tool.Manifest{}, err
	}
	if dec.More() {
		return tool.Manifest{}, errors.New("trailing data after the manifest")
	}
	if err := m.Validate(); err != nil {
		return tool.Manifest{}, err
	}
	if m.Payload == "" {
		return tool.Manifest{}, errors.New("manifest has no payload identity")
	}
	if !isIdentity(m.Payload) {
		return tool.Manifest{}, fmt.Errorf("payload identity %q is not sha256:<64 lower-case hex digits>", m.Payload)
	}
	if err := CheckRuntime(m); err != nil {
		return tool.Manifest{}, err
	}
	return m, nil
}

// CheckRuntime reports whether this host runs m's payload: its runtime
// must be [abi.Runtime] ("wasm/2"). The error names the artifact's runtime,
// the host's, and what to do.
func CheckRuntime(m tool.Manifest) error {
	switch {
	case m.Runtime == abi.Runtime:
		return nil
	case m.Runtime == "":
		return errf(protocol.CodeInvalidRequest,
			"artifact %q names no runtime: it was built by a brain from before the ABI was versioned, and may speak ABI 1, which this host (%s) cannot run; rebuild it with `brain build`", m.Name, abi.Runtime)
	case strings.HasPrefix(m.Runtime, "wasm/"):
		return errf(protocol.CodeInvalidRequest,
			"artifact %q was built for runtime %s; this host implements %s: rebuild it with `brain build`, or run it with a brain that implements %s", m.Name, m.Runtime, abi.Runtime, m.Runtime)
	default:
		return errf(protocol.CodeInvalidRequest, "artifact %q needs runtime %q, which the WebAssembly host does not run (it runs %s; brain's JavaScript host runs %s): rebuild it with `brain build`, or run it with a brain that implements %s", m.Name, m.Runtime, abi.Runtime, tool.RuntimeJS, m.Runtime)
	}
}

func isIdentity(s string) bool {
	hexPart, ok := strings.CutPrefix(s, "sha256:")
	return ok && isWazeroKey(hexPart)
}

// LoadManifest reads an artifact (see [ReadArtifact]) and registers its
// payload. The returned artifact is ready to attach.
func (h *Host) LoadManifest(path string) (*Artifact, error) {
	m, payload, err := ReadArtifact(path)
	if err != nil {
		return nil, err
	}
	if err := h.AddPayload(m.Payload, payload); err != nil {
		return nil, err
	}
	return h.Artifact(m), nil
}

// LoadDir loads every *.tool.json in dir.
func (h *Host) LoadDir(dir string) ([]*Artifact, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.tool.json"))
	if err != nil {
		return nil, err
	}
	var out []*Artifact
	for _, p := range paths {
		a, err := h.LoadManifest(p)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// Artifact returns the attachable artifact of manifest m. Its payload is
// looked up by identity at attach: an unknown identity fails the attach.
func (h *Host) Artifact(m tool.Manifest) *Artifact { return &Artifact{h: h, m: m} }

// allowedModules are the import modules of a payload declaring requires.
func allowedModules(requires []handle.Kind) map[string]bool {
	ok := map[string]bool{wasi_snapshot_preview1.ModuleName: true, "brain": true}
	for _, k := range requires {
		ok["brain_"+string(k)] = true
	}
	return ok
}

// guestConfig is how every instance is configured: anonymous (so a compiled
// module instantiates many times), the reactor's _initialize as start
// function, real clocks and randomness, and nothing else — no files,
// environment or arguments. A guest's sleep (WASI poll_oneoff, the only
// WASI function that blocks: stdin is empty) ends when the running call's
// context is done or the instance is given up, so that an instance
// stopped at its deadline does not sleep on.
func guestConfig(in *instance) wazero.ModuleConfig {
	return wazero.NewModuleConfig().WithName("").WithStartFunctions("_initialize").
		WithSysWalltime().WithSysNanotime().WithNanosleep(interruptibleSleep(in)).WithRandSource(rand.Reader)
}

// interruptibleSleep runs on the goroutine of the instance's export call,
// which set in.cur.
func interruptibleSleep(in *instance) sys.Nanosleep {
	return func(ns int64) {
		if ns <= 0 {
			return
		}
		var done <-chan struct{}
		if in.cur != nil {
			done = in.cur.Done()
		}
		t := time.NewTimer(time.Duration(ns))
		defer t.Stop()
		select {
		case <-t.C:
		case <-done:
		case <-in.abort:
		}
	}
}

// errf returns an attach error with a code.
func errf(code protocol.Code, format string, args ...any) error {
	return protocol.Errorf(code, format, args...)
}
