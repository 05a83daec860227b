package session

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// TestSchemaCacheShares: the same schema text compiles once while
// something holds it — every session registering it shares one — and a
// schema nobody holds any more leaves the cache once collected, so that
// many distinct schemas cost only what their registrations hold.
func TestSchemaCacheShares(t *testing.T) {
	raw := json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"n":{"type":"integer"}},"title":"cache-test-%d"}`, time.Now().UnixNano()))
	a, err := CompileSchema(raw)
	if err != nil {
		t.Fatal(err)
	}
	b, err := CompileSchema(append(json.RawMessage(nil), raw...))
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("the same schema text compiled twice while held")
	}
	if _, err := CompileSchema(json.RawMessage(`{"type":`)); err == nil {
		t.Fatal("a schema that is not JSON compiled")
	}
	before := schemas.size()
	if schemas.lookup(raw) == nil {
		t.Fatal("a held schema is not in the cache")
	}
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	// Collected and forgotten: the cleanup runs after a collection, on
	// the runtime's own goroutine; polled, bounded.
	for deadline := time.Now().Add(10 * time.Second); schemas.size() >= before; {
		if time.Now().After(deadline) {
			t.Fatalf("the cache still holds %d schemas (%d before the last was dropped)", schemas.size(), before)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // polling a count, bounded
	}
	if schemas.lookup(raw) != nil {
		t.Fatal("a collected schema is still in the cache")
	}
}
