package mcpbridge

import (
	"context"
	"errors"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brainrt/brain/kernel"
	"github.com/brainrt/brain/protocol"
	"github.com/brainrt/brain/tool"
)

// ServeEnvironmentStdio serves the tools attached to env as MCP tools over
// newline-delimited JSON-RPC, reading requests from in and writing to out:
// what an MCP host expects of a server it launches (`brain mcp`, with
// os.Stdin and os.Stdout). When in ends, every request read before its end
// is answered first (so `printf '…' | brain mcp` prints every reply); it
// then returns nil. It returns ctx.Err() when ctx is done first; in is
// closed then if it is an io.Closer, so that a blocked read ends.
//
// A line that is not a JSON-RPC message MCP allows (not JSON, a batch, a
// wrong "jsonrpc", an id that is neither a string nor an integer within
// ±(2^53-1), more than 16 MiB) is answered with a JSON-RPC error: -32700
// or -32600, under the request's id when it has a usable one, else null.
// The next lines are served as before.
//
// The tool list is env.Tools() when the client connects. A tool becomes an
// MCP tool as a capability does in [NewServer] (name, description,
// inputSchema, outputSchema when it describes an object); a call is
// env.Invoke with the tool's arguments, and its outcome maps onto the result
// the same way: a value as text content (and structuredContent for an
// object), an error as isError with "<code>: <message>". When the request
// carries a progress token, the tool's progress reports are sent as
// notifications/progress.
//
// The tool list does not change while the client is connected. To follow
// attach and detach, and to have approval apply, expose the environment to
// a session (kernel.Environment.Expose) and serve that session with
// [NewServer].
func ServeEnvironmentStdio(ctx context.Context, env *kernel.Environment, in io.Reader, out io.Writer) error {
	o := (*ServerOptions)(nil).withDefaults()
	srv := newMCPServer(&o, false, false)
	h := envHandler(env)
	for _, m := range env.Tools() {
		c := protocol.Capability{Name: m.Name, Description: m.Description, InputSchema: m.InputSchema, OutputSchema: m.OutputSchema}
		// A tool the SDK refuses is left out; Attach compiled its schema, so
		// this is rare.
		if t, err := toolOf(&c); err == nil {
			_ = addTool(srv, t, h)
		}
	}
	closer, ok := in.(io.Closer)
	if !ok {
		closer = io.NopCloser(nil)
	}
	// A line the SDK cannot decode would end the connection: it is
	// answered here instead (vetMessage), and the SDK reads the others.
	w := &syncWriter{w: out}
	d := newDrainingIO(ctx, newVettedReader(in, w), w)
	err := srv.Run(ctx, &mcp.IOTransport{Reader: readCloser{d, closer}, Writer: nopWriteCloser{d}, MaxLineLength: -1})
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err == nil || errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed):
		return nil
	}
	return err
}

// envHandler runs a tools/call as a call of the environment's tool.
func envHandler(env *kernel.Environment) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		call := kernel.Call{Input: arguments(req)}
		if token := req.Params.GetProgressToken(); token != nil && req.Session != nil {
			call.Progress = func(p tool.Progress) {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: token, Progress: p.Done, Total: p.Total, Message: p.Message,
				})
			}
		}
		return resultOf(env.Invoke(ctx, req.Params.Name, call)), nil
	}
}

// readCloser reads from one thing and closes another.
type readCloser struct {
	io.Reader
	io.Closer
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
