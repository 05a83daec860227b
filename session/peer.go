package session

import (
	"fmt"

	"github.com/brainrt/brain/protocol"
)

// PeerSide is which side of a session a party speaks for.
type PeerSide string

// The sides that register and answer capabilities.
const (
	// SideClient is the host platform (web app, IDE).
	SideClient PeerSide = "client"
	// SideApp is an embedded app; a Peer of this side carries its app id.
	SideApp PeerSide = "app"
	// SideRuntime is the agent runtime and trusted platform code running in
	// the kernel's process: it registers agent-side capabilities with Go
	// handlers.
	SideRuntime PeerSide = "runtime"
	// SideEnvironment is an environment running as its own process
	// (`brain env`): it registers agent-side tools over a connection and
	// answers their calls with capability_result, like a client does.
	SideEnvironment PeerSide = "environment"
	// SideOperator is a person operating the kernel (the console): it may
	// approve or reject calls, invoke capabilities as the user and cancel
	// calls, and it sees every event of every session, like the client. It
	// may not register or deregister capabilities, nor answer calls with
	// capability_result.
	SideOperator PeerSide = "operator"
	// SideModel is the model side: an agent driver or MCP host, which lists
	// and invokes the llm audience and nothing else. It never decides an
	// approval, registers, answers or cancels a call, or reads the
	// session's events; a frame from it is refused whatever it carries.
	SideModel PeerSide = "model"
)

// Peer identifies who is talking to a session. The transport decides it from
// the connection's credentials, never from what a frame claims.
//
// Side and AppID are the party: who owns a registration and answers its
// calls (see [Peer.Same]). Name is the authenticated identity behind the
// connection (the token's name), recorded as who decided an approval; it
// does not change what the peer may do.
type Peer struct {
	Side  PeerSide
	AppID string
	Name  string
}

// Predefined peers.
var (
	Client      = Peer{Side: SideClient}
	Runtime     = Peer{Side: SideRuntime}
	Environment = Peer{Side: SideEnvironment}
)

// App returns the peer of the embedded app id.
func App(id string) Peer { return Peer{Side: SideApp, AppID: id} }

// Operator returns the operator peer authenticated as name.
func Operator(name string) Peer { return Peer{Side: SideOperator, Name: name} }

// Same reports whether p and q are the same party: the same side and app
// id, whatever their names. Ownership of registrations and calls follows
// the party.
func (p Peer) Same(q Peer) bool { return p.Side == q.Side && p.AppID == q.AppID }

// String names the peer for messages and logs: its side (and app id), then
// its name in parentheses when it has one.
func (p Peer) String() string {
	s := string(p.Side)
	if p.Side == SideApp {
		s = "app " + p.AppID
	}
	if p.Name != "" {
		s += " (" + p.Name + ")"
	}
	return s
}

// checkTrust applies the trust rules of DESIGN.md: the registering side must
// match the origin kind, and the capability's side must be the registering
// peer's own, since that peer is the one that will answer its calls.
//
//	client  → origin client, side client
//	app X   → origin app X, side app
//	runtime → origin agent, flow, skill, mcp, connector or mount; side agent
//	environment → origin agent; side agent (answered over its connection)
//	framework is built in: nobody registers it
func checkTrust(p Peer, c *protocol.Capability) error {
	switch p.Side {
	case SideClient:
		if c.Origin.Kind != protocol.OriginClient {
			return fmt.Errorf("a client may only register origin kind %q, not %q", protocol.OriginClient, c.Origin.Kind)
		}
		if c.Side != protocol.SideClient {
			return fmt.Errorf("a client may only register side %q, not %q", protocol.SideClient, c.Side)
		}
	case SideApp:
		if c.Origin.Kind != protocol.OriginApp || c.Origin.ID != p.AppID {
			return fmt.Errorf("app %q may only register origin {kind: app, appId: %q}, not %s", p.AppID, p.AppID, c.Origin)
		}
		if c.Side != protocol.SideApp {
			return fmt.Errorf("an app may only register side %q, not %q", protocol.SideApp, c.Side)
		}
	case SideEnvironment:
		if c.Origin.Kind != protocol.OriginAgent || c.Side != protocol.SideAgent {
			return fmt.Errorf("an environment may only register origin kind %q with side %q", protocol.OriginAgent, protocol.SideAgent)
		}
	case SideOperator:
		return fmt.Errorf("an operator may not register capabilities")
	case SideModel:
		return fmt.Errorf("the model side may not register capabilities")
	case SideRuntime:
		switch c.Origin.Kind {
		case protocol.OriginAgent, protocol.OriginFlow, protocol.OriginSkill, protocol.OriginMCP, protocol.OriginConnector, protocol.OriginMount:
		default:
			return fmt.Errorf("the runtime may not register origin kind %q", c.Origin.Kind)
		}
		if c.Side != protocol.SideAgent {
			return fmt.Errorf("the runtime may only register side %q, not %q", protocol.SideAgent, c.Side)
		}
	default:
		return fmt.Errorf("unknown peer side %q", p.Side)
	}
	return nil
}
