//go:build !wasip1

package tool

import (
	"encoding/json"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
)

// schemaForType derives the JSON Schema of t with jsonschema-go; description,
// when set, replaces the top-level description.
func schemaForType(t reflect.Type, description string) (json.RawMessage, error) {
	s, err := jsonschema.ForType(t, nil)
	if err != nil {
		return nil, err
	}
	if description != "" {
		s.Description = description
	}
	return json.Marshal(s)
}
