package jshost

import (
	"bytes"
	"context"
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

	"github.com/brainrt/brain/internal/regularfile"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/tool"
)

// Options configure a [Host]. A nil *Options means the defaults.
type Options struct {
	// CacheDir holds compiled bytecode, one sealed entry per payload
	// identity; "" keeps it in memory only. The host refuses a directory
	// group or others can write.
	CacheDir string
	// MemoryLimitMiB caps each realm's heap. Default 64.
	MemoryLimitMiB int
	// InitTimeout bounds evaluating the module and the tool's init, at
	// attach and for each new session, within the deadline of the context
	// given. Default 10 s.
	InitTimeout time.Duration
	// MaxSessions bounds the realms one attached tool keeps; past it the
	// least recently used idle realm is freed (its session starts afresh
	// at its next call). Default 256.
	MaxSessions int
	// RealmsMemoryMiB bounds the heap the host's realms hold together,
	// every tool's: past it the least recently used realms not running a
	// call are freed (their sessions start afresh at their next call), as
	// past MaxSessions. A realm keeps what its session's calls left in it
	// (up to MemoryLimitMiB), and MaxSessions realms of every tool could
	// hold that much each: a tenant's sessions held 30 MiB each in a
	// probe. Default 1024 (1 GiB).
	RealmsMemoryMiB int
	// Logger receives the host's logs; nil discards them.
	Logger *slog.Logger
}

// Host compiles and runs JavaScript payloads. It is safe for concurrent use.
type Host struct {
	opts  Options
	log   *slog.Logger
	cache *codeCache // nil without a CacheDir

	mu       sync.Mutex
	payloads map[string][]byte  // identity → verified bytes
	compiled map[string][]byte  // identity → bytecode
	pools    map[*pool]struct{} // provisioned, not closed: whose realms the budget counts

	realmBytes atomic.Int64  // the heap of every realm, as last measured (after its latest call)
	clock      atomic.Uint64 // orders realms' last calls across tools, for the budget's LRU
}

