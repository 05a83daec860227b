package protocol

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// RenderTarget is a placement a render component supports.
type RenderTarget string

// The render targets of the spec.
const (
	TargetChat           RenderTarget = "chat"
	TargetPreview        RenderTarget = "preview"
	TargetModal          RenderTarget = "modal"
	TargetInputExtension RenderTarget = "input-extension"
)

// RenderSourceKind discriminates a [RenderSource].
type RenderSourceKind string

// The render source kinds of the spec.
const (
	SourceWebComponent RenderSourceKind = "web-component"
	SourceIframe       RenderSourceKind = "iframe"
)

// RenderSpec is the render contract of a capability that draws UI.
type RenderSpec struct {
	Source       RenderSource   `json:"source"`
	Targets      []RenderTarget `json:"targets"`
	Fallback     string         `json:"fallback,omitempty"`
	Streaming    bool           `json:"streaming,omitempty"`
	Interactions []string       `json:"interactions,omitzero"`
}

var renderSpecFields, renderSpecRequired = jsonFields(reflect.TypeOf(RenderSpec{}))

// UnmarshalJSON decodes strictly (unknown or missing fields are errors).
func (r *RenderSpec) UnmarshalJSON(data []byte) error {
	if err := checkFields(data, renderSpecFields, renderSpecRequired...); err != nil {
		return fmt.Errorf("render: %w", err)
	}
	type plain RenderSpec
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*r = RenderSpec(p)
	return nil
}

// RenderSource is where a rendered component lives: a union discriminated
// by kind. TagName is set only for web components.
type RenderSource struct {
	Kind    RenderSourceKind
	URL     string
	TagName string
}

type webComponentJSON struct {
	Kind    RenderSourceKind `json:"kind"`
	URL     string           `json:"url"`
	TagName string           `json:"tagName"`
}

type iframeJSON struct {
	Kind RenderSourceKind `json:"kind"`
	URL  string           `json:"url"`
}

// MarshalJSON encodes the variant's own fields.
func (s RenderSource) MarshalJSON() ([]byte, error) {
	switch s.Kind {
	case SourceWebComponent:
		return json.Marshal(webComponentJSON(s))
	case SourceIframe:
		if s.TagName != "" {
			return nil, fmt.Errorf("render.source.tagName: not a field of kind %q", s.Kind)
		}
		return json.Marshal(iframeJSON{s.Kind, s.URL})
	default:
		return nil, fmt.Errorf("render.source.kind: unknown kind %q", s.Kind)
	}
}

// UnmarshalJSON decodes strictly: an unknown kind, a missing url or tagName,
// or a field the variant does not have are errors naming the field.
func (s *RenderSource) UnmarshalJSON(data []byte) error {
	keys, err := objectKeys(data)
	if err != nil {
		return fmt.Errorf("render.source: %w", err)
	}
	var w webComponentJSON
	if err := json.Unmarshal(data, &w); err != nil {
		return fmt.Errorf("render.source: %w", err)
	}
	if !keys["kind"] {
		return fmt.Errorf("render.source.kind: missing")
	}
	var allowed map[string]bool
	switch w.Kind {
	case SourceWebComponent:
		allowed = fieldSet("kind", "url", "tagName")
	case SourceIframe:
		allowed = fieldSet("kind", "url")
	default:
		return fmt.Errorf("render.source.kind: unknown kind %q", w.Kind)
	}
	// In sorted order, so that a source with several faults gets the same
	// error every time (map order is random).
	for _, k := range sortedKeys(keys) {
		if !allowed[k] {
			return fmt.Errorf("render.source.%s: not a field of kind %q", k, w.Kind)
		}
	}
	for _, k := range sortedKeys(allowed) {
		if !keys[k] {
			return fmt.Errorf("render.source.%s: required for kind %q", k, w.Kind)
		}
	}
	*s = RenderSource(w)
	return nil
}
