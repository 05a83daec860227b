package host

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/brainrt/brain/internal/abi"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/tool"
)

// Artifact is a tool artifact: a manifest whose payload the host holds. It
// implements tool.Attachable.
type Artifact struct {
	h *Host
	m tool.Manifest
}

// Manifest returns the artifact's manifest.
func (a *Artifact) Manifest() tool.Manifest { return a.m }

// Compile verifies the payload and compiles it into the host's compilation
// cache without provisioning an instance, so that a later attach — in this
// process or another sharing the cache directory — loads the compiled code
// instead of compiling. A payload that does not compile is an error here,
// as it would fail the attach. ctx bounds the wait, as it bounds an
// attach's compile.
func (a *Artifact) Compile(ctx context.Context) error {
	if err := CheckRuntime(a.m); err != nil {
		return err
	}
	payload, err := a.verifiedPayload()
	if err != nil {
		return err
	}
	if ctx.Err() != nil { // ended already: compile nothing
		return stopped(ctx, "compiling the payload")
	}
	cm, err := a.h.compileWithin(ctx, a.m.Payload, payload)
	if err != nil {
		return err
	}
	return cm.Close(ctx)
}

// verifiedPayload returns the artifact's payload once it is known to match
// its identity: never compile bytes that are not what the manifest names.
func (a *Artifact) verifiedPayload() ([]byte, error) {
	a.h.mu.RLock()
	payload, ok := a.h.payloads[a.m.Payload]
	a.h.mu.RUnlock()
	if !ok {
		return nil, errf(protocol.CodeNotFound, "unknown payload identity %q: the host holds no such payload", a.m.Payload)
	}
	if got := Identity(payload); got != a.m.Payload {
		return nil, errf(protocol.CodeInvalidRequest, "payload does not match its identity %s (got %s)", a.m.Payload, got)
	}
	return payload, nil
}

// Provision verifies the payload, compiles it (or loads it from the cache,
// or shares the module a provisioned instance of the same payload on this
// host uses), checks that it imports host functions only for the handles it declares,
// and instantiates and initialises one instance with the bindings. Every
// failure is returned here, so that it fails the attach receipt.
func (a *Artifact) Provision(ctx context.Context, hs tool.Handles, bindings map[string]json.RawMessage) (tool.Instance, error) {
	if err := CheckRuntime(a.m); err != nil {
		return nil, err
	}
	payload, err := a.verifiedPayload()
	if err != nil {
		return nil, err
	}
	cm, err := a.h.acquireModule(ctx, a.m.Payload, payload)
	if err != nil {
		if c := protocol.OutcomeOf(err); c.Err != nil && (c.Err.Code == protocol.CodeTimeout || c.Err.Code == protocol.CodeCancelled) {
			return nil, err // the attach's deadline or cancel, not the payload's fault
		}
		return nil, errf(protocol.CodeInvalidRequest, "payload does not compile: %v", err)
	}
	provisioned := false
	defer func() {
		if !provisioned {
			_ = a.h.releaseModule(a.m.Payload)
		}
	}()
	allowed := allowedModules(a.m.Requires)
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		if !allowed[mod] {
			return nil, errf(protocol.CodeForbidden, "payload imports host function %s.%s, which belongs to a handle the tool does not declare (requires %v)", mod, name, a.m.Requires)
		}
	}
	if err := checkABIMarker(cm.ExportedFunctions()); err != nil {
		return nil, err
	}
	for _, name := range []string{abi.ExportAlloc, abi.ExportInit, abi.ExportInvoke} {
		if _, ok := cm.ExportedFunctions()[name]; !ok {
			return nil, errf(protocol.CodeInvalidRequest, "payload does not export %s: it was not built by brain build", name)
		}
	}
	if bindings == nil {
		bindings = map[string]json.RawMessage{}
	}
	bj, err := json.Marshal(bindings)
	if err != nil {
		return nil, fmt.Errorf("bindings: %w", err)
	}
	p := &pool{h: a.h, cm: cm, bindings: bj, sem: make(chan struct{}, a.h.opts.PoolSize), name: a.m.Name, payload: a.m.Payload,
		running: map[string]int{}}
	first, err := p.newInstance(ctx, newCallState(ctx, hs, nil))
	if err != nil {
		return nil, err
	}
	first.lin.release()
	p.fresh = append(p.fresh, first) // never used: the first session to call takes it
	provisioned = true
	a.h.mu.Lock()
	a.h.pools[p] = struct{}{}
	a.h.mu.Unlock()
	return p, nil
}

// CheckABIExports is the check attach makes of a payload's ABI marker,
// given the names of the functions it exports (build.Interface): nil for
// a payload of this host's ABI, else an error naming the payload's, the
// host's, and what to do. `brain inspect` makes it without attaching.
func CheckABIExports(names []string) error {
	m := make(map[string]struct{}, len(names))
	for _, n := range names {
		m[n] = struct{}{}
	}
	return checkABIMarker(m)
}

// checkABIMarker reads the ABI a payload was built for from the name of
// its version marker (abi.ExportVersion), without running it: a payload
// built for another ABI, or for ABI 1 (which had no marker), is refused at
// attach rather than failing every call.
func checkABIMarker[F any](exports map[string]F) error {
	if _, ok := exports[abi.ExportVersion]; ok {
		return nil
	}
	var others []string
	for name := range exports {
		if strings.HasPrefix(name, abi.ExportVersionPrefix) {
			others = append(others, strings.TrimPrefix(name, abi.ExportVersionPrefix))
		}
	}
	if len(others) > 0 {
		slices.Sort(others)
		return errf(protocol.CodeInvalidRequest, "the payload was built for ABI %s; this host implements ABI %d: rebuild it with `brain build`", strings.Join(others, ", "), abi.Version)
	}
	return errf(protocol.CodeInvalidRequest, "the payload exports no ABI version (%s): it was built for ABI 1 or by an older brain; this host implements ABI %d: rebuild it with `brain build`", abi.ExportVersion, abi.Version)
}
