package tool

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/brainrt/brain/handle"
	"github.com/brainrt/brain/protocol"
)

// Format is the manifest format this package reads and writes.
const Format = "tool/v1"

// MaxManifestBytes bounds a manifest file, <name>.tool.json: every host
// refuses a larger one, and `brain build` refuses to write one.
const MaxManifestBytes = 4 << 20

// HostingProvisioned is the only hosting mode: the environment provisions
// the tool once at attach.
const HostingProvisioned = "provisioned"

// Manifest is the tool/v1 manifest: everything an environment needs to know
// about a tool before attaching it. Binding values never appear in it; only
// the names and schemas of the bindings. See docs/manifest.md.
type Manifest struct {
	Format         string                     `json:"format"`
	Name           string                     `json:"name"`
	Description    string                     `json:"description"`
	InputSchema    json.RawMessage            `json:"input_schema"`
	OutputSchema   json.RawMessage            `json:"output_schema,omitempty"`
	Requires       []handle.Kind              `json:"requires"`
	BindingNames   []string                   `json:"binding_names"`
	BindingSchemas map[string]json.RawMessage `json:"binding_schemas,omitempty"`
	Hosting        string                     `json:"hosting"`
	// Payload is the identity of the payload, "sha256:<hex>", for tools
	// built into an artifact; empty for native tools.
	Payload string `json:"payload,omitempty"`
	// Runtime names what runs the payload and the version of its ABI,
	// "<kind>/<version>": "wasm/2" for WebAssembly payloads of ABI 2
	// (docs/abi.md). Every artifact names one; native tools have none. A
	// host refuses, at attach, a runtime it does not implement. "js/1"
	// ([RuntimeJS]) is a JavaScript payload, <name>.mjs.
	Runtime string `json:"runtime,omitempty"`
}

// RuntimeJS is the runtime of a JavaScript payload: an ES module, the
// bundle `brain build` makes of a TypeScript or JavaScript tool, hosted by
// package host/jshost (docs/tools-typescript.md).
const RuntimeJS = "js/1"

// Validate checks a manifest read from outside: the format, a name that
// can be a capability's ([protocol.ValidateName]: the name becomes one at
// attach), an object input schema, known handles without duplicates,
// bindings with schemas, and the hosting mode.
func (m *Manifest) Validate() error {
	switch {
	case m.Format == "":
		return fmt.Errorf("the manifest names no format: a brain artifact's names %q (made by `brain build`)", Format)
	case m.Format != Format:
		return fmt.Errorf("manifest format %q: this brain reads %q; rebuild the tool with this brain's `brain build`, or use a brain that reads %q", m.Format, Format, m.Format)
	case m.Name == "":
		return fmt.Errorf("manifest name is empty")
	}
	if err := protocol.ValidateName(m.Name); err != nil {
		return fmt.Errorf("manifest name %q is not a capability name: %w", m.Name, err)
	}
	switch {
	case len(m.InputSchema) == 0 || m.InputSchema[0] != '{':
		return fmt.Errorf("manifest %q: input_schema must be a JSON object", m.Name)
	case m.Hosting != HostingProvisioned:
		return fmt.Errorf("manifest %q: hosting %q, want %q", m.Name, m.Hosting, HostingProvisioned)
	}
	for i, k := range m.Requires {
		if _, err := handle.ParseKind(string(k)); err != nil {
			return fmt.Errorf("manifest %q: requires[%d]: %w", m.Name, i, err)
		}
		if slices.Index(m.Requires, k) != i {
			return fmt.Errorf("manifest %q: requires lists %q twice", m.Name, k)
		}
	}
	for _, b := range m.BindingNames {
		if _, ok := m.BindingSchemas[b]; !ok {
			return fmt.Errorf("manifest %q: binding %q has no schema", m.Name, b)
		}
	}
	return nil
}
