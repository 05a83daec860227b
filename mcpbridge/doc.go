// Package mcpbridge connects brain to the Model Context Protocol, both ways.
//
// # Export: a session as an MCP server
//
// [NewServer] serves the llm-audience capabilities of a [session.Session] as
// MCP tools, so that any MCP host can drive the session. Every tools/call
// runs the session's bridge as the LLM would through the Go API
// (session.Session.Invoke with invoker llm): audience, input validation,
// approval, render events, timeouts and cancellation behave exactly the
// same. A value outcome becomes a text content holding the JSON (and
// structuredContent when the value is an object); an error outcome becomes a
// result with isError set whose text is "<code>: <message>", so that the
// model reads what went wrong. The tool list follows the registry: a
// capability registered or deregistered later reaches connected clients as
// notifications/tools/list_changed.
//
//	srv := mcpbridge.NewServer(s, nil)
//	defer srv.Close()
//	err := srv.MCP().Run(ctx, &mcp.StdioTransport{})
//
// [Handler] serves one Streamable HTTP endpoint for many sessions, chosen
// per request. Its MCP session ids carry their own state, so any node of a
// cluster (or a restarted kernel) serves an MCP session another opened. A
// caller that goes away (notifications/cancelled, its HTTP request ended)
// cancels its call; closing the export never waits for a call. A call's
// progress reaches a caller that sent a progressToken; with
// [ServerOptions.Elicitation] a host that announced elicitation is asked to
// approve its own calls; render capabilities are offered as MCP Apps
// (ui:// resources) to hosts that announced the extension.
//
// # A session over stdio
//
// [Relay] bridges a host on stdio to a session's endpoint, message for
// message (`brain mcp --url`).
//
// # Export: an environment over stdio
//
// [ServeEnvironmentStdio] serves the tools attached to a kernel.Environment
// over newline-delimited JSON-RPC on a pair of streams, which is what an MCP
// host expects of a server it launches (`brain mcp`).
//
// # Import: an external MCP server as capabilities
//
// [Import] connects to an MCP server — a command speaking stdio, or a
// Streamable HTTP URL — and registers each of its tools in a session as the
// agent-side capability "<serverId>.<toolName>" with origin
// {kind: "mcp", serverId}. It follows the server's list_changed
// notifications; [Imported.Close] deregisters everything and disconnects.
//
// docs/mcp.md describes the mapping in full.
package mcpbridge