// New returns a host.
func New(opts *Options) (*Host, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MemoryLimitMiB <= 0 {
		o.MemoryLimitMiB = 64
	}
	if o.InitTimeout <= 0 {
		o.InitTimeout = 10 * time.Second
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = 256
	}
	if o.RealmsMemoryMiB <= 0 {
		o.RealmsMemoryMiB = 1024
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Host{opts: o, log: o.Logger, payloads: map[string][]byte{}, compiled: map[string][]byte{}, pools: map[*pool]struct{}{}}
	if o.CacheDir != "" {
		c, err := openCache(o.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("jshost: %w", err)
		}
		h.cache = c
	}
	return h, nil
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

// Bounds on what ReadArtifact reads (and tool.MaxManifestBytes).
const (
	// MaxPayloadBytes bounds a JavaScript payload, <name>.mjs: 16 MiB.
	// ReadArtifact refuses a larger one, and `brain build` refuses to
	// write one.
	MaxPayloadBytes = 16 << 20 // a bundle with zod is about 0.5 MB
)

// PayloadPath returns where the payload of the manifest at path is:
// <name>.mjs beside <name>.tool.json.
func PayloadPath(manifestPath string) string {
	return strings.TrimSuffix(manifestPath, ".tool.json") + ".mjs"
}

// ReadArtifact reads a JavaScript artifact — <name>.tool.json with runtime
// "js/1" and its payload <name>.mjs beside it — strictly: unknown manifest
// fields, an invalid manifest, another runtime and a payload that does not
// match its identity are errors.
func ReadArtifact(path string) (tool.Manifest, []byte, error) {
	var m tool.Manifest
	if !strings.HasSuffix(path, ".tool.json") {
		return m, nil, fmt.Errorf("%s: an artifact is named <name>.tool.json", path)
	}
	b, err := regularfile.Read(path, tool.MaxManifestBytes)
	if err != nil {
		return m, nil, err
	}
	if m, err = DecodeManifest(b); err != nil {
		return m, nil, fmt.Errorf("%s: %w", path, err)
	}
	payloadPath := PayloadPath(path)
	payload, err := regularfile.Read(payloadPath, MaxPayloadBytes)
	if err != nil {
		return m, nil, fmt.Errorf("%s: payload: %w", path, err)
	}
	if got := Identity(payload); got != m.Payload {
		return m, nil, fmt.Errorf("%s does not match its identity: the manifest names %s, the bytes are %s", payloadPath, m.Payload, got)
	}
	return m, payload, nil
}

// DecodeManifest decodes the tool.json of a JavaScript artifact strictly.
func DecodeManifest(b []byte) (tool.Manifest, error) {
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
	switch {
	case m.Runtime == tool.RuntimeJS:
	case strings.HasPrefix(m.Runtime, "js/"):
		return tool.Manifest{}, fmt.Errorf("artifact %q was built for runtime %s; this brain's JavaScript host implements %s: rebuild it with `brain build`, or run it with a brain that implements %s", m.Name, m.Runtime, tool.RuntimeJS, m.Runtime)
	default:
		return tool.Manifest{}, fmt.Errorf("manifest %q: runtime %q, want %q: this host runs JavaScript payloads only", m.Name, m.Runtime, tool.RuntimeJS)
	}
	if !isIdentity(m.Payload) {
		return tool.Manifest{}, fmt.Errorf("payload identity %q is not sha256:<64 lower-case hex digits>", m.Payload)
	}
	return m, nil
}

func isIdentity(s string) bool {
	h, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil && strings.ToLower(h) == h
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

// Artifact is a JavaScript tool artifact. It implements tool.Attachable.
type Artifact struct {
	h *Host
	m tool.Manifest
}

// Manifest returns the artifact's manifest.
func (a *Artifact) Manifest() tool.Manifest { return a.m }

// Compile verifies the payload and compiles it to bytecode into the host's
// cache (and the host's memory) without making a realm, so that a later
// attach — in this process or another sharing the cache directory — does
// not compile. A payload that does not compile is an error here, as it
// would fail the attach.
func (a *Artifact) Compile(ctx context.Context) error {
	payload, err := a.verifiedPayload()
	if err != nil {
		return err
	}
	_, err = a.h.bytecode(ctx, a.m.Payload, payload)
	return err
}

// verifiedPayload returns the artifact's payload once it is known to match
// its identity: never compile bytes that are not what the manifest names.
func (a *Artifact) verifiedPayload() ([]byte, error) {
	a.h.mu.Lock()
	payload, ok := a.h.payloads[a.m.Payload]
	a.h.mu.Unlock()
	if !ok {
		return nil, protocol.Errorf(protocol.CodeNotFound, "unknown payload identity %q: the host holds no such payload", a.m.Payload)
	}
	if got := Identity(payload); got != a.m.Payload {
		return nil, protocol.Errorf(protocol.CodeInvalidRequest, "payload does not match its identity %s (got %s)", a.m.Payload, got)
	}
	return payload, nil
}

// Provision verifies the payload, compiles it (or takes its bytecode from
// the cache), and makes the first realm: the module evaluated, its tool
// checked against the manifest, and its init run with the bindings and
// the attach's handles. Every failure is returned here, so that it fails
// the attach receipt.
func (a *Artifact) Provision(ctx context.Context, hs tool.Handles, bindings map[string]json.RawMessage) (tool.Instance, error) {
	payload, err := a.verifiedPayload()
	if err != nil {
		return nil, err
	}
	code, err := a.h.bytecode(ctx, a.m.Payload, payload)
	if err != nil {
		return nil, err
	}
	if bindings == nil {
		bindings = map[string]json.RawMessage{}
	}
	bj, err := json.Marshal(bindings)
	if err != nil {
		return nil, fmt.Errorf("bindings: %w", err)
	}
	p := newPool(a.h, a.m, code, bj)
	first, err := p.newInstance(ctx, hs, nil)
	if err != nil {
		return nil, err
	}
	p.spare = first
	return p, nil
}
