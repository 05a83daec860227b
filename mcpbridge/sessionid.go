package mcpbridge

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCP session ids that carry their own state.
//
// Why: go-sdk's stateful Streamable HTTP keeps an MCP session in the memory
// of the process that initialized it, so after a handover (the brain
// session's lease moved to another node, or brain restarted) the client's
// next request — a tools/call, the GET that holds its notification stream —
// met 404 "session not found", and MCP clients of the revisions hosts speak
// (2025-06-18, 2025-11-25) do not initialize again by themselves. The state
// an MCP session needs is small and fixed at initialize: the brain session
// it belongs to, the protocol version, the client's capabilities (does it
// take elicitation, the MCP Apps extension) and its name. The id carries
// it, so that every node, and a restarted one, rebuilds the session from
// the id alone (the SDK's RestoreSession, a patch: BRAIN-PATCH.md) and
// nothing has to be stored or shared. The id is not a credential: every
// request is authenticated by its bearer token and authorized for the
// brain session by the kernel before it reaches MCP, and whatever state an
// id claims, its bearer could have claimed as well in an initialize. Its
// random part keeps ids unique and unguessable, so that one client cannot
// attach to another's notification stream.

// sessionIDPrefix versions the encoding of an MCP session id.
const sessionIDPrefix = "b1."

// maxSessionIDBytes bounds an id, within what HTTP clients and proxies
// accept as a header: an id longer than this is never issued, and one
// presented is unknown.
const maxSessionIDBytes = 4096

// idState is what an MCP session id carries.
type idState struct {
	Session      string                  `json:"s"`
	Version      string                  `json:"v,omitempty"`
	Capabilities *mcp.ClientCapabilities `json:"c,omitempty"`
	Client       *mcp.Implementation     `json:"i,omitempty"`
}

// newSessionID names a new MCP session of brain session sessionID opened
// by initialize params p.
func newSessionID(sessionID string, p *mcp.InitializeParams) string {
	st := idState{Session: sessionID}
	if p != nil {
		st.Version, st.Capabilities = p.ProtocolVersion, p.Capabilities
		if p.ClientInfo != nil {
			st.Client = &mcp.Implementation{Name: p.ClientInfo.Name, Version: p.ClientInfo.Version}
		}
	}
	id := encodeSessionID(&st)
	if len(id) > maxSessionIDBytes && st.Capabilities != nil {
		// Keep what brain acts on: elicitation and the MCP Apps extension.
		c := &mcp.ClientCapabilities{Elicitation: st.Capabilities.Elicitation}
		if ui, ok := st.Capabilities.Extensions[uiExtension]; ok {
			c.Extensions = map[string]any{uiExtension: ui}
		}
		st.Capabilities, st.Client = c, nil
		id = encodeSessionID(&st)
	}
	if len(id) > maxSessionIDBytes {
		st.Capabilities = nil
		id = encodeSessionID(&st)
	}
	return id
}

func encodeSessionID(st *idState) string {
	state, _ := json.Marshal(st) // plain data decoded from JSON: it encodes
	return sessionIDPrefix + rand.Text() + "." + base64.RawURLEncoding.EncodeToString(state)
}

// decodeSessionID returns the state of an MCP session id, and false for an
// id that is not one of brain's.
func decodeSessionID(id string) (*idState, bool) {
	if len(id) > maxSessionIDBytes {
		return nil, false
	}
	rest, ok := strings.CutPrefix(id, sessionIDPrefix)
	if !ok {
		return nil, false
	}
	nonce, enc, ok := strings.Cut(rest, ".")
	if !ok || len(nonce) < 16 {
		return nil, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return nil, false
	}
	var st idState
	if err := json.Unmarshal(raw, &st); err != nil || st.Session == "" {
		return nil, false
	}
	return &st, true
}

// restoreState is the SDK session state of an MCP session id of brain
// session sessionID: nil when the id is not one of brain's or names
// another brain session, so that an id obtained on one session's endpoint
// is unknown (404) on another's.
func restoreState(sessionID, id string) *mcp.ServerSessionState {
	st, ok := decodeSessionID(id)
	if !ok || st.Session != sessionID {
		return nil
	}
	// The id holds the version the client asked for; the session goes
	// on with the one initialize negotiated from it, as it did before —
	// never the restoring request's Mcp-Protocol-Version, which that
	// request is served by (as on a live session) and which the SDK may
	// go on to refuse: a restore by a request claiming 2026-07-28 gave
	// the session that revision's framing for good.
	st.Version = negotiated(st.Version)
	caps := st.Capabilities
	if caps == nil {
		caps = &mcp.ClientCapabilities{}
	}
	return &mcp.ServerSessionState{
		InitializeParams:          &mcp.InitializeParams{ProtocolVersion: st.Version, Capabilities: caps, ClientInfo: st.Client},
		InitializedParams:         &mcp.InitializedParams{},
		NegotiatedProtocolVersion: st.Version,
		LogLevel:                  "info",
	}
}

// negotiated is the protocol version an initialize asking for version
// negotiates (the SDK's rule): version itself when the SDK supports it and
// it is not the 2026-07-28 revision or later, which has no initialize;
// else the latest before that. A forged id claims no version an
// initialize would not have given (a probe's id claimed 2026-07-28 and
// was served as that).
func negotiated(version string) string {
	supported := mcp.SupportedProtocolVersions()
	if version < "2026-07-28" && slices.Contains(supported, version) {
		return version
	}
	for _, v := range supported {
		if v < "2026-07-28" {
			return v
		}
	}
	return "2025-11-25"
}
