package session

import (
	"encoding/json"
	"runtime"
	"sync"
	"weak"
)

// schemaCache shares compiled schemas by their text. A compiled schema
// costs tens of kilobytes (measured: the three example tools' schemas, 44
// KB a session), and the same few schemas are registered in every
// session: each client of a platform registers the same capabilities, and
// an environment exposes its tools in every session. The cache holds its
// schemas weakly: a schema nobody registers any more is collected, and its
// entry removed, so that a peer registering many distinct schemas costs
// only what its registrations hold.
type schemaCache struct {
	mu sync.Mutex
	m  map[string]weak.Pointer[Schema]
}

var schemas = schemaCache{m: map[string]weak.Pointer[Schema]{}}

// compile returns the compiled schema of raw, compiling it unless a live
// one of the same text exists. A schema that does not compile is not
// remembered.
func (c *schemaCache) compile(raw json.RawMessage) (*Schema, error) {
	if s := c.lookup(raw); s != nil {
		return s, nil
	}
	s, err := compileSchema(raw)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if wp, ok := c.m[string(raw)]; ok {
		if v := wp.Value(); v != nil {
			return v, nil // compiled meanwhile by another registration
		}
	}
	key := string(raw)
	c.m[key] = weak.Make(s)
	runtime.AddCleanup(s, c.forget, key)
	return s, nil
}

func (c *schemaCache) lookup(raw json.RawMessage) *Schema {
	c.mu.Lock()
	defer c.mu.Unlock()
	if wp, ok := c.m[string(raw)]; ok {
		return wp.Value()
	}
	return nil
}

// forget removes key's entry once its schema was collected (not when it
// was compiled again since: that entry is live).
func (c *schemaCache) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if wp, ok := c.m[key]; ok && wp.Value() == nil {
		delete(c.m, key)
	}
}

// size is the number of schemas in the cache (tests).
func (c *schemaCache) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
