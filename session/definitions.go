package session

import (
	"reflect"
	"runtime"
	"sync"
	"weak"

	"github.com/brainrt/brain/protocol"
)

// Every session registers the same few definitions — the environment's
// tools, a platform's client capabilities (the built-in
// __capabilities.list is made once: registry.go) — and a node holds
// thousands of sessions. A registration therefore keeps a pointer to one
// shared copy of its definition (248 bytes and its slices), and a
// capability_register event of one
// capability carries that same copy as its one-element slice, instead of
// a copy each: about 2 KiB less heap an idle session with four tools
// (docs/performance.md, "Scale").
//
// A shared definition is never modified: prepare builds it before it is
// shared, and everything after reads it. Events are read-only once
// emitted, so an event may alias it too.

// definitions is the process's table of shared definitions.
var definitions = definitionTable{byRev: map[string]weak.Pointer[[1]protocol.Capability]{}}

// definitionTable maps a revision to the definition shared under it, for
// as long as a registration or an event holds it.
type definitionTable struct {
	mu    sync.Mutex
	byRev map[string]weak.Pointer[[1]protocol.Capability]
}

// share returns the shared definition equal to c, whose revision is rev
// (revisionOf): the one already shared, or else a copy of c, now shared.
// A revision digests c's JSON, which does not tell every definition apart
// (a schema's spacing, a nil slice from an empty one); one shared under
// the same revision that is not equal in every field is left as it is,
// and c gets a copy of its own.
//
// c's schemas are a compiled schema's own text (CompileSchema), which is
// never modified: the copy keeps them rather than copying them again.
func (t *definitionTable) share(rev string, c *protocol.Capability) *[1]protocol.Capability {
	t.mu.Lock()
	defer t.mu.Unlock()
	if w, ok := t.byRev[rev]; ok {
		if def := w.Value(); def != nil && reflect.DeepEqual(&def[0], c) {
			return def
		} else if def != nil {
			return own(c) // a twin under the same revision: not shared
		}
	}
	def := own(c)
	w := weak.Make(def)
	t.byRev[rev] = w
	runtime.AddCleanup(def, t.forget, sharedRev{rev, w})
	return def
}

// own returns a copy of c that shares nothing with it but its schemas.
func own(c *protocol.Capability) *[1]protocol.Capability {
	v := *c
	v.InputSchema, v.OutputSchema = nil, nil // not cloned: kept below
	v = cloneCapability(v)
	v.InputSchema, v.OutputSchema = c.InputSchema, c.OutputSchema
	return &[1]protocol.Capability{v}
}

// sharedRev names a table entry for its cleanup.
type sharedRev struct {
	rev string
	w   weak.Pointer[[1]protocol.Capability]
}

// forget drops the entry of a definition nothing holds any more — unless
// the revision has been shared again since, under a new definition.
func (t *definitionTable) forget(e sharedRev) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byRev[e.rev] == e.w {
		delete(t.byRev, e.rev)
	}
}
