//go:build wasip1

package tool

import (
	"encoding/json"
	"reflect"
)

// schemaForType returns an empty schema inside a WebAssembly guest. Why:
// the host validates input against the manifest's schemas, which brain
// build derived natively; a guest never needs them, and linking
// jsonschema-go into every payload made it about 2 MB larger and slower to
// compile and start.
func schemaForType(reflect.Type, string) (json.RawMessage, error) {
	return json.RawMessage(`{}`), nil
}
