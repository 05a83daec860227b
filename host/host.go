package host

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/tool"
)

// Options configure a [Host]. A nil *Options means the defaults.
type Options struct {
	// CacheDir holds compiled code, keyed by module; "" compiles in memory
	// only. It must be private to the host (compiled code is trusted).
	CacheDir string
	// MemoryLimitMiB bounds each instance's linear memory. Default 128.
	MemoryLimitMiB int
	// PoolSize bounds the instances per attached artifact, and so its
	// concurrent calls. Default 4.
	PoolSize int
	// Logger receives the host's logs; nil discards them.
	Logger *slog.Logger
}

// Host compiles and runs artifacts. It is safe for concurrent use.
type Host struct {
	opts Options
	log  *slog.Logger
	rt   wazero.Runtime

	mu       sync.RWMutex
	payloads map[string][]byte // identity → verified bytes
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
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	// WithCloseOnContextDone is what stops a guest spinning past its
	// deadline. It is not free: wazero then calls into Go at every loop
	// back-edge, which makes a Go guest's JSON echo about ten times slower
	// (docs/RATIONALE.md, "Why do artifacts pay for termination checks?").
	cfg := wazero.NewRuntimeConfig().
		WithMemoryLimitPages(uint32(o.MemoryLimitMiB) * 16). // 64 KiB pages
		WithCloseOnContextDone(true)
	if o.CacheDir != "" {
		if err := os.MkdirAll(o.CacheDir, 0o700); err != nil {
			return nil, fmt.Errorf("host: cache dir: %w", err)
		}
		cache, err := wazero.NewCompilationCacheWithDir(o.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("host: cache dir: %w", err)
		}
		cfg = cfg.WithCompilationCache(cache)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	h := &Host{opts: o, log: o.Logger, rt: rt, payloads: map[string][]byte{}}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("host: wasi: %w", err)
	}
	if err := instantiateHostModules(ctx, rt); err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("host: host modules: %w", err)
	}
	return h, nil
}

// Close closes every instance and the runtime.
func (h *Host) Close(ctx context.Context) error { return h.rt.Close(ctx) }

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
	b, err := os.ReadFile(path)
	if err != nil {
		return m, nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return m, nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := m.Validate(); err != nil {
		return m, nil, fmt.Errorf("%s: %w", path, err)
	}
	if m.Payload == "" {
		return m, nil, fmt.Errorf("%s: manifest has no payload identity", path)
	}
	payloadPath := strings.TrimSuffix(path, ".tool.json") + ".wasm"
	payload, err := os.ReadFile(payloadPath)
	if err != nil {
		return m, nil, fmt.Errorf("%s: payload: %w", path, err)
	}
	if got := Identity(payload); got != m.Payload {
		return m, nil, fmt.Errorf("%s does not match its identity: the manifest names %s, the bytes are %s", payloadPath, m.Payload, got)
	}
	return m, payload, nil
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
// environment or arguments.
func guestConfig() wazero.ModuleConfig {
	return wazero.NewModuleConfig().WithName("").WithStartFunctions("_initialize").
		WithSysWalltime().WithSysNanotime().WithSysNanosleep().WithRandSource(rand.Reader)
}

// errf returns an attach error with a code.
func errf(code protocol.Code, format string, args ...any) error {
	return protocol.Errorf(code, format, args...)
}
