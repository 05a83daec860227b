package protocol

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// OriginKind says who registered a capability.
type OriginKind string

// The origin kinds of the spec's CapabilityOrigin.
const (
	OriginFramework OriginKind = "framework"
	OriginClient    OriginKind = "client"
	OriginAgent     OriginKind = "agent"
	OriginFlow      OriginKind = "flow"
	OriginSkill     OriginKind = "skill"
	OriginMCP       OriginKind = "mcp"
	OriginConnector OriginKind = "connector"
	OriginMount     OriginKind = "mount"
	OriginApp       OriginKind = "app"
)

// originIDField maps each kind to the name of its id field; "" means the
// variant carries no id.
var originIDField = map[OriginKind]string{
	OriginFramework: "",
	OriginClient:    "",
	OriginAgent:     "",
	OriginFlow:      "flowId",
	OriginSkill:     "skillId",
	OriginMCP:       "serverId",
	OriginConnector: "connectorId",
	OriginMount:     "mountId",
	OriginApp:       "appId",
}

// Origin is the spec's CapabilityOrigin, a union discriminated by kind. ID
// holds the variant's id (flowId, skillId, serverId, connectorId, mountId or
// appId) and is empty for framework, client and agent.
//
//	protocol.Origin{Kind: protocol.OriginApp, ID: "calendar"}
//	// {"kind":"app","appId":"calendar"}
type Origin struct {
	Kind OriginKind
	ID   string
}

// IDField returns the JSON name of the kind's id field ("" when it has none)
// and whether the kind is known.
func (k OriginKind) IDField() (string, bool) {
	f, ok := originIDField[k]
	return f, ok
}

// String returns the origin in the log taxonomy's form: "app/calendar", or
// the bare kind when it has no id.
func (o Origin) String() string {
	if o.ID == "" {
		return string(o.Kind)
	}
	return string(o.Kind) + "/" + o.ID
}

// Validate checks that the kind is known and that the id is present exactly
// when the variant has one.
func (o Origin) Validate() error {
	field, ok := originIDField[o.Kind]
	switch {
	case !ok:
		return fmt.Errorf("origin.kind: unknown kind %q", o.Kind)
	case field == "" && o.ID != "":
		return fmt.Errorf("origin: kind %q carries no id, got %q", o.Kind, o.ID)
	case field != "" && o.ID == "":
		return fmt.Errorf("origin.%s: required for kind %q", field, o.Kind)
	}
	return nil
}

// MarshalJSON encodes the variant with its own id field.
func (o Origin) MarshalJSON() ([]byte, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	field := originIDField[o.Kind]
	k, _ := json.Marshal(string(o.Kind))
	if field == "" {
		return append(append([]byte(`{"kind":`), k...), '}'), nil
	}
	id, _ := json.Marshal(o.ID)
	b := make([]byte, 0, 24+len(field)+len(k)+len(id))
	b = append(b, `{"kind":`...)
	b = append(b, k...)
	b = append(b, `,"`...)
	b = append(b, field...)
	b = append(b, `":`...)
	b = append(b, id...)
	return append(b, '}'), nil
}

// UnmarshalJSON decodes strictly: an unknown kind, a missing or empty id,
// or a field the variant does not have are errors naming the field.
func (o *Origin) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if _, err := objectKeys(data); err != nil {
		return fmt.Errorf("origin: %w", err)
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("origin: %w", err)
	}
	kindRaw, ok := raw["kind"]
	if !ok {
		return fmt.Errorf("origin.kind: missing")
	}
	var kind OriginKind
	if err := json.Unmarshal(kindRaw, &kind); err != nil {
		return fmt.Errorf("origin.kind: want a string")
	}
	field, known := originIDField[kind]
	if !known {
		return fmt.Errorf("origin.kind: unknown kind %q", kind)
	}
	// In sorted order, so that an origin with several unknown fields
	// gets the same error every time (map order is random).
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		if k != "kind" && k != field {
			return fmt.Errorf("origin.%s: not a field of kind %q", k, kind)
		}
	}
	out := Origin{Kind: kind}
	if field != "" {
		idRaw, ok := raw[field]
		if !ok {
			return fmt.Errorf("origin.%s: required for kind %q", field, kind)
		}
		if err := json.Unmarshal(idRaw, &out.ID); err != nil {
			return fmt.Errorf("origin.%s: want a string", field)
		}
		if out.ID == "" {
			return fmt.Errorf("origin.%s: must not be empty", field)
		}
	}
	*o = out
	return nil
}
